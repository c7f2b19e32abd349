"""The operators' lag over a whole run, from receive times and Spark's micro-batches."""
import numpy as np
import pytest

from testbed.analysis.operatorlag import GROWING, growth, lag_timeline

S = 1_000_000_000


def run(rate_in: float, rate_spark: float, seconds: float = 5.0, batch_s: float = 1.0):
    """Copies received at ``rate_in`` per second; Spark ends a micro-batch every
    ``batch_s`` taking what arrived before its start, at most ``rate_spark``
    per second of run (a backlog carries over)."""
    recv = (np.arange(int(rate_in * seconds)) / rate_in * S).astype(np.int64)
    batches, done, t = [], 0, batch_s
    while done < len(recv):
        arrived = int(np.searchsorted(recv, (t - batch_s) * S, side="right"))
        take = min(arrived - done, int(rate_spark * batch_s))
        if take:
            batches.append({"copies": take, "started_ns": int((t - batch_s) * S), "ended_ns": int(t * S)})
            done += take
        t += batch_s
    return recv, batches


def test_a_pipeline_that_keeps_up_has_a_flat_lag():
    recv, batches = run(1000, 5000)
    timeline = lag_timeline(recv, batches)
    assert timeline["processed"].iloc[-1] == len(recv)
    assert (timeline["lag_s"] <= 1.0 + 1e-9).all() and (timeline["backlog_events"] <= 1001).all()
    assert abs(growth(timeline, until_ns=int(recv[-1]))) < GROWING


def test_a_pipeline_at_half_the_input_rate_falls_behind_by_half_a_second_per_second():
    recv, batches = run(1000, 500, seconds=8)
    timeline = lag_timeline(recv, batches)
    assert timeline["backlog_events"].max() > 3000
    arriving = growth(timeline, until_ns=int(recv[-1]))
    assert arriving == pytest.approx(0.5, abs=0.05) and arriving > GROWING


def test_no_backlog_means_no_lag_and_one_batch_has_no_growth():
    recv = np.array([0, S // 2], dtype=np.int64)
    timeline = lag_timeline(recv, [{"copies": 2, "started_ns": S, "ended_ns": 2 * S}])
    assert timeline["backlog_events"].tolist() == [0] and timeline["lag_s"].tolist() == [0.0]
    assert growth(timeline) is None
    assert lag_timeline(recv, []).empty
