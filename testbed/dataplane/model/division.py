"""Division as the P4 program does it: by shift and subtract, in a fixed number of steps.

A switch cannot divide per event; ``slides.p4`` unrolls these loops, and the
model takes the same steps so that both agree on every value.
"""
from __future__ import annotations

from testbed.dataplane.contract import LATE_STEPS, U64


def shift_subtract_divmod(dividend: int, divisor: int) -> tuple[int, int]:
    """64-bit unsigned ``divmod`` by shifting and subtracting, as the P4 program
    does it (v1model targets have no run-time division).  ``(d >> i) >= divisor``
    tests ``d >= divisor << i`` without overflowing."""
    quotient, rest = 0, dividend
    for i in range(63, -1, -1):
        if (rest >> i) >= divisor:
            rest -= divisor << i
            quotient |= 1 << i
    return quotient, rest


def step_back(x: int, start: int, newest: int, slide: int, n_ops: int) -> tuple[int, int, int]:
    """STEP_BACK, LATE_STEPS times (slides.p4): from the newest slide back to
    the one holding a late event at ``x``.  Returns that slide's start, its
    newest operator and how many slides back it lies.  Below zero the start
    wraps as a 64-bit register would; the caller then finds the event before
    the origin."""
    back = 0
    for _ in range(LATE_STEPS):
        if x < start:
            start = (start - slide) & U64
            back += 1
            newest = newest - 1 if newest > 0 else n_ops - 1
    return start, newest, back
