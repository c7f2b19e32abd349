"""Epochs (p4/epochs.p4): an armed change takes effect at the stream's next window boundary.

The previous epoch's newest slide is frozen there, the bank flips, and for
the transition that follows an event may still lie in the previous epoch's
windows, which these steps find from the frozen state.
"""
from __future__ import annotations

from testbed.dataplane.contract import U64
from testbed.dataplane.model.division import shift_subtract_divmod, step_back
from testbed.dataplane.model.metadata import PreviousParams, SlideOutcome
from testbed.semantics.windows import BEFORE_ORIGIN, NO_WINDOW


def old_windows_after(d: int, prev: PreviousParams, begun: int) -> int:
    """How many windows of the previous epoch hold a coordinate ``d`` past the
    boundary: those that started before it and have not ended yet.  Were the
    previous grid to go on, the slide holding ``d`` would open ``k + 1`` more
    windows at or after the boundary; they are not windows, so they are
    taken off what the previous spec counts at that position."""
    if d >= prev.size:
        return 0
    if d < prev.slide:
        k, p = 0, d
    else:
        k, p = shift_subtract_divmod(d, prev.slide)
    c = prev.full + (1 if p < prev.extra else 0) - (k + 1)
    return max(0, min(c, begun))


class EpochSwitch:
    """The boundary test, the switch of epochs, and late events before the boundary."""

    def _at_boundary(self, stream: int, ts: int) -> int:
        """Does this event cross the boundary of an armed change?  Only an
        in-order event that reaches the slide after the newest one does, and
        only once the previous transition is over.  It is decided before the
        spec is looked up (the bank depends on it), so the window kind comes
        from a register the stream's first event set."""
        regs = self.registers
        if not (regs["armed"][stream] and regs["initialized"][stream]) or regs["in_transition"][stream]:
            return 0
        if not regs["time_axis"][stream]:
            x = regs["event_count"][stream]
        elif ts < regs["last_ts"][stream]:
            return 0
        else:
            x = ts
        return 1 if x >= regs["next_start"][stream] else 0

    def _switch(self, stream: int, start: int, newest: int, begun: int, slide: int,
                prev: PreviousParams) -> tuple[int, int, int]:
        """The armed change takes effect: freeze the previous epoch's newest
        slide, flip the bank and begin the new epoch at the boundary."""
        regs = self.registers
        boundary = regs["next_start"][stream]
        regs["old_start"][stream], regs["old_newest"][stream], regs["old_begun"][stream] = start, newest, begun
        old_window = regs["newest_window"][stream]
        regs["old_window"][stream] = old_window
        regs["boundary"][stream] = boundary
        regs["transition_end"][stream] = (boundary + prev.tail) & U64
        regs["epoch"][stream] = (regs["epoch"][stream] + 1) & 0xFFFFFFFF
        regs["armed"][stream] = 0
        regs["in_transition"][stream] = 1
        # Window ids go on across epochs: the new epoch's first window
        # follows the previous epoch's newest.
        self._begin_epoch(stream, boundary, slide, (old_window + 1) & U64)
        return boundary, 0, 1

    def _previous_windows(self, stream: int, x: int, prev: PreviousParams) -> "str | SlideOutcome":
        """A late event before the boundary: the previous epoch's windows, found
        back from its frozen newest slide as any late event's are."""
        regs = self.registers
        start, newest, back = step_back(x, regs["old_start"][stream], regs["old_newest"][stream],
                                        prev.slide, prev.n_ops)
        begun = regs["old_begun"][stream]
        if back >= begun:
            return BEFORE_ORIGIN
        active = min(begun - back, prev.full + (1 if x - start < prev.extra else 0))
        if active == 0:
            return NO_WINDOW
        return SlideOutcome(0, 0, newest, active, 0, regs["old_window"][stream] - back)

