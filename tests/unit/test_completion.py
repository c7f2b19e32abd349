"""The live merger against the oracle: each window leaves once, and never before it is complete.

Copies are made by the oracle (which windows hold each event, which operator
owns each window), delivered per operator in the switch's order but with
each operator's copies lagging the others by its own number of events, and
cut into micro-batches at random.  The merger must emit a window as
complete only when it holds every event the oracle put in it, must emit it
as soon as the definition allows, and must emit every window exactly once.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed.semantics.completion import CountCompletion, LiveMerger, TimeCompletion, Watermarks, completion_rule
from testbed.semantics.windows import StreamOracle, make_assigner

pytestmark = pytest.mark.unit

OPS = ["o1", "o2", "o3", "o4"]


def deliveries(kind: str, size: int, slide: int, n_ops: int, lateness: int, split: str, rng: np.random.Generator,
               n: int = 300):
    """The copies of ``n`` events and the oracle's windows: (copies, reference, spec)."""
    ops = OPS[:n_ops]
    ts = np.cumsum(rng.integers(0, 4, n)).astype(np.int64)
    if lateness:
        late = rng.random(n) < 0.2
        ts = np.where(late, np.maximum(ts - rng.integers(0, lateness + 3, n), 0), ts)
    keys = rng.integers(0, 6, n)
    values = rng.integers(-50, 50, n)
    oracle = StreamOracle(make_assigner(kind, size, slide), ops, origin=0 if kind == "time" else None,
                          lateness=lateness, split=split)
    copies, reference = [], []
    for seq in range(n):
        verdict = oracle.step(seq, int(ts[seq]), int(keys[seq]))
        for window in verdict.windows:
            owner = oracle.owner(window, int(keys[seq]))
            copies.append((seq, int(ts[seq]), int(keys[seq]), int(values[seq]), int(window), owner))
            reference.append((int(window), seq, owner))
    spec = {"id": 7, "window": {"kind": kind, "size": size, "slide": slide, "lateness": lateness},
            "operators": ops, "origin": 0, "split": split,
            "query": {"kind": "count_by_key" if split == "key" else str(rng.choice(["sum", "mean", "nexmark_q7"]))}}
    cols = ["seq", "ts", "key", "value", "window", "owner"]
    return pd.DataFrame(copies, columns=cols), pd.DataFrame(reference, columns=["window", "seq", "owner"]), spec


def arrival_order(copies: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Each operator keeps the switch's order; operators lag one another."""
    lag = {op: int(rng.integers(0, 60)) for op in OPS}
    out = copies.assign(pos=copies["seq"] + copies["owner"].map(lag)).sort_values(["pos", "seq"], kind="stable")
    return out.reset_index(drop=True).assign(recv_ns=lambda d: np.arange(len(d)) * 1000)


def batch_tables(batch: pd.DataFrame, spec: dict):
    """What the Spark job hands the merger for one micro-batch."""
    keyed = spec["split"] == "key"
    b = batch.assign(stream=spec["id"], gkey=batch["key"] if keyed else 0)
    # the wire's copy is one per (event, operator); its windows are rows here
    # best: the highest value, the lowest key on ties, as Spark's max of the struct (value, -key)
    b = b.assign(negkey=-b["key"]).sort_values(["value", "negkey"], ascending=False, kind="stable")
    parts = b.groupby(["stream", "window", "owner", "gkey"], as_index=False).agg(
        n=("value", "size"), sum=("value", "sum"), min=("value", "min"), max=("value", "max"),
        best_value=("value", "first"), best_negkey=("negkey", "first"))
    counts = b.groupby(["stream", "window", "owner"], as_index=False).agg(events=("seq", "size"),
                                                                          last_seq=("seq", "max"))
    events = (b.drop_duplicates(["seq", "owner"])[["stream", "owner", "seq", "ts", "recv_ns"]]
              .rename(columns={"owner": "operator"}))
    return parts, counts, events


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["count", "time"]), size=st.integers(1, 12), slide=st.integers(1, 12),
       n_ops=st.integers(1, 4), lateness=st.sampled_from([0, 0, 5, 20]), split=st.sampled_from(["windows", "key"]),
       seed=st.integers(0, 2 ** 31))
def test_every_window_leaves_once_and_only_when_complete(kind, size, slide, n_ops, lateness, split, seed):
    rng = np.random.default_rng(seed)
    if kind == "count":
        lateness = 0
    copies, reference, spec = deliveries(kind, size, slide, n_ops, lateness, split, rng)
    arrived = arrival_order(copies, rng)
    cuts = np.sort(rng.choice(np.arange(1, max(len(arrived), 2)), size=min(12, max(len(arrived) - 1, 0)),
                              replace=False)) if len(arrived) > 1 else []
    merger = LiveMerger({7: spec})
    expected = reference.groupby("window")["seq"].agg(["size", "max"])
    fed = pd.DataFrame(columns=arrived.columns)
    emitted = []
    bounds = [0, *map(int, cuts), len(arrived)]
    for i, batch in enumerate(arrived.iloc[a:b] for a, b in zip(bounds, bounds[1:])):
        fed = pd.concat([fed, batch]) if len(fed) else batch
        out = merger.add(*batch_tables(batch, spec), now_ns=i)
        for window, rows in out.groupby("window"):
            held = fed[fed["window"] == window]
            assert (rows["emitted_by"] == "complete").all()
            # complete means every event the oracle put in the window is here
            assert len(held) == expected.loc[window, "size"], (window, len(held))
            assert rows["n_events"].sum() == expected.loc[window, "size"]
            seq = int(rows["completing_seq"].iloc[0])
            if kind == "count":
                assert seq == expected.loc[window, "max"]
            elif seq >= 0:
                # the completing event pushed its operator's watermark past the end
                end = window * slide + size
                assert fed.loc[fed["seq"] == seq, "ts"].iloc[0] - lateness >= end
        emitted.append(out)
    tail = merger.close(now_ns=len(cuts) + 1)
    assert (tail["emitted_by"] == "end of input").all()
    everything = pd.concat(emitted + [tail])
    # each window exactly once, with the reference's events
    per_window = everything.groupby("window").agg(n=("n_events", "sum"), emissions=("emitted_ns", "nunique"))
    assert (per_window["emissions"] == 1).all()
    assert per_window.index.sort_values().tolist() == sorted(expected.index)
    assert (per_window["n"] == expected.loc[per_window.index, "size"]).all()
    # and each result is the query over the window's events
    kind = spec["query"]["kind"]
    for (window, gkey), rows in copies.assign(gkey=copies["key"] if split == "key" else -1).groupby(["window", "gkey"]):
        got = everything[(everything["window"] == window) & ((everything["key"] == gkey) if split == "key" else True)]
        assert len(got) == 1
        if kind == "nexmark_q7":
            best = rows[rows["value"] == rows["value"].max()]["key"].min()
            assert (got["result"].iloc[0], got["key"].iloc[0]) == (rows["value"].max(), best)
        else:
            want = {"sum": rows["value"].sum(), "mean": rows["value"].mean(), "count_by_key": len(rows)}[kind]
            assert got["result"].iloc[0] == pytest.approx(want)
    assert merger.open_windows == 0 and merger.after_emission == 0
    if kind == "count":
        # a count window that got all its events was never held back to the end
        full = set(expected.index[expected["size"] == size])
        assert full.isdisjoint(set(tail["window"]))


def test_results_are_the_query_over_the_windows_events():
    rng = np.random.default_rng(3)
    copies, reference, spec = deliveries("count", 5, 5, 2, 0, "windows", rng, n=40)
    spec["query"] = {"kind": "mean"}
    merger = LiveMerger({7: spec})
    out = merger.add(*batch_tables(arrival_order(copies, rng), spec), now_ns=1)
    means = copies.groupby("window")["value"].mean()
    assert len(out) == 8
    assert np.allclose(out.set_index("window")["result"], means.loc[out["window"]].to_numpy())


def test_a_window_that_stops_changing_times_out_as_incomplete():
    spec = {"id": 1, "window": {"kind": "count", "size": 10, "slide": 10}, "operators": ["a"], "origin": 0,
            "query": {"kind": "count"}}
    merger = LiveMerger({1: spec}, timeout_s=1.0)
    batch = pd.DataFrame({"seq": range(4), "ts": range(4), "key": 0, "value": 1, "window": 0, "owner": "a",
                          "recv_ns": range(4)})
    assert merger.add(*batch_tables(batch.assign(), spec | {"split": "windows"}), now_ns=0).empty
    out = merger.add(*batch_tables(batch.iloc[:0], spec | {"split": "windows"}), now_ns=int(2e9))
    assert out["emitted_by"].tolist() == ["timeout"] and out["n_events"].tolist() == [4]
    # the rest of its events come too late for it, and are counted
    merger.add(*batch_tables(batch.assign(seq=range(4, 8)), spec | {"split": "windows"}), now_ns=int(3e9))
    assert merger.after_emission == 4


def test_rules_by_window_kind():
    assert completion_rule({"window": {"kind": "count", "size": 4, "slide": 2}, "operators": ["a"]}) == \
        CountCompletion(4)
    rule = completion_rule({"id": 3, "window": {"kind": "time", "size": 10, "slide": 5, "lateness": 2},
                            "operators": ["a", "b"], "origin": 100, "split": "key"})
    assert rule == TimeCompletion(100, 5, 10, 2, 3, ("a", "b"))
    assert list(rule.end(np.array([0, 3]))) == [110, 125]
    assert completion_rule({"live": False, "window": {"kind": "count", "size": 4, "slide": 2}}) is None


def test_a_watermark_names_the_event_that_crossed_a_threshold():
    marks = Watermarks()
    marks.advance(pd.DataFrame({"stream": 1, "operator": "a", "seq": [0, 1, 2, 3], "ts": [5, 9, 7, 12],
                                "recv_ns": [10, 20, 30, 40]}))
    assert marks.crossing(1, "a", 8) == (20, 1)
    assert marks.crossing(1, "a", 12) == (40, 3)
    assert marks.crossing(1, "a", 13) is None
    assert marks.crossing(1, "b", 0) is None
    marks.advance(pd.DataFrame({"stream": 1, "operator": "a", "seq": [4], "ts": [11], "recv_ns": [50]}))
    assert marks.crossing(1, "a", 12) == (-1, -1)      # crossed in an earlier batch


def test_the_worked_example_of_docs_windows():
    """docs/windows.md, "When a window is complete": window 0 of a stream with
    size 10, slide 5, origin 100, lateness 3 leaves with the event t=113."""
    spec = {"id": 1, "window": {"kind": "time", "size": 10, "slide": 5, "lateness": 3}, "operators": ["a", "b"],
            "origin": 100, "split": "windows", "query": {"kind": "count"}}
    merger = LiveMerger({1: spec})
    arrivals = [(0, 104, [0]), (1, 107, [0]), (2, 111, []), (3, 113, [])]     # a's copies and its windows of 0
    emitted = []
    for seq, ts, windows in arrivals:
        batch = pd.DataFrame({"seq": seq, "ts": ts, "key": 0, "value": 1, "window": windows or [2], "owner": "a",
                              "recv_ns": seq})
        emitted.append(merger.add(*batch_tables(batch, spec), now_ns=seq))
    assert [e["window"].tolist() for e in emitted] == [[], [], [], [0]]
    assert emitted[3]["completing_seq"].tolist() == [3] and emitted[3]["n_events"].tolist() == [2]


def test_operator_lag_sets_spark_progress_against_each_receiver(tmp_path):
    from testbed.rundir import RunDir, write_json_atomic
    from testbed.runs.progress import OperatorLag, live_line, operator_lag

    rundir = RunDir(tmp_path / "run").create()
    rundir.spark.mkdir(parents=True, exist_ok=True)
    for host, received in (("o1", 500), ("o2", 300)):
        write_json_atomic(rundir.receiver_status(host), {"received": received})
    write_json_atomic(rundir.spark_live_status, {"windows_emitted": 42, "operators": {
        "o1": {"processed": 380, "newest_recv_ns": 9_000_000_000}, "o2": {"processed": 300, "newest_recv_ns": 1}}})
    lag = operator_lag(rundir, ["o1", "o2", "o3"], now_ns=10_500_000_000)
    assert lag["o1"] == OperatorLag(500, 380, 120, 1.5)
    assert lag["o2"] == OperatorLag(300, 300, 0, 0.0)           # nothing waits: no lag in seconds
    assert lag["o3"] == OperatorLag(0, 0, 0, 0.0)
    write_json_atomic(rundir.receiver_status("o3"), {"received": 7})
    assert operator_lag(rundir, ["o3"])["o3"] == OperatorLag(7, 0, 7, None)   # Spark has not begun on it
    assert "o3 7 events, none processed yet" in live_line(rundir, ["o1", "o3"])
    line = live_line(rundir, ["o1", "o2"])
    assert line.startswith("windows emitted 42 · largest lag o1 120 events")


def test_check_fails_a_window_emitted_complete_that_changed_afterwards():
    from testbed.analysis.check import WindowCheck, live_differences

    windows = pd.DataFrame({"stream": [1, 1, 1, 2], "window": [0, 1, 2, 0], "result": [3.0, 4.0, 5.0, 1.0],
                            "n_events": [3, 4, 5, 1],
                            "emitted_by": ["complete", "complete", "end of input", "complete"],
                            "live_result": [3.0, 2.0, 1.0, 1.0], "live_n_events": [3, 2, 1, 1]})
    # window 2 left at the end of the input: its live row may be short, so it is not held against the final one
    assert live_differences(windows) == {1: [1]}
    assert live_differences(windows.drop(columns=["live_result", "live_n_events"])) == {}
    check = WindowCheck(stream=1, reference=3, produced=3, matching=3)
    assert check.ok
    check.live_differs = 1
    assert not check.ok and check.as_json()["live_differs"] == 1
