"""A count stream's state in the build without changes (p4/counts.p4).

p4/splitter_fixed.p4 tracks a count stream in window_spec's action, on
less state than the slide tracker keeps: a cell of ``count_state`` holds the
events of the newest slide so far (bits 0..39) and the newest window's
operator (bits 40..63), and ``newest_window`` the newest window's id, which
also counts the windows begun (one per slide, less one).  All zero is the
state before the first event.

The model writes the cell from its own tracker's state after every event
of a count stream (``SlideTracker``), where bmv2's can be compared with
it; ``step`` is the action's own algorithm, which the unit tests hold to
the tracker.
"""
from __future__ import annotations

from typing import NamedTuple

FILL_BITS = 40
NEWEST_BITS = 24
FILL_MASK = (1 << FILL_BITS) - 1


def pack(fill: int, newest: int) -> int:
    """A cell of ``count_state`` (``CountCell.pack`` without the tuple, for the per-event path)."""
    return fill | newest << FILL_BITS


class CountCell(NamedTuple):
    """A cell of ``count_state``."""

    fill: int       # events of the newest slide so far
    newest: int     # the newest window's operator

    def pack(self) -> int:
        return pack(self.fill, self.newest)

    @classmethod
    def unpack(cls, cell: int) -> "CountCell":
        return cls(cell & FILL_MASK, cell >> FILL_BITS)


def step(cell: int, window: int, slide: int, full: int, extra: int, n_ops: int) -> tuple[int, int, int, int]:
    """set_count_window's action in the build without changes, for one event
    of a stream whose cell and newest window are ``cell`` and ``window``:
    both after it, the newest window's operator, and how many windows hold
    the event (0: none, a gap between windows)."""
    state = CountCell.unpack(cell)
    if state.fill == slide:          # the newest slide is whole: the event begins the next
        state = CountCell(0, 0 if state.newest + 1 == n_ops else state.newest + 1)
        window += 1
    # the fewer of the windows begun (window + 1) and those held: the begun
    # while the newest id is below ``full``, the held from then on
    active = window + 1 if window < full else full + (1 if state.fill < extra else 0)
    return CountCell(state.fill + 1, state.newest).pack(), window, state.newest, active
