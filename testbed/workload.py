"""The events a source sends: sequence numbers, timestamps, keys and values.

Everything is a pure function of the stream spec and the run's seed, so the
oracle, the sources and the analysis all see the same events without passing
them around.
"""
from __future__ import annotations

import numpy as np

from .topology import Stream

#: What keys and values mean per query; see ``docs/queries.md``.
KEY_SPACE = {"nexmark_q7": 1000, "ysb_campaign_count": 100}


def stream_events(stream: Stream, seed: int, limit: int | None = None) -> dict[str, np.ndarray]:
    """Columns ``seq, ts, key, value`` of the stream's events, in send order.

    Timestamps are ``start + k*step`` (the papers' workloads use 0, 1, 2, ...).
    Keys and values are drawn from a generator seeded by ``(seed, stream id)``
    so that every stream of a run differs but reruns do not.
    """
    n = stream.events if limit is None else min(limit, stream.events)
    if stream.replay is not None:
        return replay_events(stream, n)
    k = np.arange(n, dtype=np.uint64)
    ts = np.uint64(stream.timestamps.start) + k * np.uint64(stream.timestamps.step)
    rng = np.random.default_rng([seed, stream.id])
    kind = stream.query.kind
    if kind == "nexmark_q7":
        key = rng.integers(0, KEY_SPACE[kind], n, dtype=np.int64)          # bidder
        value = np.round(rng.lognormal(4.0, 1.0, n) * 100).astype(np.int64)  # price in cents
    elif kind == "ysb_campaign_count":
        key = rng.integers(0, KEY_SPACE[kind], n, dtype=np.int64)          # campaign
        value = rng.integers(0, 3, n, dtype=np.int64)                      # 0=view 1=click 2=purchase
    else:
        key = np.zeros(n, dtype=np.int64)
        value = rng.integers(0, 1000, n, dtype=np.int64)
    return {"seq": k.astype(np.int64), "ts": ts.astype(np.int64), "key": key, "value": value}


def replay_events(stream: Stream, n: int) -> dict[str, np.ndarray]:
    """The first ``n`` rows of the stream's replay file, as events."""
    import pandas as pd

    r = stream.replay
    cols = [c for c in (r.ts, r.value, r.key) if c is not None]
    frame = (pd.read_parquet(r.path, columns=cols) if r.path.endswith(".parquet")
             else pd.read_csv(r.path, usecols=cols))
    if len(frame) < n:
        raise ValueError(f"stream {stream.id}: replay file {r.path} has {len(frame)} rows, "
                         f"fewer than events={stream.events}")
    frame = frame.iloc[:n]
    key = frame[r.key].to_numpy(dtype=np.int64) if r.key else np.zeros(n, dtype=np.int64)
    return {"seq": np.arange(n, dtype=np.int64), "ts": frame[r.ts].to_numpy(dtype=np.int64),
            "key": key, "value": np.round(frame[r.value].to_numpy(dtype=np.float64)).astype(np.int64)}
