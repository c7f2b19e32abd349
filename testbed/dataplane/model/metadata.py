"""What the stages hand each other, as the P4 program's metadata structs (p4/headers.p4):
the parameters a table hit gives, the slide tracker's outcome, and ingress's
decision with what every copy needs for its Windows header."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional


class WindowParams(NamedTuple):
    """What the window_spec actions write into metadata (window_params_t in headers.p4)."""

    is_count: bool
    slide: int
    full: int
    extra: int
    cap: int
    fixed_origin: int = 0
    origin: int = 0
    lateness: int = 0
    #: set_event_time_window: windows start at events, and last ``size``.
    event_starts: bool = False
    size: int = 0

    @classmethod
    def of(cls, action: str, params: tuple[int, ...]) -> "WindowParams":
        """set_count_window(slide, full, extra, cap), set_time_window(..., fixed_origin, origin, lateness)
        or set_event_time_window(slide, size, cap, fixed_origin, origin)."""
        if action == "set_event_time_window":
            slide, size, cap, fixed_origin, origin = params
            return cls(False, slide, 0, 0, cap, fixed_origin, origin, 0, True, size)
        return cls(action == "set_count_window", *params)


class PreviousParams(NamedTuple):
    """set_previous's action data: the epoch before the one in force, for its
    last windows during a transition (prev_params_t in headers.p4)."""

    slide: int
    full: int
    extra: int
    size: int
    n_ops: int
    tail: int


class SlideOutcome(NamedTuple):
    """The slide tracker's outcome: the windows of the epoch in force ``(w, c)``
    and, during a transition, those of the previous epoch ``(old_w, old_c)``;
    ``window`` and ``old_window`` are the global ids of the newest of each."""

    newest: int
    active: int
    old_newest: int = 0
    old_active: int = 0
    window: int = 0
    old_window: int = 0


class CopyMeta(NamedTuple):
    """What ingress hands every copy of an event for its Windows header
    (copy_meta_t in headers.p4): both epochs' windows, unclamped, with their
    N, the bank in force and its operator set, whose positions apply."""

    bank: int
    epoch: int
    verdict: SlideOutcome
    n_ops: int
    old_n_ops: int
    #: The operator set of the bank in force (operator_count's ``opset``).
    opset: int
    #: split_by_key's stream: the one copy carries all the event's windows.
    by_key: bool = False
    #: and the index of the key's operator.
    key_op: int = 0


@dataclass
class Decision:
    """Ingress outcome for one event: a port, a multicast group, or a drop."""

    port: Optional[int] = None
    mgid: Optional[int] = None
    drop: Optional[str] = None
    copy: Optional[CopyMeta] = None
