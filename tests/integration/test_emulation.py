"""Emulation runs on the embedded target, end to end (root and Mininet needed)."""
import os
import signal

import pandas as pd
import pytest
import yaml

from support.records import written
from support.runs import (
    kill_watchdogs,
    new_tag,
    nothing_left,
    run_cli,
    small_topology,
    start_run,
    state_files,
    wait_for,
)
from testbed.emulation.footprint import tagged_processes
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir

pytestmark = pytest.mark.mininet
MISSING = mininet_missing()
needs_mininet = pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")


@needs_mininet
@pytest.mark.parametrize("window", [
    {"kind": "count", "size": 7, "slide": 7},          # tumbling
    {"kind": "count", "size": 5, "slide": 2},          # sliding, slide does not divide size
    {"kind": "time", "size": 9, "slide": 4},           # time sliding, 4 does not divide 9
], ids=["count-tumbling", "count-sliding", "time-sliding"])
def test_run_passes_check(tmp_path, window):
    topo = small_topology(tmp_path, "sw1", window)
    out = tmp_path / "run"
    tag = new_tag()
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark", tag=tag)
    assert res.returncode == 0, res.stderr[-3000:]
    run = written(RunDir(out))
    assert run["ok"] is True
    acct = run["accounting"]["streams"]["5"]
    assert acct["sent"] == 300 and acct["lost"] == 0
    delivered = pd.read_parquet(RunDir(out).deliveries)
    assert len(delivered) == run["expected_deliveries"] == acct["switch_copies_out"]
    assert sum(acct["received_per_operator"].values()) == len(delivered)
    assert set(pd.read_parquet(RunDir(out).sources).columns) >= {"stream", "seq", "ts", "send_ns"}
    assert set(delivered.columns) >= {"stream", "seq", "ts", "operator", "recv_ns"}
    assert RunDir(out).figure("load").stat().st_size > 0
    assert run["git_revision"] and run["seed"] == 1 and run["versions"]["mininet"]
    # testbed check agrees, on its own
    chk = run_cli("check", str(out))
    assert chk.returncode == 0 and "OK" in chk.stdout
    nothing_left(tag)


@needs_mininet
@pytest.mark.spark
def test_batched_and_unbatched_streams_run_side_by_side(tmp_path):
    """The shipped mixed topology: two batched streams (one with late events
    inside its batches) beside one of single events, through Spark."""
    from testbed.analysis.spark import spark_missing
    if spark_missing():
        pytest.skip(f"Spark skipped: {spark_missing()}")
    out = tmp_path / "run"
    tag = new_tag()
    res = run_cli("run", "topologies/batched.yaml", "--out", str(out), "--spark-master", "local[2]", tag=tag)
    assert res.returncode == 0, res.stderr[-3000:]
    run = written(RunDir(out))
    assert run["ok"] is True
    sources = pd.read_parquet(RunDir(out).sources)
    frames = sources.groupby("stream")["frame"].nunique().to_dict()
    events = sources.groupby("stream").size().to_dict()
    assert frames[293] == events[293] == 2000                      # one event per frame
    assert frames[291] == 250 and frames[292] < events[292] / 8     # full batches of 8; batches of up to 16
    assert sources.loc[sources["stream"] == 291, "batch_wait_ns"].max() <= 5_000_000
    for sid in ("291", "292", "293"):
        acct = run["accounting"]["streams"][sid]
        assert acct["lost"] == 0 and sum(acct["received_per_operator"].values()) == acct["switch_copies_out"]
        assert run["window_check"][sid]["ok"], run["window_check"][sid]
    assert run["switch"]["streams"]["292"]["dropped"]["too_late"] > 0      # late events inside batches
    chk = run_cli("check", str(out))
    assert chk.returncode == 0 and all(f"stream {sid}: OK" in chk.stdout for sid in (291, 292, 293))
    nothing_left(tag)


@needs_mininet
def test_gap_events_are_counted_not_lost(tmp_path):
    topo = small_topology(tmp_path, "sw2", {"kind": "count", "size": 2, "slide": 5}, n_ops=2, events=100)
    out = tmp_path / "run"
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark")
    assert res.returncode == 0, res.stderr[-3000:]
    acct = written(RunDir(out))["accounting"]["streams"]["5"]
    assert acct["undelivered_by_design"] == {"no_window": 60}
    assert acct["dropped_at_switch"]["no_window"] == 60


@needs_mininet
def test_check_fails_on_tampered_deliveries(tmp_path):
    topo = small_topology(tmp_path, "sw3", {"kind": "count", "size": 3, "slide": 1}, events=100)
    out = tmp_path / "run"
    assert run_cli("run", str(topo), "--out", str(out), "--no-spark").returncode == 0
    d = pd.read_parquet(RunDir(out).deliveries)
    d = pd.concat([d.iloc[1:], d.iloc[[5]]])          # one missing, one duplicated
    d.to_parquet(RunDir(out).deliveries)
    chk = run_cli("check", str(out))
    assert chk.returncode == 1
    assert "missing=1" in chk.stdout and "duplicates=1" in chk.stdout


@needs_mininet
def test_interrupt_cleans_up(tmp_path):
    topo = small_topology(tmp_path, "sw4", {"kind": "count", "size": 3, "slide": 1}, events=20000, rate=1000)
    out = tmp_path / "run"
    tag = new_tag()
    proc = start_run(str(topo), "--out", str(out), "--no-spark", tag=tag)
    wait_for(RunDir(out).source_status("src").exists, 60, "the source to start")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    nothing_left(tag)
    assert "interrupted" in err


@needs_mininet
def test_clean_after_crash(tmp_path):
    topo = small_topology(tmp_path, "sw5", {"kind": "count", "size": 3, "slide": 1}, events=20000, rate=1000)
    out = tmp_path / "run"
    tag = new_tag()
    proc = start_run(str(topo), "--out", str(out), "--no-spark", tag=tag)
    wait_for(RunDir(out).source_status("src").exists, 60, "the source to start")
    # A crash that takes the run's watchdog with it (the OOM killer, `kill -9` of
    # everything): otherwise the watchdog cleans at once and `clean` is never needed
    # (that path is tests/integration/test_sigkill.py's).
    kill_watchdogs(tag)
    os.kill(proc.pid, signal.SIGKILL)            # a crash: no finally block runs
    proc.communicate()
    assert tagged_processes(tag) and state_files()   # the crash left things behind
    res = run_cli("clean")
    assert res.returncode == 0
    assert "ended pid" in res.stdout
    nothing_left(tag)


def test_bad_topology_starts_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "bad", "hosts": {"a": {}, "b": {}}, "streams": [
        {"id": 1, "source": "a", "window": {"kind": "count", "size": 0, "slide": 1},
         "operators": ["b"], "events": 1, "rate": 1}]}))
    out = tmp_path / "run"
    res = run_cli("run", str(bad), "--out", str(out))
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "streams[0].window.size" in res.stderr
    assert not out.exists()


@needs_mininet
@pytest.mark.spark
def test_run_with_spark_operators(tmp_path):
    from testbed.analysis.spark import spark_missing
    if spark_missing():
        pytest.skip(f"Spark skipped: {spark_missing()}")
    topo = small_topology(tmp_path, "sw6", {"kind": "count", "size": 5, "slide": 2}, events=400)
    data = yaml.safe_load(topo.read_text())
    data["streams"][0]["query"] = {"kind": "nexmark_q7"}
    topo.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    tag = new_tag()
    res = run_cli("run", str(topo), "--out", str(out), "--spark-master", "local[2]", tag=tag)
    assert res.returncode == 0, res.stderr[-3000:]
    run = written(RunDir(out))
    assert run["window_check"]["5"]["ok"] and run["window_check"]["5"]["reference_windows"] == 200
    assert run["spark"]["spark_master"] == "local[2]"
    windows = pd.read_parquet(RunDir(out).windows)
    assert len(windows) == 200 and windows["completed_ns"].min() > run["start"] * 1e9
    nothing_left(tag)


def replayed_run(tmp_path, switch: str, window: dict, out, **stream_fields) -> dict:
    """``tmp_path/replay.csv`` (columns t, v) replayed as the one stream of a small
    topology with ``window``, summed, and run with Spark into ``out``: its record."""
    topo = small_topology(tmp_path, switch, window, events=400, rate=1000)
    data = yaml.safe_load(topo.read_text())
    data["streams"][0].update(replay={"path": str(tmp_path / "replay.csv"), "ts": "t", "value": "v"},
                              query={"kind": "sum"}, **stream_fields)
    topo.write_text(yaml.safe_dump(data))
    res = run_cli("run", str(topo), "--out", str(out), "--spark-master", "local[2]")
    assert res.returncode == 0, res.stderr[-3000:]
    return written(RunDir(out))


@needs_mininet
@pytest.mark.spark
def test_replayed_stream_with_steps_back_passes_with_lateness(tmp_path):
    """A CSV whose timestamps go back now and then: without lateness the late
    rows are dropped (and the window check says which windows that changed);
    with lateness covering the steps back and a source that also sends 5% of
    its events late on purpose, every window equals the reference."""
    from testbed.analysis.spark import spark_missing
    if spark_missing():
        pytest.skip(f"Spark skipped: {spark_missing()}")
    rows, t = [], 0
    for i in range(400):
        t += 7
        rows.append(t - (25 if i % 37 == 36 else 0))        # every 37th row is 25 units late
    (tmp_path / "replay.csv").write_text("t,v\n" + "".join(f"{ts},{i % 13}\n" for i, ts in enumerate(rows)))
    for lateness, switch in ((0, "sw13"), (70, "sw14")):
        out = tmp_path / f"run{lateness}"
        late = {"perturb": {"disorder": {"fraction": 0.05, "max_delay": 30}}} if lateness else {}
        run = replayed_run(tmp_path, switch, {"kind": "time", "size": 40, "slide": 20, "lateness": lateness}, out,
                           **late)
        windows, check = run["window_check"]["5"], run["check"]["5"]
        assert check["ok"] and windows["ok"]
        if lateness == 0:
            assert check["undelivered_by_design"]["too_late"] == 10
            assert windows["affected_by_lateness"] > 0
            assert windows["matching"] + windows["affected_by_lateness"] == windows["reference_windows"]
        else:
            sources = pd.read_parquet(RunDir(out).sources)
            assert sources["delayed"].sum() > 5
            assert "too_late" not in check["undelivered_by_design"]
            assert windows["matching"] == windows["reference_windows"] and windows["affected_by_lateness"] == 0


@needs_mininet
@pytest.mark.bmv2
@pytest.mark.parametrize("window", [{"kind": "count", "size": 5, "slide": 2},
                                    {"kind": "time", "size": 9, "slide": 4},
                                    {"kind": "time", "size": 9, "slide": 4, "starts": "event"}],
                         ids=["count", "time", "time-event"])
def test_run_on_bmv2_passes_check(tmp_path, window):
    from testbed.targets.bmv2.toolchain import toolchain_missing
    if toolchain_missing():
        pytest.skip(f"bmv2 toolchain: {toolchain_missing()}")
    topo = small_topology(tmp_path, "sw7", window)
    out = tmp_path / "run"
    tag = new_tag()
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark", "--target", "bmv2", tag=tag)
    assert res.returncode == 0, res.stderr[-3000:]
    run = written(RunDir(out))
    assert run["ok"] and run["target"] == "bmv2" and run["versions"]["simple_switch"].startswith("1.")
    # Nothing in the topology changes a stream: the build without changes ran.
    assert run["versions"]["p4_program"] == "splitter_fixed.json"
    assert run["accounting"]["streams"]["5"]["switch_copies_out"] == run["expected_deliveries"]
    assert RunDir(out).bmv2_log("sw7").exists()
    nothing_left(tag)


@needs_mininet
def test_bmv2_target_without_toolchain_refuses_cleanly(tmp_path):
    topo = small_topology(tmp_path, "sw8", {"kind": "count", "size": 2, "slide": 2})
    out = tmp_path / "run"
    env = dict(os.environ, P4_PREFIX=str(tmp_path / "no-toolchain"))
    res = run_cli("run", str(topo), "--out", str(out), "--target", "bmv2", "--no-spark", env=env)
    assert res.returncode == 2
    assert "cannot run on target bmv2" in res.stderr and "not found" in res.stderr
    assert res.stderr.strip().count("\n") == 0
    assert not out.exists() and state_files() == []


@needs_mininet
def test_link_delay_is_applied(tmp_path):
    """A 20 ms delay on the source's link shows in every delivery's latency:
    through netem where the kernel has it, through the user-space relay where not."""
    topo = small_topology(tmp_path, "sw9", {"kind": "count", "size": 3, "slide": 3}, events=100, rate=500)
    data = yaml.safe_load(topo.read_text())
    data["links"] = [{"host": "src", "delay": "20ms"}]
    topo.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    tag = new_tag()
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark", tag=tag)
    assert res.returncode == 0, res.stderr[-3000:]
    from testbed.emulation.network import netem_missing
    run = written(RunDir(out))
    assert run["links"] == {"src": "user-space relay" if netem_missing() else "netem"}
    d = pd.read_parquet(RunDir(out).deliveries).merge(
        pd.read_parquet(RunDir(out).sources)[["stream", "seq", "send_ns"]], on=["stream", "seq"])
    latency_ms = (d["recv_ns"] - d["send_ns"]) / 1e6
    assert len(d) == run["expected_deliveries"] and latency_ms.min() >= 19.5
    nothing_left(tag)


@needs_mininet
def test_link_loss_is_attributed_to_the_link(tmp_path):
    """5% loss on the source's link through the user-space relay: every
    missing event is one the relay dropped, and what follows it is correct."""
    topo = small_topology(tmp_path, "sw11", {"kind": "count", "size": 4, "slide": 2}, events=600, rate=1500)
    data = yaml.safe_load(topo.read_text())
    data["links"] = [{"host": "src", "loss": 5, "shaper": "user"}]
    topo.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark")
    assert res.returncode == 0, res.stderr[-3000:]
    rundir = RunDir(out)
    run = written(rundir)
    acct, check = run["accounting"]["streams"]["5"], run["check"]["5"]
    dropped = pd.read_parquet(rundir.link_drops)
    assert run["links"] == {"src": "user-space relay"}
    assert 10 < len(dropped) < 60 and set(dropped["toward"]) == {"switch"}
    assert acct["lost_on_link"] == len(dropped) and acct["lost_before_switch"] == 0
    assert check["missing"] == check["extra"] == check["duplicates"] == 0 and check["ok"]
    assert acct["switch_accepted"] == 600 - len(dropped)


@needs_mininet
def test_reordering_link_with_lateness_passes_end_to_end(tmp_path):
    """A reordering link makes a time stream arrive out of order; with enough
    lateness every late event lands in its own windows, and the splitter's
    too_late drops equal the oracle's."""
    window = {"kind": "time", "size": 40, "slide": 20, "lateness": 80}
    topo = small_topology(tmp_path, "sw12", window, events=800, rate=2000)
    data = yaml.safe_load(topo.read_text())
    data["links"] = [{"host": "src", "delay": "2ms", "reorder": 10}]
    topo.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark")
    assert res.returncode == 0, res.stderr[-3000:]
    run = written(RunDir(out))
    relay = pd.read_json(RunDir(out).raw / RunDir(out).relay_status("src").name, typ="series")
    assert relay["frames"]["switch"]["reordered"] > 20
    check, acct = run["check"]["5"], run["accounting"]["streams"]["5"]
    assert check["ok"] and acct["lost"] == 0
    assert acct["dropped_at_switch"]["too_late"] == check["undelivered_by_design"].get("too_late", 0)


@needs_mininet
def test_link_bandwidth_is_applied(tmp_path):
    """HTB shaping: 400 events of 74 bytes through a 0.2 Mbit/s operator link
    take at least 400*74*8/200e3 = 1.2 s to arrive, although sent in 0.2 s."""
    topo = small_topology(tmp_path, "sw10", {"kind": "count", "size": 1, "slide": 1}, n_ops=1,
                          events=400, rate=2000)
    data = yaml.safe_load(topo.read_text())
    data["links"] = [{"host": "op1", "bw": 0.2}]
    topo.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    res = run_cli("run", str(topo), "--out", str(out), "--no-spark")
    assert res.returncode == 0, res.stderr[-3000:]
    d = pd.read_parquet(RunDir(out).deliveries)
    s = pd.read_parquet(RunDir(out).sources)
    assert len(d) == 400
    assert (d["recv_ns"].max() - s["send_ns"].min()) / 1e9 >= 1.1


@needs_mininet
@pytest.mark.spark
def test_replayed_stream_with_gaps_under_both_start_rules(tmp_path):
    """A replayed CSV whose timestamps jump over several slides now and then,
    run with windows on the grid and with starts: event (S4's rule).  Both
    runs pass testbed check and the window check (the Spark operators'
    windows equal the reference of the rule the spec names), and the two
    rules deal the events to operators differently."""
    from testbed.analysis.spark import spark_missing
    if spark_missing():
        pytest.skip(f"Spark skipped: {spark_missing()}")
    rows, t = [], 0
    for i in range(400):
        t += 3 if i % 29 else 47                           # a gap of several slides every 29 rows
        rows.append(t)
    (tmp_path / "replay.csv").write_text("t,v\n" + "".join(f"{ts},{i % 13}\n" for i, ts in enumerate(rows)))
    received = {}
    for starts, switch in (("grid", "sw15"), ("event", "sw16")):
        run = replayed_run(tmp_path, switch, {"kind": "time", "size": 30, "slide": 10, "starts": starts},
                           tmp_path / f"run-{starts}")
        windows, check = run["window_check"]["5"], run["check"]["5"]
        assert check["ok"] and windows["ok"], (starts, check, windows)
        assert windows["matching"] == windows["reference_windows"] > 0
        received[starts] = run["accounting"]["streams"]["5"]["received_per_operator"]
    assert received["grid"] != received["event"]
