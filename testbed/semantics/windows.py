"""Window semantics: the oracle every target is held to.

One small assigner type per window semantic, behind one interface, in the
manner of Flink's window assigners.  An assigner answers one question: which
windows hold an event?  ``StreamOracle`` adds what a stream needs on top of
that (arrival numbering, the time origin, out-of-order events) and maps the
windows to operators round robin.  ``docs/windows.md`` states the definitions
this module implements.

Count and time windows share one piece of arithmetic: both place an event at
a coordinate ``x`` on an axis (its arrival index, or its timestamp minus the
origin) and window ``j`` covers ``j*slide <= x < j*slide + size``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

#: Why an event reached no operator.  The same names are used by the
#: targets' drop counters and by ``testbed check``.
NO_WINDOW = "no_window"          # falls in a gap between windows (size < slide)
BEFORE_ORIGIN = "before_origin"  # time window: timestamp earlier than the origin
TOO_LATE = "too_late"            # time window: more than the lateness behind the newest timestamp
DROP_REASONS = (NO_WINDOW, BEFORE_ORIGIN, TOO_LATE)

#: Lateness a time stream may allow, in slides: a late event then lies at
#: most this many slides before the newest one, which bounds the data
#: plane's extra work to as many compare-and-subtract steps (docs/windows.md).
MAX_LATE_SLIDES = 4


def late_slides(lateness: int, slide: int) -> int:
    """How many slides back a late event can lie: ``ceil(lateness / slide)``."""
    return -(-lateness // slide)


def windows_on_axis(x: int, size: int, slide: int) -> range:
    """Ids ``j >= 0`` of the windows ``[j*slide, j*slide + size)`` that hold ``x``.

    ``j <= x // slide`` because a window starts no later than ``x``;
    ``j*slide > x - size`` because it ends after ``x``.
    """
    if x < 0:
        return range(0)
    newest = x // slide
    oldest = max(0, -((size - 1 - x) // slide))  # ceil((x - size + 1) / slide)
    return range(oldest, newest + 1)


def windows_per_position(size: int, slide: int) -> tuple[int, int]:
    """``(full, extra)`` such that an event at offset ``p`` inside its slide is
    held by ``full + (1 if p < extra else 0)`` windows once start-up is over.

    This is what lets a data plane avoid division per event: with
    ``size = full*slide + extra`` the count depends only on ``p < extra``.
    """
    return size // slide, size % slide


def max_windows(size: int, slide: int) -> int:
    """Largest number of windows one event can fall in: ``ceil(size/slide)``."""
    return -(-size // slide)


class WindowAssigner(ABC):
    """Maps an event to the ids of the windows that hold it.

    Subclasses fix what the axis is; the interval arithmetic is shared.
    """

    kind: str = ""
    #: Whether the axis is event time, as Flink's ``isEventTime()`` tells:
    #: such streams have an origin and reject events that go back in time.
    is_event_time: bool = False

    def __init__(self, size: int, slide: int):
        if size <= 0 or slide <= 0:
            raise ValueError(f"window size and slide must be positive, got {size}, {slide}")
        self.size = size
        self.slide = slide

    @property
    def max_windows(self) -> int:
        return max_windows(self.size, self.slide)

    @abstractmethod
    def coordinate(self, index: int, ts: int, origin: int) -> int:
        """Position of the event on this assigner's axis."""

    def assign(self, index: int, ts: int, origin: int = 0) -> range:
        return windows_on_axis(self.coordinate(index, ts, origin), self.size, self.slide)

    def assign_many(self, index: np.ndarray, ts: np.ndarray, origin: int = 0,
                    owner: Optional[np.ndarray] = None, n_operators: int = 1) -> list[range]:
        """``assign`` for many events at once (the Spark job's operators use it).

        With ``owner`` (each event's operator index), each event keeps only
        the windows that operator owns, ``j mod n_operators == owner``; an
        owner of -1 (not among the stream's operators) keeps none.
        """
        x = np.asarray(self.coordinate(np.asarray(index, dtype=np.int64), np.asarray(ts, dtype=np.int64),
                                       origin), dtype=np.int64)
        newest = np.floor_divide(x, self.slide)
        oldest = np.maximum(0, -np.floor_divide(self.size - 1 - x, self.slide))
        valid = x >= 0
        if owner is None:
            return [range(o, w + 1) if ok else range(0)
                    for o, w, ok in zip(oldest.tolist(), newest.tolist(), valid.tolist())]
        owner = np.asarray(owner, dtype=np.int64)
        first = oldest + np.mod(owner - oldest, n_operators)
        valid &= owner >= 0
        return [range(f, w + 1, n_operators) if ok else range(0)
                for f, w, ok in zip(first.tolist(), newest.tolist(), valid.tolist())]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, slide={self.slide})"


class CountWindows(WindowAssigner):
    """Count windows: the axis is the arrival index ``k`` of the event in its stream."""

    kind = "count"

    def coordinate(self, index: int, ts: int, origin: int) -> int:
        return index


class TimeWindows(WindowAssigner):
    """Time windows: the axis is the event timestamp minus the stream's origin."""

    kind = "time"
    is_event_time = True

    def coordinate(self, index: int, ts: int, origin: int) -> int:
        return ts - origin


ASSIGNERS: dict[str, type[WindowAssigner]] = {cls.kind: cls for cls in (CountWindows, TimeWindows)}


def make_assigner(kind: str, size: int, slide: int) -> WindowAssigner:
    try:
        return ASSIGNERS[kind](size, slide)
    except KeyError:
        raise ValueError(f"unknown window kind {kind!r}; known: {sorted(ASSIGNERS)}") from None


@dataclass(frozen=True)
class Verdict:
    """What the oracle says about one event."""

    seq: int
    ts: int
    windows: range
    operators: tuple[str, ...]   # distinct, in the order their windows were opened
    dropped: Optional[str] = None

    @property
    def delivered(self) -> bool:
        return bool(self.operators)


def window_owner(window: int, operators: Sequence[str]) -> str:
    """Round robin: window ``j`` belongs to ``operators[j mod N]``."""
    return operators[window % len(operators)]


def window_owners(windows: np.ndarray, operators: Sequence[str]) -> np.ndarray:
    """``window_owner`` for an array of window ids."""
    return np.asarray(operators, dtype=object)[np.mod(np.asarray(windows, dtype=np.int64), len(operators))]


def operators_for(windows: range, operators: Sequence[str]) -> tuple[str, ...]:
    """Window ``j`` goes to ``operators[j % N]``; each operator is named once.

    When more windows overlap than there are operators, every operator is hit;
    at most ``N`` windows need to be looked at.
    """
    n = len(operators)
    if len(windows) >= n:
        windows = windows[-n:]
    seen: dict[str, None] = {}
    for j in windows:
        seen.setdefault(window_owner(j, operators), None)
    return tuple(seen)


class StreamOracle:
    """The reference splitter for one stream, walked in arrival order.

    It holds only what the definitions need: the arrival counter, the origin
    (learnt from the first event unless fixed) and the newest timestamp, to
    reject events more than ``lateness`` behind it.  A late event that is
    not too late lies in the windows of its own timestamp.
    """

    def __init__(self, assigner: WindowAssigner, operators: Sequence[str],
                 origin: Optional[int] = None, lateness: int = 0):
        if not operators:
            raise ValueError("a stream needs at least one operator")
        self.assigner = assigner
        self.operators = tuple(operators)
        self.origin = origin
        self.lateness = lateness
        self.count = 0
        self.last_ts: Optional[int] = None

    def step(self, seq: int, ts: int) -> Verdict:
        """Verdict for the next event to arrive."""
        if self.assigner.is_event_time:
            if self.last_ts is not None and ts < self.last_ts:
                if self.last_ts - ts > self.lateness:
                    return Verdict(seq, ts, range(0), (), TOO_LATE)
            else:
                self.last_ts = ts
            if self.origin is None:
                self.origin = ts
            if ts < self.origin:
                return Verdict(seq, ts, range(0), (), BEFORE_ORIGIN)
        index = self.count
        self.count += 1
        windows = self.assigner.assign(index, ts, self.origin or 0)
        if not windows:
            return Verdict(seq, ts, windows, (), NO_WINDOW)
        return Verdict(seq, ts, windows, operators_for(windows, self.operators))
