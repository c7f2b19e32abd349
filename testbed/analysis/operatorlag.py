"""How far the operators' Spark application fell behind over a whole run, from its raw files.

While a run goes, ``testbed status`` shows each operator's lag now
(``testbed.runs.progress.operator_lag``).  Afterwards the run's copies
(``deliveries.parquet``, each with its receive time) and Spark's micro-batches
(``analysis.json`` → ``live.batches``: when each began and ended, and how many
copies it took) give the lag at the end of every micro-batch:

- **backlog**: copies the operator hosts had received by then that Spark had
  not yet processed (events);
- **lag**: how long ago the newest processed copy had been received (seconds;
  0 when nothing was waiting).

The operators *keep up* when the lag does not grow while copies arrive:
its least squares slope against time, over the micro-batches that began
before the last copy was received, stays below ``GROWING`` (after that the
backlog only drains).  An application that
processes a share p of the input rate builds a lag that grows by (1 - p) s
per second, so the threshold says it keeps up with at least 1 - ``GROWING``
of the input; micro-batches of a second or so on a busy machine make a
smaller threshold read noise as growth.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from testbed.rundir import RunDir

#: Lag growth (seconds per second of run) above which the operators fall behind.
GROWING = 0.25
COLUMNS = ["started_ns", "ended_ns", "copies", "processed", "received", "backlog_events", "lag_s"]


def lag_timeline(recv_ns: np.ndarray, batches: list[dict[str, Any]]) -> pd.DataFrame:
    """Per micro-batch with copies: when it ended, backlog (events) and lag (s) then.

    ``recv_ns``: every copy's receive time; ``batches``: ``analysis.json``'s
    ``live.batches`` rows (``copies``, ``started_ns``, ``ended_ns``)."""
    recv = np.sort(np.asarray(recv_ns, dtype=np.int64))
    rows = sorted(batches, key=lambda b: b["ended_ns"])
    processed = np.cumsum([b["copies"] for b in rows]) if rows else np.zeros(0, dtype=np.int64)
    out = []
    for batch, done in zip(rows, processed):
        end = batch["ended_ns"]
        received = int(np.searchsorted(recv, end, side="right"))
        backlog = max(received - int(done), 0)
        # the newest copy processed: the done-th in receive order (Spark takes
        # each receiver's files in order, and the receivers hand over together)
        newest = recv[min(int(done), len(recv)) - 1] if len(recv) and done else end
        out.append({"started_ns": batch["started_ns"], "ended_ns": end, "copies": batch["copies"],
                    "processed": int(done), "received": received, "backlog_events": backlog,
                    "lag_s": (end - newest) / 1e9 if backlog else 0.0})
    return pd.DataFrame(out, columns=COLUMNS)


def growth(timeline: pd.DataFrame, until_ns: Optional[int] = None) -> Optional[float]:
    """Least-squares slope of the lag against time (s per s), over the batches
    that began by ``until_ns`` (all without it), or ``None`` with fewer than two."""
    if until_ns is not None:
        timeline = timeline[timeline["started_ns"] <= until_ns]
    if len(timeline) < 2:
        return None
    t = (timeline["ended_ns"].to_numpy() - timeline["ended_ns"].iloc[0]) / 1e9
    if t[-1] <= 0:
        return None
    return float(np.polyfit(t, timeline["lag_s"].to_numpy(), 1)[0])


def live_summary(rundir: RunDir) -> dict[str, Any]:
    """``summarize`` of a run directory, for a row of a rate sweep."""
    return summarize(rundir.read_record().spark, pd.read_parquet(rundir.sources, columns=["send_ns"]),
                     pd.read_parquet(rundir.deliveries, columns=["recv_ns"]))


def summarize(spark: Optional[dict[str, Any]], sources: pd.DataFrame, deliveries: pd.DataFrame) -> dict[str, Any]:
    """One run's result latency, emissions and operator lag, from its Spark
    analysis (``run.json``'s ``spark``) and its sends and receives.

    Result latency per window is the Spark job's (``result_latency_s``, over
    every stream's windows emitted as complete); the rest is computed here."""
    spark = spark or {}
    if not spark or spark.get("computed") is False:
        return {"spark": False}
    live = spark.get("live", {})
    timeline = lag_timeline(deliveries["recv_ns"].to_numpy(), live.get("batches", []))
    last_send, last_recv = int(sources["send_ns"].max()), int(deliveries["recv_ns"].max())
    slope = growth(timeline, until_ns=last_recv)
    latency = spark.get("result_latency_s", [])
    streams = live.get("streams", [])
    windows = sum(s["windows"] for s in streams)
    drain = (int(timeline["ended_ns"].iloc[-1]) - last_recv) / 1e9 if len(timeline) else None
    duration = (last_send - int(sources["send_ns"].min())) / 1e9

    def worst(key: str) -> Optional[float]:
        values = [r[key] for r in latency if r.get(key) is not None]
        return max(values) if values else None

    keeps_up = (slope < GROWING) if slope is not None else (drain is not None and drain <= max(duration, 1.0))
    return {"spark": True, "result_p50_s": worst("p50"), "result_p90_s": worst("p90"),
            "result_p99_s": worst("p99"), "result_max_s": worst("max"), "windows": windows,
            "emitted_complete": sum(s.get("complete", 0) for s in streams),
            "before_last_send_share": sum(s["before_last_send"] for s in streams) / windows if windows else None,
            "last_result_after_last_send_s": max((s["last_result_after_last_send_s"] for s in streams),
                                                 default=None),
            "max_backlog_events": int(timeline["backlog_events"].max()) if len(timeline) else None,
            "max_lag_s": float(timeline["lag_s"].max()) if len(timeline) else None,
            "lag_growth": slope, "drain_s": drain, "micro_batches": len(timeline), "keeps_up": bool(keeps_up),
            "mismatched": live.get("mismatched")}
