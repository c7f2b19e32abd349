"""The run's record phases over a RunDir, without root: collect, account, evaluate."""
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testbed.runs.record import account, base_record, collect, evaluate
from testbed.runs.rundir import ExperimentDir, RunDir, read_json, write_json_atomic
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.workload import stream_events


def oracle_run(topo, rundir: RunDir, lose=None):
    """Per-host files as sources and receivers write them, deliveries per the oracle.

    ``lose`` is an optional ``(seq, operator)`` delivery to leave out.
    """
    s = topo.streams[0]
    ev = stream_events(s, topo.seed)
    sources = pd.DataFrame(ev).assign(stream=s.id, send_ns=range(len(ev["seq"])))
    pq.write_table(pa.Table.from_pandas(sources, preserve_index=False), rundir.source_events(s.source))
    oracle = s.oracle()
    rows = {op: [] for op in s.operators}
    for seq, ts in zip(ev["seq"].tolist(), ev["ts"].tolist()):
        for op in oracle.step(seq, ts).operators:
            if (seq, op) != lose:
                rows[op].append({"stream": s.id, "seq": seq, "ts": ts, "key": 0, "value": 0, "recv_ns": seq,
                                 "operator": op})
    for op, part in rows.items():
        pq.write_table(pa.Table.from_pandas(pd.DataFrame(part), preserve_index=False), rundir.receiver_events(op))
        write_json_atomic(rundir.receiver_status(op), {"received": len(part), "kernel_drops": {"rcvbuf_errors": 0}})
    return sources


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


def test_evaluate_passes_an_oracle_run_and_accounts_every_event(sliding, rundir):
    oracle_run(sliding, rundir)
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record["switch"] = {"streams": {3: {"in": 60, "out": 146, "dropped": {"no_window": 0}}}}
    verdicts = evaluate(record, rundir, with_windows=False)
    assert verdicts.ok and record["ok"] is True
    acct = record["accounting"]["streams"]["3"]
    # n=5, slide 2: copies per event 1,1,2,2, then 3,2,3,2,...: 6 + 28*5 = 146 in all
    assert acct["sent"] == 60 and sum(acct["received_per_operator"].values()) == 146
    assert acct["lost"] == 0 and acct["lost_before_switch"] == 0 and acct["lost_after_switch"] == 0
    assert record["check"]["3"]["expected_deliveries"] == 146


def test_a_lost_copy_is_named_and_placed(sliding, rundir):
    oracle_run(sliding, rundir, lose=(10, "h3"))
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record["switch"] = {"streams": {3: {"in": 60, "out": 146, "dropped": {}}}}
    verdicts = evaluate(record, rundir, with_windows=False)
    assert not verdicts.ok
    acct = record["accounting"]["streams"]["3"]
    assert acct["lost"] == 1 and acct["lost_after_switch"] == 1 and acct["lost_before_switch"] == 0
    assert record["check"]["3"]["examples"] == ["missing: seq 10 at h3"]


def test_account_without_switch_counters_leaves_placement_unknown(sliding, rundir):
    sources = oracle_run(sliding, rundir)
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    deliveries = pd.read_parquet(rundir.deliveries)
    from testbed.analysis.check import check_frames
    acct = account(record, rundir, sources, deliveries, check_frames(record["streams"], sources, deliveries))
    assert acct["streams"]["3"]["lost_before_switch"] is None


def test_record_streams_round_trip_to_the_oracle(sliding):
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    from testbed.semantics.topology import Stream
    again = Stream.from_record(record["streams"]["3"])
    assert again == sliding.streams[0]


def test_rundir_owns_the_layout(tmp_path):
    rundir = RunDir(tmp_path / "r").create()
    assert rundir.logs.is_dir() and rundir.raw.is_dir()
    assert rundir.record.parent == rundir.root
    paths = rundir.spark_paths()
    assert {"in", "input_done", "ready", "partials", "checkpoint", "analysis", "sources", "deliveries",
            "windows", "windows_reference", "changes", "unseen"} == set(paths)
    assert all(p.startswith(str(rundir.root)) for p in paths.values())
    exp = ExperimentDir(tmp_path / "e")
    assert exp.run("cbsw1").root == exp.root / "runs" / "cbsw1"
    assert list(exp.runs()) == []
    rundir.write_record({"x": 1})
    rundir.link_latest()
    assert (tmp_path / "latest").resolve() == rundir.root and rundir.is_run()


def test_missing_copies_at_a_failed_operator_are_the_failures(sliding, rundir):
    """h3 fails: what it never recorded is counted at it, with the windows those
    copies belonged to, and the run still passes."""
    oracle_run(sliding, rundir, lose=(10, "h3"))
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", "model", "t.yaml")
    record["switch"] = {"streams": {3: {"in": 60, "out": 146, "dropped": {}}}}
    record["adaptation"] = {"failures": [{"host": "h3", "how": "kill", "at": 0.0}]}
    verdicts = evaluate(record, rundir, with_windows=False)
    assert verdicts.ok
    check = record["check"]["3"]
    oracle = sliding.streams[0].oracle()
    for seq in range(11):
        windows = oracle.step(seq, seq).windows
    assert check["lost_at_failed_operators"] == 1 and check["missing"] == 0
    assert check["windows_affected_by_failure"] == [w for w in windows if oracle.owner(w) == "h3"]
