"""Streams that change, fail and scale during a real run (Mininet; bmv2 where present).

Each run is checked by ``testbed check``'s epoch-aware oracle against the
boundaries the switch reported: every event the switch saw must have gone
exactly where the definition says under the configuration in force.
"""
import os

import pandas as pd
import pytest
import yaml

from support.records import written
from support.runs import new_tag, nothing_left, run_cli, small_topology
from testbed.analysis.spark import spark_missing
from testbed.dataplane.liveness import silence_beats
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir, read_json
from testbed.targets.bmv2.toolchain import toolchain_missing

MISSING = mininet_missing()
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0 or MISSING is not None,
                                 reason=f"needs root and Mininet ({MISSING or 'not root'})")]


#: Events/s of the mid-stream change test per target.  Each event of its
#: (5, 1) window goes to 5 operators, and each change is 280-420 Thrift
#: operations.  On a 2-core machine bmv2 takes 300-420 ms for them at 1,500
#: events/s and stops taking packets meanwhile: 4 runs of 9 lost events
#: before the pipeline (the check's "never reached the switch").  At 750
#: events/s none of 8 did, and the changes took 31-73 ms.  The model
#: carries the full rate.
RATE = {"model": 1500, "bmv2": 750}
#: Silence that counts as a failure in these tests: long enough that a receiver
#: whose heartbeat thread waits for the CPU on a loaded machine is not taken for
#: dead (the default, 0.3 s, once detected a live operator during a CI run beside
#: other work), short enough to detect within the stream.
DETECT_S = 0.8


def adaptive_topology(tmp_path, switch, window, schedule=None, adapt=None, n_ops=6, events=3000, rate=1500):
    path = small_topology(tmp_path, switch, window, n_ops=n_ops, events=events, rate=rate)
    data = yaml.safe_load(path.read_text())
    if schedule:
        data["schedule"] = schedule
    if adapt:
        data["adapt"] = adapt
    path.write_text(yaml.safe_dump(data))
    return path


def run(path, out, *extra, spark=False):
    """One run through the CLI; with ``spark`` the operators compute their
    windows on Spark and the run compares them with the reference."""
    tag = new_tag()
    spark_args = ["--spark-master", "local[2]"] if spark else ["--no-spark"]
    res = run_cli("run", str(path), "--out", str(out), *spark_args, *extra, tag=tag)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    nothing_left(tag)
    return written(RunDir(out))


@pytest.mark.parametrize("target", ["model", pytest.param("bmv2", marks=pytest.mark.skipif(
    toolchain_missing() is not None, reason=f"bmv2 toolchain: {toolchain_missing()}"))])
def test_n_changes_mid_stream_on_a_sliding_stream(tmp_path, target):
    """6 -> 3 operators and back, then a new window spec: each change lands
    on a window boundary mid-stream and every event passes the check.  On
    the embedded target the operators also compute their windows on Spark,
    from the Windows headers, and every window equals the reference.

    The changes are placed after events of the stream, which holds the
    source at each point until the change is armed: the boundaries are the
    same however busy the machine is (placed at 0.4, 0.9 and 1.4 s, the third
    once found no event left on a loaded machine)."""
    path = adaptive_topology(tmp_path, "sa" + target[0], {"kind": "count", "size": 5, "slide": 1},
                             rate=RATE[target], schedule=[
        {"after": {"stream": 5, "events": 600}, "change": {"stream": 5, "operators": ["op1", "op3", "op5"]}},
        {"after": {"stream": 5, "events": 1350},
         "change": {"stream": 5, "operators": ["op1", "op2", "op3", "op4", "op5", "op6"]}},
        {"after": {"stream": 5, "events": 2100},
         "change": {"stream": 5, "window": {"kind": "count", "size": 4, "slide": 2}}}])
    with_spark = target == "model" and spark_missing() is None
    record = run(path, tmp_path / "run", "--target", target, spark=with_spark)
    changes = record["changes"]["5"]
    assert [c["epoch"] for c in changes] == [1, 2, 3]
    if target == "bmv2":     # a schedule of changes: the build that takes them
        assert record["versions"]["p4_program"] == "splitter.json"
    starts = [c["start"] for c in changes]
    assert starts == [600, 1350, 2100]             # slide 1: a boundary after every event, the first after the point
    held = read_json(RunDir(tmp_path / "run").raw / "src.source.status.json")["held"]
    assert [(h["entry"], h["events"]) for h in held] == [(0, 600), (1, 1350), (2, 2100)]
    check = record["check"]["5"]
    assert check["ok"] and check["missing"] == check["extra"] == check["duplicates"] == 0
    # Between the first two boundaries only op1, op3, op5 received anything new.
    d = pd.read_parquet(RunDir(tmp_path / "run").deliveries)
    middle = d[(d["seq"] >= starts[0] + 4) & (d["seq"] < starts[1])]
    assert set(middle["operator"]) == {"op1", "op3", "op5"}
    # each copy's header names its epoch
    assert set(d[d["seq"] >= starts[2] + 4]["hdr_epoch"]) == {3}
    if with_spark:
        windows = record["window_check"]["5"]
        assert windows["ok"] and windows["matching"] == windows["reference_windows"] > 1000, windows


def test_a_time_window_changes_spec_mid_stream(tmp_path):
    """Placed at an event time: the source is held after its first event
    stamped 905 or later, so the change begins at the next boundary of the
    old spec after it, 910, on any machine."""
    path = adaptive_topology(tmp_path, "sat", {"kind": "time", "size": 20, "slide": 10}, n_ops=4, schedule=[
        {"after": {"stream": 5, "ts": 905}, "change": {"stream": 5, "window": {"kind": "time", "size": 9, "slide": 3},
                                                       "operators": ["op2", "op4"]}}])
    record = run(path, tmp_path / "run")
    (change,) = record["changes"]["5"]
    assert change["start"] == 910 and record["check"]["5"]["ok"]


def test_a_timed_change_still_lands_mid_stream(tmp_path):
    """``at`` (seconds) still places an entry: the boundary depends on the machine's pace, its order does not."""
    path = adaptive_topology(tmp_path, "saw", {"kind": "time", "size": 20, "slide": 10}, n_ops=4, schedule=[
        {"at": 0.6, "change": {"stream": 5, "window": {"kind": "time", "size": 9, "slide": 3},
                               "operators": ["op2", "op4"]}}])
    record = run(path, tmp_path / "run")
    (change,) = record["changes"]["5"]
    assert change["start"] % 10 == 0 and record["check"]["5"]["ok"]


def test_a_point_the_stream_never_reaches_is_reported_not_applied(tmp_path):
    """Half the events are lost on purpose, so the source sends about 1,500
    frames and never reaches the 2,900th: the run ends, the entry is named in
    the verdict, and the events are judged all the same."""
    path = adaptive_topology(tmp_path, "san", {"kind": "count", "size": 3, "slide": 1}, n_ops=4, schedule=[
        {"after": {"stream": 5, "events": 2900}, "fail": {"host": "op2"}}])
    data = yaml.safe_load(path.read_text())
    data["streams"][0]["perturb"] = {"loss": 0.5}
    path.write_text(yaml.safe_dump(data))
    record = run(path, tmp_path / "run")
    assert record["adaptation"]["not_applied"] == [{"entry": 0, "action": "fail", "why": "the stream ended first"}]
    assert record["adaptation"]["failures"] == []
    assert read_json(RunDir(tmp_path / "run").verdicts)["not_applied"] == [
        "schedule[0] (fail): not applied: the stream ended first"]
    assert record["check"]["5"]["ok"]


def test_failover_detects_and_removes_a_killed_operator(tmp_path):
    path = adaptive_topology(tmp_path, "saf", {"kind": "count", "size": 3, "slide": 1}, n_ops=4, events=4000,
                             rate=1000, schedule=[{"at": 1.5, "fail": {"host": "op2", "how": "kill"}}],
                             adapt={"failover": True, "detect_timeout": DETECT_S})
    record = run(path, tmp_path / "run", spark=spark_missing() is None)
    adaptation = record["adaptation"]
    (failure,) = adaptation["failures"]
    (detection,) = adaptation["detections"]
    assert detection["host"] == "op2" and detection["detected_at"] > failure["at"]
    (change,) = record["changes"]["5"]
    assert change["policy"] == "failover" and change["operators"] == ["op1", "op3", "op4"]
    assert change["applied_at"] > detection["detected_at"]
    check = record["check"]["5"]
    assert check["ok"] and check["lost_at_failed_operators"] > 0 and check["windows_affected_by_failure"]
    d = pd.read_parquet(RunDir(tmp_path / "run").deliveries)
    assert not ((d["operator"] == "op2") & (d["seq"] >= change["start"])).any()
    if spark_missing() is None:
        # every window op2 did not own is whole and equal to the reference
        windows = record["window_check"]["5"]
        assert windows["ok"] and windows["affected_by_failure"] > 0, windows
        assert windows["matching"] + windows["affected_by_failure"] == windows["reference_windows"]


@pytest.mark.parametrize("how,target", [("kill", "model"), ("link", "model"), pytest.param(
    "link", "bmv2", marks=pytest.mark.skipif(toolchain_missing() is not None,
                                             reason=f"bmv2 toolchain: {toolchain_missing()}"))])
def test_a_failed_operator_comes_back_and_gets_its_windows_again(tmp_path, how, target):
    """op2 fails (its receiver killed, or its link down), is detected and
    removed; the schedule brings it back and, heard again, it returns to its
    place.  A new receiver carries on the old one's parts, and the check passes.

    Both entries are placed in stream terms and hold the source until
    failover has acted (``hold: failover``), so the removal begins at event
    1,000 and the return at event 2,500 however long detection, a new
    receiver's start or the change took: placed at 1.0 and 2.5 s, a receiver
    that took 1.4 s to start on a busy machine came back with too little of
    the stream left to get its share."""
    path = adaptive_topology(tmp_path, "sr" + target[0] + how[0], {"kind": "count", "size": 3, "slide": 1},
                             n_ops=4, events=4500, rate=1000,
                             schedule=[{"after": {"stream": 5, "events": 1000}, "fail": {"host": "op2", "how": how},
                                        "hold": "failover"},
                                       {"after": {"stream": 5, "events": 2500}, "recover": {"host": "op2"},
                                        "hold": "failover"}],
                             adapt={"failover": True, "detect_timeout": DETECT_S})
    record = run(path, tmp_path / "run", "--target", target)
    adaptation = record["adaptation"]
    (detection,) = adaptation["detections"]
    # op1, op3 and op4 beat on while op2 was silent: the switch counted it
    assert detection["host"] == "op2" and detection["others_beats"] >= silence_beats(DETECT_S)
    assert [r["host"] for r in adaptation["recoveries"]] == ["op2"]
    assert [h["host"] for h in adaptation["heard_again"]] == ["op2"]
    # the source waited for failover's answer each time, and got it
    assert adaptation["failures"][0]["failover_held_s"] is not None
    assert adaptation["recoveries"][0]["failover_held_s"] is not None
    held = read_json(RunDir(tmp_path / "run").raw / "src.source.status.json")["held"]
    assert [(h["entry"], h["events"]) for h in held] == [(0, 1000), (1, 2500)]
    removed, restored = record["changes"]["5"]
    assert removed["policy"] == "failover" and removed["operators"] == ["op1", "op3", "op4"]
    assert restored["policy"] == "recovery" and restored["operators"] == ["op1", "op2", "op3", "op4"]
    assert (removed["start"], restored["start"]) == (1000, 2500)    # slide 1: a boundary after every event
    check = record["check"]["5"]
    assert check["ok"] and check["missing"] == check["extra"] == check["duplicates"] == 0
    d = pd.read_parquet(RunDir(tmp_path / "run").deliveries)
    at_op2 = d[d["operator"] == "op2"]["seq"]
    assert not at_op2.between(1000, 2499).any()                     # nothing while it was out
    # Its share afterwards: a window of 3 events in every 4, so 3 of every 4 of the last 2,000 events.
    assert (at_op2 >= 2500).sum() >= 1490
