"""What operators compute per window: one definition per query kind.

A query says how its events are drawn (keys and values, for generated
streams), which events count, what it groups by, and which of the partial
aggregates every operator keeps is its result.  The partials are the same
for every query (count, sum, min, max, and the best (value, -key) pair),
and they merge associatively, so operators can fold any subset of a
window's events and the merger adds them up.  ``docs/queries.md`` states
the definitions; the Spark job (``operators/window_job.py``) and the
workload generator both read them from here, and nothing else lists the
kinds.  Pure Python and numpy, so Spark can ship it to its executors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from testbed.semantics.keys import ZipfSampler

#: YSB's event types: the value of an event.
YSB_VIEW, YSB_CLICK, YSB_PURCHASE = 0, 1, 2


@dataclass(frozen=True)
class QueryDef:
    """One query kind.

    ``result`` names the merged partial that is the window's result: ``n``,
    ``sum``, ``min``, ``max``, ``mean`` (sum/n) or ``best`` (the highest
    value, the lowest key on ties).  ``key`` names what fills the output's
    key column: ``None`` (unkeyed), ``group`` (the grouping key) or
    ``best`` (the key of the best event).
    """

    kind: str
    result: str
    key: Optional[str] = None
    group_by_key: bool = False
    #: Only events with this value count (YSB counts views); ``None`` keeps all.
    only_value: Optional[int] = None
    #: ``(rng, n) -> (keys, values)`` for generated streams.
    draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]] = None  # type: ignore[assignment]


def _uniform_values(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n, dtype=np.int64), rng.integers(0, 1000, n, dtype=np.int64)


def _bids(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """NEXMark bids: 1,000 bidders, log-normal prices in cents (median about 55 dollars)."""
    bidder = rng.integers(0, 1000, n, dtype=np.int64)
    price = np.round(rng.lognormal(4.0, 1.0, n) * 100).astype(np.int64)
    return bidder, price


def _ad_events(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """YSB ad events: 100 campaigns, event type view/click/purchase uniform."""
    campaign = rng.integers(0, 100, n, dtype=np.int64)
    kind = rng.integers(YSB_VIEW, YSB_PURCHASE + 1, n, dtype=np.int64)
    return campaign, kind


#: Slash's cluster monitoring: jobs and their tasks' CPU use (synthetic; docs/queries.md).
CM_JOBS = 1000
CM_JOB_SKEW = 1.0
#: Slash's read-only count: keys uniform over a 100M-wide range.
RO_KEY_RANGE = 100_000_000


def _cpu_samples(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Cluster monitoring: each event is one task's CPU sample.  The job is
    Zipf-distributed over ``CM_JOBS`` jobs (a few jobs run most tasks); the
    utilisation is Beta(2, 5) of one core, in basis points (0..10,000)."""
    job = ZipfSampler(CM_JOBS, CM_JOB_SKEW).ranks(rng, n) - 1
    cpu = np.round(rng.beta(2.0, 5.0, n) * 10_000).astype(np.int64)
    return job, cpu


def _keyed_values(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """100 keys, uniform; values uniform in 0..999."""
    return rng.integers(0, 100, n, dtype=np.int64), rng.integers(0, 1000, n, dtype=np.int64)


def _wide_keys(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, RO_KEY_RANGE, n, dtype=np.int64), np.zeros(n, dtype=np.int64)


QUERIES: dict[str, QueryDef] = {q.kind: q for q in (
    QueryDef("count", result="n", draw=_uniform_values),
    QueryDef("sum", result="sum", draw=_uniform_values),
    QueryDef("min", result="min", draw=_uniform_values),
    QueryDef("max", result="max", draw=_uniform_values),
    QueryDef("mean", result="mean", draw=_uniform_values),
    # NEXMark Q7: the highest bid of each window, and its bidder.
    QueryDef("nexmark_q7", result="best", key="best", draw=_bids),
    # Yahoo Streaming Benchmark: views per campaign and window.
    QueryDef("ysb_campaign_count", result="n", key="group", group_by_key=True, only_value=YSB_VIEW,
             draw=_ad_events),
    # Per key and window: how many events, and their mean value.
    QueryDef("count_by_key", result="n", key="group", group_by_key=True, draw=_keyed_values),
    QueryDef("mean_by_key", result="mean", key="group", group_by_key=True, draw=_keyed_values),
    # Slash's CM: mean CPU utilisation per job and window.
    QueryDef("cm", result="mean", key="group", group_by_key=True, draw=_cpu_samples),
    # Slash's RO: occurrences per key and window.
    QueryDef("ro", result="n", key="group", group_by_key=True, draw=_wide_keys),
)}

QUERY_KINDS = tuple(QUERIES)


def query(kind: str) -> QueryDef:
    try:
        return QUERIES[kind]
    except KeyError:
        raise ValueError(f"unknown query kind {kind!r}; known: {', '.join(QUERY_KINDS)}") from None
