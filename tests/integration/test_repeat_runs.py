"""The repeat harness on real runs, and the load ``make stress`` puts on the machine."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

from support.runs import new_tag, nothing_left, run_cli, small_topology
from testbed.emulation.network import mininet_missing
from testbed.experiments.stress import CpuLoad, stress_ng_missing


@pytest.mark.mininet
@pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation skipped: {mininet_missing()}")
def test_a_scenario_repeated_reports_each_verdict_over_its_runs(tmp_path):
    topo = small_topology(tmp_path, "rp1", {"kind": "count", "size": 3, "slide": 1}, events=600, rate=1000)
    out = tmp_path / "repeated"
    tag = new_tag()
    res = run_cli("experiment", str(topo), "--repeat", "2", "--no-spark", "--out", str(out), tag=tag)
    assert res.returncode == 0, res.stderr[-3000:]
    nothing_left(tag)
    stability = json.loads((out / "stability.json").read_text())
    assert stability["repetitions"] == 2 and stability["ok"] is True
    rows = {row["verdict"]: row for row in stability["verdicts"]}
    assert rows["ok"]["outcomes"] == [True, True] and rows["check.5.ok"]["passed"] == 2
    assert (out / "repeat-1" / "verdicts.json").exists() and (out / "repeat-2" / "verdicts.json").exists()
    assert "| `check.5.ok` | 2 of 2 | yes |" in res.stdout


def in_group(pgid: int) -> list[psutil.Process]:
    """The processes still in process group ``pgid``."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return out


@pytest.mark.skipif(stress_ng_missing() is not None, reason=str(stress_ng_missing()))
def test_the_load_ends_with_its_block():
    """Its own workers, that is: under ``make stress`` another load runs beside it."""
    with CpuLoad(1, 10) as load:
        assert psutil.Process(load.proc.pid).is_running()
        assert in_group(load.proc.pid)                      # stress-ng (its workers follow)
    assert load.proc.poll() is not None
    assert in_group(load.proc.pid) == []
    assert shutil.which("stress-ng")


@pytest.mark.skipif(stress_ng_missing() is not None, reason=str(stress_ng_missing()))
def test_stress_stopped_by_sigterm_leaves_neither_its_load_nor_its_suite(tmp_path):
    """SIGTERM while the suite runs under load: exit 130, and the load, the
    suite and what the suite's test started are all gone."""
    marker = tmp_path / "started"
    test = tmp_path / "test_slow.py"
    test.write_text("import subprocess, time, pathlib\n"
                    "def test_slow():\n"
                    f"    child = subprocess.Popen(['sleep', '300'])\n"
                    f"    pathlib.Path({str(marker)!r}).write_text(str(child.pid))\n"
                    "    time.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "stress", "--suite-runs", "1", "--repeat", "0",
                             "--load", "10", "--pytest-args", str(test), "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the suite never started"
    loads = [p.pid for p in psutil.Process(proc.pid).children() if p.name() == "stress-ng"]
    sleeper = int(marker.read_text())
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert loads and all(in_group(pgid) == [] for pgid in loads)
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
