"""The events a source sends: sequence numbers, timestamps, keys and values.

Everything is a pure function of the stream spec and the run's seed, so the
oracle, the sources and the analysis all see the same events without passing
them around.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from testbed.semantics.datasets import dataset_events
from testbed.semantics.keys import draw_keys
from testbed.semantics.limits import MAX_INT64
from testbed.semantics.queries import query
from testbed.semantics.replay import read_replay
from testbed.semantics.topology import Stream


def stream_events(stream: Stream, seed: int, limit: int | None = None) -> dict[str, np.ndarray]:
    """Columns ``seq, ts, key, value`` of the stream's events, in send order.

    Timestamps are ``start + k*step`` (the papers' workloads use 0, 1, 2, ...).
    Keys and values are drawn from a generator seeded by ``(seed, stream id)``
    so that every stream of a run differs but reruns do not.
    """
    n = stream.events if limit is None else min(limit, stream.events)
    if stream.replay is not None:
        return replay_events(stream, n)
    if stream.dataset is not None:
        return dataset_events(stream.dataset, n)
    k = np.arange(n, dtype=np.uint64)
    ts = np.uint64(stream.timestamps.start) + k * np.uint64(stream.timestamps.step)
    rng = np.random.default_rng([seed, stream.id])
    key, value = query(stream.query.kind).draw(rng, n)
    if stream.keys is not None:
        # Its own generator: choosing a key distribution leaves the values as they were.
        k_spec = stream.keys
        key = draw_keys(np.random.default_rng([seed, stream.id, 2]), n, k_spec.distribution, k_spec.n, k_spec.s)
    return {"seq": k.astype(np.int64), "ts": ts.astype(np.int64), "key": key, "value": value}


def replay_events(stream: Stream, n: int) -> dict[str, np.ndarray]:
    """The first ``n`` rows of the stream's replay file, as events (checked when the topology loaded)."""
    r = stream.replay
    cols = read_replay(Path(r.path), r.ts, r.value, r.key, n)
    return {"seq": np.arange(n, dtype=np.int64), "ts": cols["ts"], "key": cols["key"], "value": cols["value"]}


def sent_events(stream: Stream, seed: int) -> dict[str, np.ndarray]:
    """The stream's events in the order its source sends them, after its
    ``perturb`` (docs/queries.md, "Perturbed sources").

    Columns ``seq, ts, key, value`` as ``stream_events``, plus ``copy`` (1
    for the second copy of a duplicated event) and ``delayed`` (sent late on
    purpose).  Events the source loses on purpose are left out.
    """
    events = stream_events(stream, seed)
    n = len(events["seq"])
    p = stream.perturb
    if p is None:
        return dict(events, copy=np.zeros(n, dtype=np.int8), delayed=np.zeros(n, dtype=bool))
    # Its own generator, so perturbing a stream never changes its keys and values.
    rng = np.random.default_rng([seed, stream.id, 1])
    kept = rng.random(n) >= p.loss
    delay = np.zeros(n, dtype=np.int64)
    if p.disorder is not None:
        late = rng.random(n) < p.disorder.fraction
        delay[late] = rng.integers(1, p.disorder.max_delay, int(late.sum()), endpoint=True)
    twice = rng.random(n) < p.duplicate
    order = send_order(events["ts"], delay)
    order = order[kept[order]]
    copies = np.repeat(order, np.where(twice[order], 2, 1))
    second = np.zeros(len(copies), dtype=np.int8)
    second[1:] = copies[1:] == copies[:-1]
    out = {name: column[copies] for name, column in events.items()}
    return dict(out, copy=second, delayed=delay[copies] > 0)


def send_order(ts: np.ndarray, delay: np.ndarray) -> np.ndarray:
    """Indices of the events in the order a source sends them when the events
    with a positive ``delay`` go out late (docs/queries.md, "Perturbed sources").

    Order is data: a replayed file or a dataset arrives out of order on its
    own, and that order is what the run is about.  So only the delayed events
    move.  Each waits for the stream to catch up with it: it goes out just
    before the first event after it, among those sent on time, by which the
    newest timestamp sent on time has reached its own timestamp plus its delay
    (at the end if none does).  Delayed events waiting for the same event go
    in the order of timestamp plus delay.  Every event sent on time keeps its
    place relative to the others.  On a stream in timestamp order that is the
    same as sorting by timestamp plus delay, as the sources did before.
    """
    n = len(ts)
    late = delay > 0
    on_time = np.flatnonzero(~late)
    # Clamped so that a replay's timestamps near 2**63 cannot wrap round and go first.
    due = ts + np.minimum(delay, MAX_INT64 - ts)
    newest = np.maximum.accumulate(ts[on_time])
    waiting = np.flatnonzero(late)
    # The first event on time after each delayed one, and the first by which the stream reached its due time.
    after = np.searchsorted(on_time, waiting, side="right")
    caught_up = np.searchsorted(newest, due[waiting], side="left")
    release = np.arange(n, dtype=np.int64)
    release[waiting] = np.append(on_time, n)[np.maximum(after, caught_up)]    # n: after the last event
    # Sorted by the slot each event goes out at, a delayed event just ahead of the event that releases it.
    return np.lexsort((np.arange(n), np.where(late, due, 0), ~late, release))
