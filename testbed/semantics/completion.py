"""When a window's result may leave the operators, and the merger that emits it.

A window is *complete* once no event still to come can belong to it
(docs/windows.md, "When a window is complete"):

- a **count window** when the operators together hold all ``size`` of its
  events;
- a **time window** when the watermark of every operator that holds its
  events has reached the window's end.  An operator's watermark is the
  highest timestamp it has received minus the stream's lateness: the switch
  forwards an event only if it is at most the lateness behind the newest
  timestamp it has seen, and each operator receives its copies in the
  switch's order, so nothing later can reach that operator below its
  watermark.

One small type per window kind decides this (``CountCompletion``,
``TimeCompletion``); ``LiveMerger`` keeps the partial aggregates of the
windows still open, asks the stream's rule after every batch of copies, and
emits each window once: when it is complete, or marked incomplete at the end
of the input or after a timeout (events lost before the switch, a failed
operator).  It is plain pandas and NumPy so that the oracle's tests can
drive it without Spark; ``operators/window_job.py`` feeds it micro-batches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy as np
import pandas as pd

from testbed.semantics.queries import query

#: Partial aggregates per (stream, window, owner, gkey), as the operators fold them.
PART_KEYS = ["stream", "window", "owner", "gkey"]
#: ``best`` is the highest (value, -key) pair, so both of its columns come from one row:
#: the state is sorted by it first (``LiveMerger._fold``).
PART_AGG = {"n": "sum", "sum": "sum", "min": "min", "max": "max", "best_value": "first", "best_negkey": "first"}
#: Events per (stream, window, owner), whatever the query filters, and the newest of them.
COUNT_KEYS = ["stream", "window", "owner"]
#: Columns of an emitted window's rows.
EMITTED_COLUMNS = ["stream", "window", "operator", "key", "result", "n_events", "emitted_ns", "emitted_by",
                   "completing_seq"]
#: Why a window left: the definition says it is complete, the input ended, or it timed out.
COMPLETE, END_OF_INPUT, TIMEOUT = "complete", "end of input", "timeout"


class Completion(Protocol):
    """Which of a stream's open windows are complete, and the event that completed each."""

    def ready(self, windows: pd.DataFrame, watermarks: "Watermarks") -> pd.Series:
        """``windows`` has one row per open window (``window``, ``events``,
        ``last_seq``, ``owners``); the result maps each complete window's id
        to the seq of the event that completed it."""
        ...


@dataclass(frozen=True)
class CountCompletion:
    """A count window is complete when it holds ``size`` events; the newest completed it."""

    size: int

    def ready(self, windows: pd.DataFrame, watermarks: "Watermarks") -> pd.Series:
        done = windows[windows["events"] >= self.size]
        return pd.Series(done["last_seq"].to_numpy(), index=done["window"].to_numpy(), dtype="int64")


@dataclass(frozen=True)
class TimeCompletion:
    """A time window ``j`` covers ``[origin + j * slide, origin + j * slide + size)``;
    it is complete when each operator that holds its events has a watermark
    at or past its end.  With ``all_owners`` (a stream split by key, whose
    windows every operator may hold) that is every operator of the stream."""

    origin: int
    slide: int
    size: int
    lateness: int
    stream: int
    all_owners: tuple[str, ...] = ()

    def end(self, window: np.ndarray) -> np.ndarray:
        return self.origin + window.astype(np.int64) * self.slide + self.size

    def ready(self, windows: pd.DataFrame, watermarks: "Watermarks") -> pd.Series:
        done: dict[int, int] = {}
        for window, owners, end in zip(windows["window"], windows["owners"], self.end(windows["window"].to_numpy())):
            crossings = [watermarks.crossing(self.stream, owner, int(end) + self.lateness)
                         for owner in (self.all_owners or owners)]
            if all(c is not None for c in crossings):
                # the owner whose watermark got there last completed the window
                done[int(window)] = max(crossings, key=lambda c: c[0])[1]
        return pd.Series(done, dtype="int64")


@dataclass
class Watermarks:
    """Per (stream, operator): the highest timestamp received, and for the
    newest batch, where it rose (arrival order), to name the event that
    pushed it past a window's end."""

    highest: dict[tuple[int, str], int] = field(default_factory=dict)
    #: (stream, owner) -> the highest ts before the last batch, and the batch's
    #: running highest ts, recv_ns and seq in arrival order.
    rises: dict[tuple[int, str], tuple[int, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)

    def advance(self, events: pd.DataFrame) -> None:
        """Take a batch of copies (``stream``, ``operator``, ``seq``, ``ts``, ``recv_ns``)."""
        self.rises = {}
        if events.empty:
            return
        ordered = events.sort_values(["recv_ns", "seq"], kind="stable")
        # One vectorized pass, then a slice per (stream, operator): a batch of
        # thousands of streams over many instances has a hundred thousand of them.
        codes, keys = pd.factorize(pd.MultiIndex.from_arrays([ordered["stream"].to_numpy(np.int64),
                                                              ordered["operator"].astype(str).to_numpy()]))
        order = np.argsort(codes, kind="stable")           # arrival order kept within each
        codes = codes[order]
        ts = ordered["ts"].to_numpy(np.int64)[order]
        recv = ordered["recv_ns"].to_numpy(np.int64)[order]
        seq = ordered["seq"].to_numpy(np.int64)[order]
        highest_so_far = pd.Series(ts).groupby(codes).cummax().to_numpy(np.int64)
        starts = np.r_[0, np.flatnonzero(np.diff(codes)) + 1]
        ends = np.r_[starts[1:], len(codes)]
        for start, end in zip(starts, ends):
            stream, owner = keys[codes[start]]
            key = (int(stream), str(owner))
            before = self.highest.get(key, np.iinfo(np.int64).min)
            running = np.maximum(highest_so_far[start:end], before)
            self.rises[key] = (before, running, recv[start:end], seq[start:end])
            self.highest[key] = int(running[-1])

    def crossing(self, stream: int, owner: str, threshold: int) -> Optional[tuple[int, int]]:
        """``None`` while the operator's highest timestamp is below ``threshold``;
        otherwise ``(recv_ns, seq)`` of the event of the last batch that got it
        there, or ``(-1, -1)`` if it was there before that batch."""
        key = (stream, owner)
        if key not in self.highest or self.highest[key] < threshold:
            return None
        if key not in self.rises or self.rises[key][0] >= threshold:
            return (-1, -1)
        _, running, recv, seq = self.rises[key]
        i = int(np.searchsorted(running, threshold, side="left"))
        return (int(recv[i]), int(seq[i]))


def live_differences(windows: pd.DataFrame) -> dict[int, list[int]]:
    """Per stream, the windows the live merger emitted as complete whose
    emitted rows (``live_result``, ``live_n_events``) differ from the final
    ones in ``windows`` (none for runs from before the live merger)."""
    if "live_result" not in windows.columns:
        return {}
    live = windows[windows["emitted_by"] == COMPLETE]
    # NaN equals nothing, itself included: a NaN emitted live and kept is no agreement.
    same_count = (live["live_n_events"] == live["n_events"]).fillna(False).astype(bool)
    differs = ~same_count | ~np.isclose(live["live_result"].astype(float), live["result"].astype(float))
    return {int(sid): sorted(set(rows["window"].astype(int))) for sid, rows in live[differs].groupby("stream")}


def completion_rule(spec: dict) -> Optional[Completion]:
    """The rule of a stream's job record, or ``None`` when its windows are
    emitted only at the end of the input (a stream whose window spec the
    schedule changes, or whose windows start at events: their extent then
    depends on the epochs or on the events)."""
    if not spec.get("live", True):
        return None
    w = spec["window"]
    if w["kind"] == "count":
        return CountCompletion(int(w["size"]))
    if w.get("starts") == "event":
        # A window's end is its start plus size, and its start is an event's
        # timestamp the job does not track: emitted at the end of the input.
        return None
    owners = tuple(spec["operators"]) if spec.get("split") == "key" else ()
    return TimeCompletion(int(spec["origin"]), int(w["slide"]), int(w["size"]), int(w.get("lateness") or 0),
                          int(spec["id"]), owners)


def results(parts: pd.DataFrame, specs: dict[int, dict]) -> pd.DataFrame:
    """The query's result and key per (stream, window, owner, gkey) row of merged partials."""
    out = []
    # by kind of query, not by stream: thousands of streams share a handful of kinds
    kinds = parts["stream"].map(lambda sid: specs[int(sid)]["query"]["kind"])
    for kind, rows in parts.groupby(kinds, sort=False):
        q = query(kind)
        n = rows["n"].to_numpy(dtype=np.float64)
        result = {"n": lambda: n, "sum": lambda: rows["sum"], "min": lambda: rows["min"], "max": lambda: rows["max"],
                  "mean": lambda: rows["sum"] / n, "best": lambda: rows["best_value"]}[q.result]()
        key = {None: lambda: pd.Series(pd.NA, index=rows.index, dtype="Int64"),
               "group": lambda: rows["gkey"].astype("Int64"),
               "best": lambda: (-rows["best_negkey"]).astype("Int64")}[q.key]()
        out.append(pd.DataFrame({"stream": rows["stream"].to_numpy(np.int64),
                                 "window": rows["window"].to_numpy(np.int64),
                                 "operator": rows["owner"].to_numpy(), "key": key.to_numpy(),
                                 "result": np.asarray(result, dtype=np.float64),
                                 "n_events": rows["n"].to_numpy(np.int64)}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=EMITTED_COLUMNS[:6])


class LiveMerger:
    """The operators' open windows, merged batch by batch; each window leaves once.

    ``add`` takes one micro-batch: its partial aggregates, its per-window
    event counts and its copies' timestamps; it returns the rows of the
    windows that became complete.  ``close`` emits what is left, marked
    incomplete.  A window that times out (no change for ``timeout_s``) is
    emitted incomplete as well.  Copies that arrive for a window already
    emitted are counted in ``after_emission``, never emitted twice.
    """

    def __init__(self, specs: dict[int, dict], timeout_s: Optional[float] = None):
        self.specs = specs
        self.rules = {sid: completion_rule(spec) for sid, spec in specs.items()}
        self._timed = [sid for sid, rule in self.rules.items() if isinstance(rule, TimeCompletion)]
        self.timeout_ns = None if timeout_s is None else int(timeout_s * 1e9)
        self.parts = pd.DataFrame(columns=PART_KEYS + list(PART_AGG))
        self.counts = pd.DataFrame(columns=COUNT_KEYS + ["events", "last_seq", "touched_ns"])
        self.watermarks = Watermarks()
        self.emitted: set[tuple[int, int]] = set()
        self.after_emission = 0

    def add(self, parts: pd.DataFrame, counts: pd.DataFrame, events: pd.DataFrame, now_ns: int) -> pd.DataFrame:
        if len(counts):
            done = self._was_emitted(counts)
            self.after_emission += int(counts.loc[done, "events"].sum())
            counts = counts[~done].assign(touched_ns=now_ns)
            parts = parts[~self._was_emitted(parts)]
            self.counts = self._fold(self.counts, counts, COUNT_KEYS,
                                     {"events": "sum", "last_seq": "max", "touched_ns": "max"})
            self.parts = self._fold(self.parts, parts, PART_KEYS, PART_AGG)
        self.watermarks.advance(events)
        out = [self._emit_ready(now_ns)]
        if self.timeout_ns is not None:
            stale = self.counts[self.counts["touched_ns"] < now_ns - self.timeout_ns]
            out.append(self._emit(stale[["stream", "window"]].drop_duplicates(), now_ns, TIMEOUT))
        return self._concat(out)

    def close(self, now_ns: int) -> pd.DataFrame:
        """Every window still open, marked incomplete (the input has ended)."""
        return self._emit(self.counts[["stream", "window"]].drop_duplicates(), now_ns, END_OF_INPUT)

    @property
    def open_windows(self) -> int:
        return int(self.counts[["stream", "window"]].drop_duplicates().shape[0])

    # -- internals -----------------------------------------------------------
    def _was_emitted(self, rows: pd.DataFrame) -> np.ndarray:
        return np.fromiter(((int(s), int(w)) in self.emitted for s, w in zip(rows["stream"], rows["window"])),
                           dtype=bool, count=len(rows))

    @staticmethod
    def _fold(state: pd.DataFrame, new: pd.DataFrame, keys: list[str], agg: dict) -> pd.DataFrame:
        if new.empty:
            return state
        both = new if state.empty else pd.concat([state, new[state.columns]], ignore_index=True)
        if "best_value" in both.columns:
            both = both.sort_values(["best_value", "best_negkey"], ascending=False, kind="stable")
        return both.groupby(keys, as_index=False, sort=False).agg(agg)

    def _emit_ready(self, now_ns: int) -> pd.DataFrame:
        """The open windows that are complete by their stream's rule, emitted
        together: the work grows with the open windows, not with the streams."""
        if self.counts.empty:
            return self._concat([])
        windows = self.counts.groupby(["stream", "window"], as_index=False, sort=False).agg(
            events=("events", "sum"), last_seq=("last_seq", "max"))
        # Only a time window's rule reads who holds it; a per-group lambda over every open window costs seconds.
        timed = self.counts[self.counts["stream"].isin(self._timed)]
        if len(timed):
            owners = (timed.drop_duplicates(["stream", "window", "owner"]).sort_values("owner", kind="stable")
                      .groupby(["stream", "window"], sort=False)["owner"].agg(tuple).rename("owners").reset_index())
            windows = windows.merge(owners, on=["stream", "window"], how="left")
        ready = []
        for sid, mine in windows.groupby("stream", sort=False):
            rule = self.rules.get(int(sid))
            if rule is None:
                continue
            completing = rule.ready(mine, self.watermarks)
            if not completing.empty:
                ready.append(pd.DataFrame({"stream": int(sid), "window": completing.index.to_numpy(np.int64),
                                           "completing_seq": completing.to_numpy(np.int64)}))
        if not ready:
            return self._concat([])
        return self._emit(pd.concat(ready, ignore_index=True), now_ns, COMPLETE)

    def _emit(self, which: pd.DataFrame, now_ns: int, why: str) -> pd.DataFrame:
        """Emit the windows ``which`` names (``stream``, ``window``, and
        ``completing_seq`` when a rule found them complete)."""
        if which.empty:
            return self._concat([])
        index = pd.MultiIndex.from_frame(which[["stream", "window"]].astype(np.int64))
        part_in = pd.MultiIndex.from_frame(self.parts[["stream", "window"]].astype(np.int64)).isin(index)
        count_in = pd.MultiIndex.from_frame(self.counts[["stream", "window"]].astype(np.int64)).isin(index)
        rows = results(self.parts[part_in], self.specs)
        self.parts = self.parts[~part_in].reset_index(drop=True)
        self.counts = self.counts[~count_in].reset_index(drop=True)
        self.emitted.update(zip(which["stream"].astype(int), which["window"].astype(int)))
        rows["emitted_ns"] = now_ns
        rows["emitted_by"] = why
        if "completing_seq" in which.columns:
            rows = rows.merge(which[["stream", "window", "completing_seq"]].astype(np.int64),
                              on=["stream", "window"], how="left")
            rows["completing_seq"] = rows["completing_seq"].fillna(-1).astype(np.int64)
        else:
            rows["completing_seq"] = -1
        return rows[EMITTED_COLUMNS]

    @staticmethod
    def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        frames = [f for f in frames if len(f)]
        if not frames:
            return pd.DataFrame({c: pd.Series(dtype=t) for c, t in
                                 zip(EMITTED_COLUMNS, ["int64", "int64", "object", "Int64", "float64", "int64",
                                                       "int64", "object", "int64"])})
        return pd.concat(frames, ignore_index=True)
