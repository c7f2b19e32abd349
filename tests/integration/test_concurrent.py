"""Two runs at once: side by side when they can be, refused at once when they cannot.

Every switch has a network namespace of its own, so two runs of the very
same topology (same switch, same host and interface names) run side by
side without touching each other.  What they cannot share is a run
directory: a second run given the directory of a live one refuses at once,
naming the run in the way, and the first goes on undisturbed.
"""
from __future__ import annotations

import pytest

from support.records import written
from support.runs import new_tag, nothing_left, small_topology, start_run, wait_for
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation skipped: {mininet_missing()}")]
WINDOW = {"kind": "count", "size": 4, "slide": 2}


def test_two_runs_of_one_topology_side_by_side(tmp_path):
    topo = small_topology(tmp_path, "r11", WINDOW, events=2000, rate=800)
    tags = [new_tag(), new_tag()]
    outs = [tmp_path / "a", tmp_path / "b"]
    procs = [start_run(str(topo), "--out", str(out), "--no-spark", tag=tag) for out, tag in zip(outs, tags)]
    results = [proc.communicate(timeout=300) for proc in procs]
    for proc, (_, stderr), out in zip(procs, results, outs):
        assert proc.returncode == 0, stderr[-3000:]
        record = written(RunDir(out))
        assert record["ok"] and record["accounting"]["streams"]["5"]["lost"] == 0
        # each switch saw its own run's events only
        assert record["switch"]["streams"]["5"]["in"] == 2000 and record["switch"]["non_event"] == 0
    starts = [written(RunDir(out))["start"] for out in outs]
    ends = [written(RunDir(out))["end"] for out in outs]
    assert max(starts) < min(ends), "the runs did not overlap"
    for tag in tags:
        nothing_left(tag)


def test_second_run_in_the_same_directory_is_refused_at_once(tmp_path):
    topo = small_topology(tmp_path, "r12", WINDOW, events=4000, rate=800)
    out = tmp_path / "run"
    first, second = new_tag(), new_tag()
    proc = start_run(str(topo), "--out", str(out), "--no-spark", tag=first)
    wait_for(RunDir(out).topology.exists, 60, "the first run to claim its directory")
    refused = start_run(str(topo), "--out", str(out), "--no-spark", tag=second)
    _, stderr_second = refused.communicate(timeout=120)
    assert proc.poll() is None, "the first run ended before the second was refused"
    assert refused.returncode == 2 and stderr_second.count("\n") == 1, stderr_second
    assert f"{out} is the directory of run " in stderr_second and "phase " in stderr_second
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    record = written(RunDir(out))
    assert record["ok"] and f"run {record['run_id']} (pid {proc.pid}" in stderr_second
    nothing_left(first)
    nothing_left(second)
