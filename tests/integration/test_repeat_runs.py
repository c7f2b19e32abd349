"""The repeat harness on real runs, and the load ``make stress`` puts on the machine."""
from __future__ import annotations

import json
import shutil

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


@pytest.mark.skipif(stress_ng_missing() is not None, reason=str(stress_ng_missing()))
def test_the_load_ends_with_its_block():
    with CpuLoad(1, 10) as load:
        assert psutil.Process(load.proc.pid).is_running()
    assert load.proc.poll() is not None
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "stress-ng"]
    assert shutil.which("stress-ng")
