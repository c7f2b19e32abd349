"""Faults during a run: each ends with a clear message, the raw files written so far,
and nothing for ``testbed clean`` to do.

Where the run can go on it does, and accounts for the loss: a receiver that
dies leaves its events counted lost at its operator; a Spark application
that fails leaves the deliveries checked and the windows "not computed".
The switch or a source dying ends the stream.  SIGINT and SIGTERM are sent
at every phase (``support.interrupt_at``), and an output directory that
cannot be written is refused before anything starts.  Needs root and
Mininet; the Spark cases need Spark.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess

import pandas as pd
import pytest

from support.records import written
from support.runs import new_tag, nothing_left, recorded_pid, run_cli, small_topology, start_run, wait_for
from testbed.analysis.spark import spark_missing
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir, read_json
from testbed.targets.bmv2.toolchain import toolchain_missing

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation skipped: {mininet_missing()}")]
needs_spark = pytest.mark.skipif(spark_missing() is not None, reason=f"Spark skipped: {spark_missing()}")
WINDOW = {"kind": "count", "size": 3, "slide": 1}
LONG = {"events": 12000, "rate": 1000}         # 12 s of streaming: time to strike


def strike(tmp_path, switch: str, what: str, *args: str, timeout: float = 180):
    """Start a long run, kill the recorded process ``what`` with SIGKILL once every
    receiver has written a part, and return (exit code, stdout, stderr, run directory, tag)."""
    topo = small_topology(tmp_path, switch, WINDOW, **LONG)
    out = tmp_path / "run"
    tag = new_tag()
    proc = start_run(str(topo), "--out", str(out), *args, tag=tag)
    flushed = lambda: all(read_json(RunDir(out).receiver_status(op)).get("parts") for op in ("op1", "op2", "op3"))  # noqa: E731
    wait_for(lambda: flushed() or proc.poll() is not None, 120, "the stream")
    pid = wait_for(lambda: recorded_pid(what), 10, what)
    os.kill(pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, stdout, stderr, RunDir(out), tag


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("target", ["model", "bmv2"])
def test_switch_dying_ends_the_run_with_its_name(tmp_path, target):
    if target == "bmv2" and toolchain_missing():
        pytest.skip(f"bmv2 toolchain: {toolchain_missing()}")
    code, _, stderr, rundir, tag = strike(tmp_path, "r1", f"{target} switch", "--no-spark", "--target", target)
    assert code == 1
    line = error_line(stderr)
    assert "switch r1 was killed by SIGKILL during the stream" in line and str(rundir.switch_log("r1")) in line
    record = written(rundir)
    assert record["error"].startswith("RunError: switch r1 was killed")
    assert (rundir.raw / rundir.source_events("src").name).exists()        # kept: what was sent
    assert rundir.host_files("deliveries") == [] and list(rundir.raw.glob("op1.deliveries.*.parquet"))
    assert len(pd.read_parquet(rundir.sources)) > 0
    nothing_left(tag)


def test_source_dying_ends_the_run_with_its_name(tmp_path):
    code, _, stderr, rundir, tag = strike(tmp_path, "r2", "source on src", "--no-spark")
    assert code == 1
    assert "source on src was killed by SIGKILL during the stream" in error_line(stderr)
    assert len(pd.read_parquet(rundir.deliveries)) > 0                      # what arrived is kept
    nothing_left(tag)


def test_receiver_dying_is_counted_lost_at_its_operator(tmp_path):
    code, stdout, stderr, rundir, tag = strike(tmp_path, "r3", "receiver on op2", "--no-spark")
    assert code == 1, stderr[-3000:]                     # the check fails: op2 misses events
    record = written(rundir)
    assert record["faults"] == [{"what": "receiver on op2", "phase": "stream", "exit": -signal.SIGKILL,
                                 "planned": False}]       # not asked for by a schedule
    acct = record["accounting"]
    lost = acct["streams"]["5"]["lost_per_operator"]
    assert set(lost) == {"op2"} and lost["op2"] > 0      # the run went on: op1 and op3 lost nothing
    assert acct["lost_at_dead_receivers"] == {"op2": lost["op2"]}
    assert acct["streams"]["5"]["sent"] == LONG["events"]
    # op2 recorded events before it died, and they are kept
    assert acct["streams"]["5"]["received_per_operator"]["op2"] > 0
    assert "receiver on op2 was killed by SIGKILL during the stream" in stderr
    nothing_left(tag)


@needs_spark
def test_spark_failing_to_start_leaves_deliveries_checked(tmp_path):
    topo = small_topology(tmp_path, "r4", WINDOW, events=300)
    out = tmp_path / "run"
    tag = new_tag()
    res = run_cli("run", str(topo), "--out", str(out), "--spark-master", "nosuch://nowhere", tag=tag)
    assert res.returncode == 1, res.stderr[-3000:]
    record = written(RunDir(out))
    assert record["check"]["5"]["ok"] and record["spark"]["computed"] is False
    assert "Spark application" in record["spark"]["error"] and not record["window_check"]
    assert "windows: not computed" in res.stderr
    check = run_cli("check", str(out))
    # judged again, the run gets the verdict it got: its windows were never checked
    assert check.returncode == 1 and "windows: not computed" in check.stdout
    nothing_left(tag)


@needs_spark
def test_spark_dying_leaves_deliveries_checked(tmp_path):
    code, stdout, stderr, rundir, tag = strike(tmp_path, "r5", "spark application", "--spark-master", "local[1]")
    assert code == 1, stderr[-3000:]
    record = written(rundir)
    assert record["check"]["5"]["ok"] and record["spark"]["computed"] is False
    assert "windows: not computed" in stderr and not rundir.windows.exists()
    nothing_left(tag)


def test_unwritable_output_is_refused_before_anything_starts(tmp_path):
    topo = small_topology(tmp_path, "r6", WINDOW)
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_cli("run", str(topo), "--out", str(blocker / "run"), "--no-spark")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert f"cannot write the run directory {blocker / 'run'}: {blocker} is not a folder" in res.stderr
    readonly = tmp_path / "ro"
    readonly.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "r12ro", str(readonly)], check=True)
    try:
        tag = new_tag()
        res = run_cli("run", str(topo), "--out", str(readonly / "run"), "--no-spark", tag=tag)
        assert res.returncode == 2 and "Read-only file system" in res.stderr and res.stderr.count("\n") == 1
        nothing_left(tag)
        small = tmp_path / "small"
        small.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "r12small", str(small)], check=True)
        try:
            res = run_cli("run", str(topo), "--out", str(small / "run"), "--no-spark", tag=tag)
            assert res.returncode == 2 and "MiB free; the run needs about" in res.stderr
            assert os.listdir(small) == []
        finally:
            subprocess.run(["umount", str(small)], check=True)
    finally:
        subprocess.run(["umount", str(readonly)], check=True)


def test_disk_filling_up_mid_run_ends_with_the_reason(tmp_path):
    topo = small_topology(tmp_path, "r7", WINDOW, **LONG)
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "r12disk", str(disk)], check=True)
    try:
        out = disk / "run"
        tag = new_tag()
        proc = start_run(str(topo), "--out", str(out), "--no-spark", tag=tag)
        wait_for(RunDir(out).source_status("src").exists, 120, "the stream")
        with open(disk / "filler", "wb") as filler:       # take every byte left
            try:
                while True:
                    filler.write(bytes(1 << 20))
                    filler.flush()
            except OSError:
                pass
        _, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 1, stderr[-3000:]
        assert "No space left on device" in error_line(stderr)
        nothing_left(tag)
    finally:
        subprocess.run(["umount", str(disk)], check=True)


NO_SPARK_PHASES = ["network", "plan", "operators", "stream", "stream+3", "stop", "conclude"]
SPARK_PHASES = ["spark submit", "spark"]


def interrupted(tmp_path, switch: str, phase: str, signame: str, *args: str) -> None:
    topo = small_topology(tmp_path, switch, WINDOW, events=3000, rate=600)
    out = tmp_path / "run"
    tag = new_tag()
    proc = start_run(str(topo), "--out", str(out), *args, tag=tag, interrupt=(phase, signame))
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    assert "interrupted; everything started was stopped" in stderr
    record = json.loads(RunDir(out).record.read_text())
    assert record["signals"] == [signame] and record["error"] == f"RunInterrupted: {signame}"
    rundir = RunDir(out)
    if phase.startswith("stream") or phase == "stop":
        # the raw files written so far are merged and kept: every receiver's, and
        # the source's if it had started sending when the signal came
        assert rundir.deliveries.exists() and len(list(rundir.raw.glob("op*.status.json"))) == 3
        status = read_json(rundir.raw / rundir.source_status("src").name)
        if status:
            assert len(pd.read_parquet(rundir.sources)) == sum(status["sent"].values())
    if phase == "stop":
        assert read_json(rundir.raw / rundir.source_status("src").name)["sent"]["5"] > 0
    nothing_left(tag)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", NO_SPARK_PHASES)
def test_signal_at_every_phase(tmp_path, phase, signame):
    interrupted(tmp_path, "r8", phase, signame, "--no-spark")


@needs_spark
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", SPARK_PHASES)
def test_signal_at_every_spark_phase(tmp_path, phase, signame):
    interrupted(tmp_path, "r9", phase, signame, "--spark-master", "local[1]")
