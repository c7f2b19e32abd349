"""Window semantics: the oracle every target is held to.

One small assigner type per window semantic, behind one interface, in the
manner of Flink's window assigners.  An assigner answers one question: which
windows hold an event?  ``StreamOracle`` adds what a stream needs on top of
that (arrival numbering, the time origin, out-of-order events) and maps the
windows to operators round robin.  ``docs/windows.md`` states the definitions
this module implements.

Count and time windows share one piece of arithmetic: both place an event at
a coordinate ``x`` on an axis (its arrival index, or its timestamp minus the
origin) and window ``j`` covers ``j*slide <= x < j*slide + size``.  Time
windows may instead start at events (``starts: event``, S4's rule): then
window ``j`` covers ``[s_j, s_j + size)`` with ``s_j`` the coordinate of the
event that opened it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from testbed.semantics.splitting import key_operator

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

#: Window-start rules of time windows (docs/windows.md, "Where windows start").
GRID, EVENT = "grid", "event"
START_RULES = (GRID, EVENT)

#: Under ``starts: event`` the data plane keeps the starts of this many
#: newest windows per stream, so a spec may let at most this many windows
#: hold an event (ceil(size/slide)).
MAX_EVENT_WINDOWS = 4


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

    #: Where windows start (``GRID`` or ``EVENT``); count windows always on the grid.
    starts: str = GRID

    def windows_at(self, x: int) -> range:
        """Ids of the windows that hold coordinate ``x``."""
        return windows_on_axis(x, self.size, self.slide)

    def observe(self, x: int) -> None:
        """An in-order event reached coordinate ``x`` (``x >= 0``).  Grid
        windows start where they start whatever the events: nothing to learn."""

    def fresh(self) -> "WindowAssigner":
        """An assigner of the same spec that has seen no event."""
        return type(self)(self.size, self.slide)

    def assign(self, index: int, ts: int, origin: int = 0) -> range:
        return self.windows_at(self.coordinate(index, ts, origin))

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


class EventStartTimeWindows(TimeWindows):
    """Time windows that start at events (S4's rule, ``starts: event``).

    Window 0 starts at the origin (coordinate 0).  Window ``j + 1`` starts at
    the first in-order event whose coordinate is at or past ``s_j + slide``,
    at that event's coordinate, however far past it lies: after a gap in
    time one window opens, not one per slide passed.  Window ``j`` covers
    ``[s_j, s_j + size)``.  The starts depend on the stream so far, so unlike
    the grid assigners this one has state: one instance per stream.
    """

    starts = EVENT

    def __init__(self, size: int, slide: int):
        super().__init__(size, slide)
        self._starts = [0]

    @property
    def window_starts(self) -> tuple[int, ...]:
        """The coordinates where the windows opened so far start, window 0 first."""
        return tuple(self._starts)

    def observe(self, x: int) -> None:
        if x >= self._starts[-1] + self.slide:
            self._starts.append(x)

    def windows_at(self, x: int) -> range:
        # Starts increase and every window has the same size, so the windows
        # holding x are a run of consecutive ids: those that start at or
        # before x and after x - size.
        if x < 0:
            return range(0)
        return range(bisect_right(self._starts, x - self.size), bisect_right(self._starts, x))

    def assign_many(self, index: np.ndarray, ts: np.ndarray, origin: int = 0,
                    owner: Optional[np.ndarray] = None, n_operators: int = 1) -> list[range]:
        """``assign`` for the events of one whole stream, from its start: the
        starts depend on every event before, so the events are walked in
        arrival (index) order by a fresh assigner."""
        index = np.asarray(index, dtype=np.int64)
        x = np.asarray(ts, dtype=np.int64) - origin
        walker = self.fresh()
        out: list[range] = [range(0)] * len(x)
        newest = None
        for i in np.argsort(index, kind="stable").tolist():
            xi = int(x[i])
            if newest is None or xi >= newest:
                newest = xi
                if xi >= 0:
                    walker.observe(xi)
            r = walker.windows_at(xi)
            if owner is not None:
                own = int(owner[i])
                r = range(0) if own < 0 or not len(r) else range(r.start + (own - r.start) % n_operators,
                                                                 r.stop, n_operators)
            out[i] = r
        return out


ASSIGNERS: dict[str, type[WindowAssigner]] = {cls.kind: cls for cls in (CountWindows, TimeWindows)}


def make_assigner(kind: str, size: int, slide: int, starts: str = GRID) -> WindowAssigner:
    if starts == EVENT:
        if kind != "time":
            raise ValueError(f"only time windows can start at events, not {kind} windows")
        return EventStartTimeWindows(size, slide)
    if starts != GRID:
        raise ValueError(f"unknown window-start rule {starts!r}; known: {list(START_RULES)}")
    try:
        return ASSIGNERS[kind](size, slide)
    except KeyError:
        raise ValueError(f"unknown window kind {kind!r}; known: {sorted(ASSIGNERS)}") from None


@dataclass(frozen=True)
class EventVerdict:
    """What the oracle says about one event."""

    seq: int
    ts: int
    windows: Sequence[int]       # global window ids (a range unless a change made them skip)
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


@dataclass(frozen=True)
class StreamConfig:
    """What a change can replace: the window spec (with its lateness) and the
    ordered operator list.  The kind and a time stream's origin fix the axis,
    so they stay for the stream's lifetime."""

    assigner: WindowAssigner
    operators: tuple[str, ...]
    lateness: int = 0

    def __post_init__(self):
        if not self.operators:
            raise ValueError("a stream needs at least one operator")
        if len(set(self.operators)) != len(self.operators):
            raise ValueError(f"operators listed twice in {list(self.operators)}")


@dataclass(frozen=True)
class Epoch:
    """One configuration of a stream and the part of the axis it opens windows in.

    Window ``j`` of the epoch covers ``[start + j*slide, start + j*slide + size)``
    and exists only if it starts before ``end``, the next epoch's start
    (``None``: no later epoch).  Its global id is ``first_window + j``, so ids
    keep increasing with window start across changes.
    """

    start: int
    config: StreamConfig
    first_window: int = 0
    end: Optional[int] = None

    @property
    def slide(self) -> int:
        return self.config.assigner.slide

    @property
    def size(self) -> int:
        return self.config.assigner.size

    @property
    def n_windows(self) -> Optional[int]:
        """How many windows the epoch opens (``None`` while it is the newest)."""
        return None if self.end is None else (self.end - self.start) // self.slide

    @property
    def last_end(self) -> Optional[int]:
        """Where the epoch's last window ends: its transition is over from there."""
        n = self.n_windows
        if n is None:
            return None
        return self.start + (n - 1) * self.slide + self.size

    def local_windows(self, x: int) -> range:
        """Local ids ``j`` of this epoch's windows that hold coordinate ``x``."""
        r = self.config.assigner.windows_at(x - self.start)
        n = self.n_windows
        if n is not None and r.stop > n:
            r = range(r.start, max(r.start, n))
        return r

    def boundary_after(self, newest: Optional[int]) -> int:
        """Where a change armed now takes effect: the first window start of this
        epoch after its newest slide, the one holding ``newest`` (or its first
        slide if no coordinate has reached the epoch yet)."""
        reached = 0 if newest is None or newest < self.start else (newest - self.start) // self.slide
        return self.start + (reached + 1) * self.slide


def chain_epochs(first: StreamConfig, changes: Sequence[tuple[int, StreamConfig]]) -> tuple[Epoch, ...]:
    """Epochs of a stream from its first configuration and its changes, each
    given as ``(start, new config)`` with ``start`` a window start of the
    epoch before it (as ``Epoch.boundary_after`` gives)."""
    epochs = [Epoch(0, first)]
    if changes and EVENT in {first.assigner.starts, *(config.assigner.starts for _start, config in changes)}:
        raise ValueError("a stream whose windows start at events takes no change: the data plane keeps "
                         "the starts of one epoch's windows only (docs/windows.md, \"Where windows start\")")
    for start, config in changes:
        prev = epochs[-1]
        if config.assigner.kind != first.assigner.kind:
            raise ValueError(f"a change cannot turn {first.assigner.kind} windows into {config.assigner.kind} ones")
        if start <= prev.start or (start - prev.start) % prev.slide:
            raise ValueError(f"a change at {start} is not a window start after {prev.start} "
                             f"(slide {prev.slide})")
        n = (start - prev.start) // prev.slide
        epochs[-1] = Epoch(prev.start, prev.config, prev.first_window, start)
        epochs.append(Epoch(start, config, prev.first_window + n))
    return tuple(epochs)


class StreamOracle:
    """The reference splitter for one stream, walked in arrival order.

    It holds only what the definitions need: the arrival counter, the origin
    (learnt from the first event unless fixed), the newest timestamp, to
    reject events more than ``lateness`` behind it, and the stream's epochs
    (docs/windows.md, "Reconfiguration").  A late event that is not too late
    lies in the windows of its own timestamp.

    Changes come either as they took effect (``changes``: ``(start, config)``
    on the axis, what a run record keeps) or as they are armed between
    events (``arm``), which places them by the definition.
    """

    def __init__(self, assigner: WindowAssigner, operators: Sequence[str],
                 origin: Optional[int] = None, lateness: int = 0,
                 changes: Sequence[tuple[int, StreamConfig]] = (), split: str = "windows"):
        # The first epoch's assigner fixes the axis (kind, coordinate) for
        # every epoch: chain_epochs refuses a change of kind.
        self.assigner = assigner
        #: ``windows``: round robin over windows; ``key``: one operator per key
        #: (testbed.semantics.splitting), whose configuration never changes.
        self.split = split
        if split == "key" and changes:
            raise ValueError("a stream split by key keeps its windows and operators for the whole run")
        self.epochs = chain_epochs(StreamConfig(assigner, tuple(operators), lateness), changes)
        self.origin = origin
        self.count = 0
        self.last_ts: Optional[int] = None

    @property
    def epochs(self) -> tuple[Epoch, ...]:
        return self._epochs

    @epochs.setter
    def epochs(self, epochs: tuple[Epoch, ...]) -> None:
        # Lookup aids, so that a run with many changes is checked in
        # O(log E) per event: the starts, and how far the windows of each
        # epoch or any earlier one reach (older epochs may reach further).
        self._epochs = epochs
        self._starts = [e.start for e in epochs]
        self._firsts = [e.first_window for e in epochs]
        reach, self._reach = 0, []
        for e in epochs:
            end = e.last_end
            reach = max(reach, end if end is not None else 1 << 64)
            self._reach.append(reach)

    @property
    def operators(self) -> tuple[str, ...]:
        return self.epochs[-1].config.operators

    def _live_epochs(self, x: int) -> list[Epoch]:
        """The epochs whose windows may hold ``x``, oldest first."""
        i = max(0, bisect_right(self._starts, x) - 1)
        out = []
        while i >= 0 and self._reach[i] > x:
            out.append(self._epochs[i])
            i -= 1
        return out[::-1]

    def newest_coordinate(self) -> Optional[int]:
        """The newest point the stream has reached on its axis, ``None`` before any event."""
        if self.assigner.is_event_time:
            return None if self.last_ts is None or self.origin is None else self.last_ts - self.origin
        return self.count - 1 if self.count else None

    def arm(self, config: StreamConfig) -> int:
        """Arm a change between two events; returns where it takes effect.

        It takes effect at the first window start of the current epoch after
        the newest slide.  A change armed while another waits for its boundary
        replaces that one at the same boundary.
        """
        if self.split == "key":
            raise ValueError("a stream split by key keeps its windows and operators for the whole run")
        newest = self.newest_coordinate()
        changes = [(e.start, e.config) for e in self.epochs[1:]]
        waiting = bool(changes) and (newest is None or newest < changes[-1][0])
        if waiting:
            start = changes.pop()[0]
        else:
            start = self.epochs[-1].boundary_after(newest)
        self.epochs = chain_epochs(self.epochs[0].config, changes + [(start, config)])
        return start

    def epoch_at(self, x: int) -> Epoch:
        """The epoch in force at coordinate ``x``: the newest that starts at or before it."""
        return self._epochs[max(0, bisect_right(self._starts, x) - 1)]

    def assign(self, x: int) -> tuple[Sequence[int], tuple[str, ...]]:
        """Global ids of every window, of any epoch, that holds coordinate ``x``,
        and each distinct operator of those windows once, older epochs first."""
        live = self._live_epochs(x) if len(self._epochs) > 1 else self._epochs
        if len(live) == 1:
            epoch = live[0]
            r = epoch.local_windows(x)
            first = epoch.first_window
            return range(first + r.start, first + r.stop), operators_for(r, epoch.config.operators)
        ids: list[int] = []
        seen: dict[str, None] = {}
        for epoch in live:
            r = epoch.local_windows(x)
            ids.extend(range(epoch.first_window + r.start, epoch.first_window + r.stop))
            for op in operators_for(r, epoch.config.operators):
                seen.setdefault(op, None)
        return tuple(ids), tuple(seen)

    def windows_at(self, x: int) -> Sequence[int]:
        """Global ids of every window, of any epoch, that holds coordinate ``x``."""
        return self.assign(x)[0]

    def owner(self, window: int, key: int = 0) -> str:
        """The operator window ``window`` (a global id) goes to: round robin
        within its epoch, or, split by key, the operator of ``key``."""
        if self.split == "key":
            return self.operators[key_operator(key, len(self.operators))]
        epoch = self._epochs[bisect_right(self._firsts, window) - 1]
        return window_owner(window - epoch.first_window, epoch.config.operators)

    def step(self, seq: int, ts: int, key: int = 0) -> EventVerdict:
        """EventVerdict for the next event to arrive (``key`` matters only when split by key)."""
        if self.assigner.is_event_time:
            in_order = self.last_ts is None or ts >= self.last_ts
            if not in_order:
                newest = self.last_ts - (self.origin or 0)
                if self.last_ts - ts > self.epoch_at(newest).config.lateness:
                    return EventVerdict(seq, ts, range(0), (), TOO_LATE)
            else:
                self.last_ts = ts
            if self.origin is None:
                self.origin = ts
            if ts < self.origin:
                return EventVerdict(seq, ts, range(0), (), BEFORE_ORIGIN)
            if in_order:
                # only an in-order event may open a window (windows that start at events)
                self.assigner.observe(ts - self.origin)
        index = self.count
        self.count += 1
        windows, operators = self.assign(self.assigner.coordinate(index, ts, self.origin or 0))
        if not windows:
            return EventVerdict(seq, ts, windows, (), NO_WINDOW)
        if self.split == "key":
            operators = (self.owner(windows[0], key),)
        return EventVerdict(seq, ts, windows, operators)
