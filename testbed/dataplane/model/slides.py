"""The slide tracker (p4/slides.p4): a stream's newest slide, its operator, and the windows begun.

Division is what a switch cannot afford per event: a new slide moves the
state on by subtraction, and only a gap in time takes the shift-and-subtract
division the P4 program unrolls.
"""
from __future__ import annotations

from typing import Optional

from testbed.dataplane.contract import COUNT_STATE, U64
from testbed.dataplane.model.counts import pack
from testbed.dataplane.model.division import shift_subtract_divmod, step_back
from testbed.dataplane.model.epochs import old_windows_after
from testbed.dataplane.model.metadata import PreviousParams, SlideOutcome, WindowParams
from testbed.semantics.windows import BEFORE_ORIGIN, NO_WINDOW, TOO_LATE


class SlideTracker:
    """Reads and advances a stream's window state in its registers (``ControlState.registers``)."""

    def _track(self, stream: int, ts: int, win: "WindowParams", n_ops: int,
               prev: Optional[PreviousParams] = None, switching: int = 0) -> "str | SlideOutcome":
        """SlideTracker (slides.p4): read and advance the stream's window state.

        Returns a drop reason, or the verdict: the operator of the newest
        window holding the event and how many windows hold it, for the epoch
        in force and, in a transition, for the previous one.
        """
        regs = self.registers
        first = regs["initialized"][stream] == 0
        late = False
        if win.is_count:
            x = regs["event_count"][stream]
            regs["event_count"][stream] = (x + 1) & U64
            origin = x
        else:
            x = ts
            newest_ts = regs["last_ts"][stream]
            if not first and ts < newest_ts:
                if newest_ts - ts > win.lateness:
                    return TOO_LATE
                late = True
            else:
                regs["last_ts"][stream] = ts
            origin = win.origin if win.fixed_origin else ts
        if first:
            regs["initialized"][stream] = 1
            regs["time_axis"][stream] = 0 if win.is_count else 1
            self._begin_epoch(stream, origin, win.slide, 0)
        if win.event_starts:
            return self._track_event_starts(stream, x, win, n_ops)
        start, newest, begun = regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream]
        if switching:
            start, newest, begun = self._switch(stream, start, newest, begun, win.slide, prev)
        window = regs["newest_window"][stream]
        old_newest = old_active = old_window = 0
        if regs["in_transition"][stream]:
            boundary = regs["boundary"][stream]
            if x < boundary:
                # A late event before the boundary lies in previous windows only.
                return self._previous_windows(stream, x, prev)
            old_newest = regs["old_newest"][stream]
            old_window = regs["old_window"][stream]
            old_active = old_windows_after(x - boundary, prev, regs["old_begun"][stream])
            if not late and x >= regs["transition_end"][stream]:
                regs["in_transition"][stream] = 0
        if late:
            # Nothing advances: back from the newest slide to the event's own.
            start, newest, back = step_back(x, start, newest, win.slide, n_ops)
            if back >= begun:
                return BEFORE_ORIGIN
            begun -= back
            window -= back
        elif x < start:
            return BEFORE_ORIGIN
        elif x - start >= win.slide:
            start, newest, begun, window = self._advance(stream, x, start, newest, begun, window, win, n_ops)
        if win.is_count:
            # the same state as the build without changes lays it out (counts.p4)
            regs[COUNT_STATE][stream] = pack(x + 1 - start, newest)
        active = win.full + (1 if x - start < win.extra else 0)
        if begun < active:
            active = begun
        if active == 0 and old_active == 0:
            return NO_WINDOW
        return SlideOutcome(newest, active, old_newest, old_active, window, old_window)

    def _begin_epoch(self, stream: int, start: int, slide: int, window: int) -> None:
        """An epoch's first slide: its window ``window`` (a global id) at ``start``, on operator 0."""
        regs = self.registers
        regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream] = start, 0, 1
        regs["next_start"][stream] = (start + slide) & U64
        regs["newest_window"][stream] = window

    def _advance(self, stream: int, x: int, start: int, newest: int, begun: int, window: int,
                 win: "WindowParams", n_ops: int) -> tuple[int, int, int, int]:
        """A new slide (or several, after a gap in time) has begun: move the
        stream's state on by the slides passed, with division only after a gap."""
        offset = x - start
        if offset - win.slide < win.slide:
            # The next slide: one of each (begun <= cap holds).
            offset, advanced, step = offset - win.slide, 1, 1
            if begun < win.cap:
                begun += 1
        else:
            advanced, offset = shift_subtract_divmod(offset, win.slide)
            if advanced < n_ops:
                step = advanced
            elif advanced - n_ops < n_ops:      # one lap: no division for it
                step = advanced - n_ops
            else:
                step = shift_subtract_divmod(advanced, n_ops)[1]
            begun = win.cap if advanced >= win.cap or begun + advanced >= win.cap else begun + advanced
        newest += step          # newest < N, so one subtraction wraps it
        if newest >= n_ops:
            newest -= n_ops
        regs = self.registers
        start = x - offset
        regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream] = start, newest, begun
        regs["next_start"][stream] = (start + win.slide) & U64
        window = (window + advanced) & U64
        regs["newest_window"][stream] = window
        return start, newest, begun, window

    def _track_event_starts(self, stream: int, x: int, win: "WindowParams", n_ops: int) -> "str | SlideOutcome":
        """Windows that start at events (slides.p4, EventStartTracker): an
        in-order event at or past the newest start + slide opens one window
        at its own coordinate, and the starts of the three before it move
        back one register.  The windows holding x are the newest ones that
        have not ended: no division, four comparisons."""
        regs = self.registers
        start, newest, begun = regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream]
        window = regs["newest_window"][stream]
        if x < start:
            return BEFORE_ORIGIN
        if x - start >= win.slide:
            regs["start_back3"][stream] = regs["start_back2"][stream]
            regs["start_back2"][stream] = regs["start_back1"][stream]
            regs["start_back1"][stream] = start
            start = x
            newest = 0 if newest + 1 >= n_ops else newest + 1
            if begun < win.cap:
                begun += 1
            window = (window + 1) & U64
            regs["slide_start"][stream], regs["newest_op"][stream], regs["begun"][stream] = start, newest, begun
            regs["next_start"][stream] = (start + win.slide) & U64
            regs["newest_window"][stream] = window
        # Starts grow and every window lasts size, so an older window holds
        # x only if every newer one does: counting the ones that do suffices.
        active = 0
        for i, begun_start in enumerate((start, regs["start_back1"][stream], regs["start_back2"][stream],
                                         regs["start_back3"][stream])):
            if begun > i and x - begun_start < win.size:
                active += 1
        if active == 0:
            return NO_WINDOW
        return SlideOutcome(newest, active, 0, 0, window, 0)
