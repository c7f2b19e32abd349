"""The run's record phases over a RunDir, without root: collect, account, evaluate."""
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.records import record_of
from testbed.analysis.verdicts import account, evaluate
from testbed.rundir import TABLE_COLUMNS, ExperimentDir, RunDir, read_json, write_json_atomic
from testbed.runs.record import base_record, collect
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.workload import stream_events


def oracle_run(topo, rundir: RunDir, lose=None):
    """Per-host files as sources and receivers write them, deliveries per the oracle.

    ``lose`` is an optional ``(seq, operator)`` delivery to leave out, or a
    set of them.  ``send_ns`` is the seq, so seq i was sent at i ns.
    """
    lost = {lose} if isinstance(lose, tuple) else set(lose or ())
    s = topo.streams[0]
    ev = stream_events(s, topo.seed)
    sources = pd.DataFrame(ev).assign(stream=s.id, send_ns=range(len(ev["seq"])))
    pq.write_table(pa.Table.from_pandas(sources, preserve_index=False), rundir.source_events(s.source))
    oracle = s.oracle()
    rows = {op: [] for op in s.operators}
    for seq, ts in zip(ev["seq"].tolist(), ev["ts"].tolist()):
        for op in oracle.step(seq, ts).operators:
            if (seq, op) not in lost:
                rows[op].append({"stream": s.id, "seq": seq, "ts": ts, "key": 0, "value": 0, "recv_ns": seq,
                                 "operator": op})
    for op, part in rows.items():
        pq.write_table(pa.Table.from_pandas(pd.DataFrame(part), preserve_index=False), rundir.receiver_events(op))
        write_json_atomic(rundir.receiver_status(op), {"received": len(part), "kernel_drops": {"rcvbuf_errors": 0}})
    return sources


def judged(rundir: RunDir) -> dict:
    """verdicts.json as the check wrote it."""
    return rundir.read_verdicts().model_dump()


@pytest.fixture
def sliding(topo):
    return topo.build([topo.stream(3, {"kind": "count", "size": 5, "slide": 2}, ["h2", "h3", "h4"],
                                   events=60)], 4)


def test_collect_merges_host_files_and_moves_them_to_raw(sliding, rundir):
    oracle_run(sliding, rundir)
    collect(rundir)
    assert len(pd.read_parquet(rundir.sources)) == 60
    deliveries = pd.read_parquet(rundir.deliveries)
    assert set(deliveries["operator"]) == {"h2", "h3", "h4"}
    assert rundir.host_files("sources") == rundir.host_files("deliveries") == rundir.host_files("status") == []
    assert (rundir.raw / rundir.receiver_events("h2").name).exists()
    assert read_json(rundir.raw_receiver_status("h3"))["kernel_drops"] == {"rcvbuf_errors": 0}


def test_a_run_where_no_operator_recorded_anything_is_still_accounted_and_drawn(sliding, rundir):
    """Every receiver killed before its first flush: the tables exist, empty, and every copy is lost after the
    switch."""
    from testbed.analysis.plots import plot_run

    oracle_run(sliding, rundir)
    for op in ("h2", "h3", "h4"):
        rundir.receiver_events(op).unlink()
    collect(rundir)
    assert len(pd.read_parquet(rundir.deliveries)) == 0
    assert list(pd.read_parquet(rundir.deliveries).columns) == list(TABLE_COLUMNS["deliveries"])
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {}}}, "ports": {}, "non_event": 0}
    rundir.write_record(record)
    verdicts = evaluate(record, rundir, with_windows=False)
    assert not verdicts.ok
    acct = judged(rundir)["accounting"]["streams"]["3"]
    assert acct["sent"] == 60 and acct["lost_after_switch"] == 146 and acct["lost_before_switch"] == 0
    assert [p.name for p in plot_run(rundir)] == ["load.png", "latency.png"]


def test_evaluate_passes_an_oracle_run_and_accounts_every_event(sliding, rundir):
    oracle_run(sliding, rundir)
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {"no_window": 0}}}, "ports": {}, "non_event": 0}
    verdicts = evaluate(record, rundir, with_windows=False)
    assert verdicts.ok and judged(rundir)["ok"] is True
    acct = judged(rundir)["accounting"]["streams"]["3"]
    # n=5, slide 2: copies per event 1,1,2,2, then 3,2,3,2,...: 6 + 28*5 = 146 in all
    assert acct["sent"] == 60 and sum(acct["received_per_operator"].values()) == 146
    assert acct["lost"] == 0 and acct["lost_before_switch"] == 0 and acct["lost_after_switch"] == 0
    assert judged(rundir)["check"]["3"]["expected_deliveries"] == 146


def test_a_lost_copy_is_named_and_placed(sliding, rundir):
    oracle_run(sliding, rundir, lose=(10, "h3"))
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {}}}, "ports": {}, "non_event": 0}
    verdicts = evaluate(record, rundir, with_windows=False)
    assert not verdicts.ok
    acct = judged(rundir)["accounting"]["streams"]["3"]
    assert acct["lost"] == 1 and acct["lost_after_switch"] == 1 and acct["lost_before_switch"] == 0
    assert judged(rundir)["check"]["3"]["examples"] == ["missing: seq 10 at h3"]


def test_account_without_switch_counters_leaves_placement_unknown(sliding, rundir):
    sources = oracle_run(sliding, rundir)
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    deliveries = pd.read_parquet(rundir.deliveries)
    from testbed.analysis.check import check_frames
    acct = account(record, rundir, sources, deliveries, check_frames(record, sources, deliveries))
    assert acct["streams"]["3"]["lost_before_switch"] is None


def test_record_streams_round_trip_to_the_oracle(sliding):
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    from testbed.semantics.topology import Stream
    again = Stream.from_record(record.streams["3"])
    assert again == sliding.streams[0]


def test_rundir_owns_the_layout(tmp_path):
    rundir = RunDir(tmp_path / "r").create()
    assert rundir.logs.is_dir() and rundir.raw.is_dir()
    assert rundir.record.parent == rundir.root
    paths = rundir.spark_paths()
    assert {"in", "input_done", "ready", "partials", "checkpoint", "analysis", "sources", "deliveries",
            "windows", "windows_reference", "complex_events_reference", "changes", "unseen", "live", "live_status",
            "done", "cancel"} == set(paths)
    assert all(p.startswith(str(rundir.root)) for p in paths.values())
    exp = ExperimentDir(tmp_path / "e")
    assert exp.run("cbsw1").root == exp.root / "runs" / "cbsw1"
    assert list(exp.runs()) == []
    rundir.write_record(record_of({}, name="x"))
    rundir.link_latest()
    assert (tmp_path / "latest").resolve() == rundir.root and rundir.is_run()


def _h3_copies(topo, seqs):
    oracle = topo.streams[0].oracle()
    return {(seq, "h3") for seq in range(60) if "h3" in oracle.step(seq, seq).operators and seq in seqs}


def test_missing_copies_at_a_failed_operator_are_the_failures(sliding, rundir):
    """h3 fails at seq 10 and records nothing after: what it never recorded is
    counted at it, with the windows those copies belonged to, and the run
    still passes."""
    down = _h3_copies(sliding, range(10, 60))
    oracle_run(sliding, rundir, lose=down)
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {}}}, "ports": {}, "non_event": 0}
    record.adaptation = {"failures": [{"host": "h3", "how": "kill", "at": 9.5e-9}]}
    verdicts = evaluate(record, rundir, with_windows=False)
    assert verdicts.ok
    check = judged(rundir)["check"]["3"]
    oracle = sliding.streams[0].oracle()
    owned = set()
    for seq in range(60):
        owned |= {w for w in oracle.step(seq, seq).windows if oracle.owner(w) == "h3" and seq >= 10}
    assert check["lost_at_failed_operators"] == len(down) > 10 and check["missing"] == 0
    assert check["windows_affected_by_failure"] == sorted(owned)


def test_a_copy_lost_while_the_failed_operator_was_up_is_not_the_failures(sliding, rundir):
    """h3 missed seq 4's copy long before it failed at seq 10: that loss is
    the splitter's (it recorded seqs 5-9 after it), and the check says so."""
    oracle_run(sliding, rundir, lose=_h3_copies(sliding, [4]) | _h3_copies(sliding, range(10, 60)))
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {}}}, "ports": {}, "non_event": 0}
    record.adaptation = {"failures": [{"host": "h3", "how": "kill", "at": 9.5e-9}]}
    assert not evaluate(record, rundir, with_windows=False).ok
    check = judged(rundir)["check"]["3"]
    assert check["missing"] == 1 and check["examples"] == ["missing: seq 4 at h3"]


def test_after_a_recovery_a_missing_copy_is_not_the_failures(sliding, rundir):
    """h3 is down from seq 10 to its recovery at seq 40: the copies between
    are the failure's, one missing at seq 50 after it came back is not."""
    down = _h3_copies(sliding, range(10, 40))
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {}}}, "ports": {}, "non_event": 0}
    record.adaptation = {"failures": [{"host": "h3", "how": "kill", "at": 9.5e-9}],
                            "recoveries": [{"host": "h3", "at": 39.5e-9}]}
    oracle_run(sliding, rundir, lose=down)
    collect(rundir)
    assert evaluate(record, rundir, with_windows=False).ok
    assert judged(rundir)["check"]["3"]["lost_at_failed_operators"] == len(down)
    (late,) = sorted(_h3_copies(sliding, range(50, 60)))[:1]
    for path in rundir.raw.glob("*"):
        path.unlink() if path.is_file() else None
    oracle_run(sliding, rundir, lose=down | {late})
    collect(rundir)
    assert not evaluate(record, rundir, with_windows=False).ok
    check = judged(rundir)["check"]["3"]
    assert check["lost_at_failed_operators"] == len(down)
    assert check["examples"] == [f"missing: seq {late[0]} at h3"]


def test_verdicts_with_a_short_runs_spark_lag_round_trip(tmp_path):
    """A run too short for a lag trend writes ``spark_lag`` with its unknowns
    left out; reading the file back gives the same verdicts."""
    from testbed.rundir import RunVerdicts, SparkLag

    rundir = RunDir(tmp_path / "r").create()
    lag = SparkLag(micro_batches=1, keeps_up=True, switch_lost=0, max_backlog_events=3, max_lag_s=0.4)
    verdicts = RunVerdicts(accounting={}, check={}, spark_lag=lag, ok=True)
    rundir.write_verdicts(verdicts)
    again = rundir.read_verdicts()
    assert again.spark_lag == lag and again.spark_lag.lag_growth is None and again == verdicts
