"""A run killed with SIGKILL leaves nothing behind, with no ``testbed clean``.

A dead process runs no cleanup: the run's watchdog does it, when the
lifeline only the run holds breaks (``testbed.emulation.lifeline``).  Each
case stops a ``testbed run`` at a phase, kills the run's whole process group
with SIGKILL, and gives the watchdog 10 s to end every process the run
started (found by the tag they all inherit, the watchdog itself included),
with the network namespaces those processes held and nothing new in the
root namespace.  Only then does it ask ``testbed clean``, which must find
nothing.

A phase is reached from the run's own doing, never a guessed sleep: the run
stops itself with SIGSTOP as it enters the phase (``support.interrupt_at``),
so everything it started so far is there to be counted, or, for the middle
of the stream, every receiver has written a part of what it received.
Needs root and Mininet; bmv2 and Spark cases skip without them.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from support.runs import env_for, new_tag, nothing_left, small_topology, start_run, wait_for
from testbed import ROOT
from testbed.analysis.spark import spark_missing
from testbed.emulation.footprint import Footprint, tagged_processes
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir, read_json
from testbed.targets.bmv2.toolchain import toolchain_missing

pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation skipped: {mininet_missing()}")]
SWITCH = "k9"
OPERATORS = ("op1", "op2", "op3")
WINDOW = {"kind": "count", "size": 3, "slide": 1}
#: Seconds the watchdog has, from the kill, to leave nothing.
BUDGET_S = 10.0
needs_spark = pytest.mark.skipif(spark_missing() is not None, reason=f"Spark skipped: {spark_missing()}")

#: (what the run has started when it is killed, phase it stops itself entering or
#: ``mid-stream``, with Spark)
CASES = [
    ("switch ready", "plan", False),
    ("operators ready", "stream", False),
    ("mid-stream", "mid-stream", False),
    ("Spark starting, network up", "operators", True),
    ("mid-stream with Spark", "mid-stream", True),
]


def net_namespaces(pids) -> set[str]:
    """The network namespaces ``pids`` are in, the root one left out."""
    own = os.readlink("/proc/self/ns/net")
    found = set()
    for pid in pids:
        try:
            found.add(os.readlink(f"/proc/{pid}/ns/net"))
        except OSError:
            pass
    return found - {own}


def held_namespaces(namespaces: set[str], killed_at: float) -> set[str]:
    """Those of ``namespaces`` a process started before ``killed_at`` (wall clock) is still in.

    Once freed, a namespace's inode number is given to the next one made, and
    others' runs on this machine make namespaces all the time: a process in
    one of ours was started before the kill (or by one that was).
    """
    older = [p.pid for p in psutil.process_iter(["create_time"]) if (p.info["create_time"] or 0) < killed_at]
    return net_namespaces(older) & namespaces


def ours(name: str) -> bool:
    """An interface or named namespace this test's runs could have made in the root namespace."""
    return name.startswith((SWITCH, "tbq", *OPERATORS, "src"))


def stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


def receivers_wrote(out: Path) -> bool:
    """Every receiver of a run under ``out`` has written a part of what it received: mid-stream."""
    name = lambda op: RunDir(out).receiver_status(op).name       # noqa: E731
    found = {op: list(out.rglob(name(op))) for op in OPERATORS}
    return all(found.values()) and all(read_json(path).get("parts") for paths in found.values() for path in paths)


def kill_and_count(proc: subprocess.Popen, before: Footprint, tag: str, out: Path, target: str, reached,
                   what: str, expected: list[str]) -> float:
    """Once ``reached()``, kill ``proc``'s process group with SIGKILL and assert that within
    ``BUDGET_S`` nothing it started is left, without ``testbed clean``, the root namespace
    as ``before`` it started; the seconds it took."""
    try:
        wait_for(lambda: reached() or proc.poll() is not None, 300, what)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        started = [p for p in tagged_processes(tag) if p.pid != proc.pid]
        names = " ".join(" ".join(p.cmdline()) for p in started)
        assert all(part in names for part in ["mininet:src", f"mininet:{SWITCH}", "testbed.emulation.watchdog",
                                              *expected]), names
        namespaces = net_namespaces(p.pid for p in started)
        assert len(namespaces) >= 2 + len(OPERATORS)           # the switch's and every host's
        killed_at = time.time()
        os.killpg(proc.pid, signal.SIGKILL)                     # the run and anything of its own group
        killed = time.monotonic()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = killed + BUDGET_S
    while time.monotonic() < deadline and (tagged_processes(tag) or held_namespaces(namespaces, killed_at)):
        time.sleep(0.1)
    took = time.monotonic() - killed
    left = [f"{p.pid} {' '.join(p.cmdline())[:100]}" for p in tagged_processes(tag)]
    held = held_namespaces(namespaces, killed_at)
    assert left == [] and held == set(), f"after {took:.1f}s: processes {left}, namespaces {held}"
    after = Footprint.take()
    assert [n for n in after.interfaces - before.interfaces if ours(n)] == []
    assert [n for n in after.namespaces - before.namespaces if ours(n)] == []
    # It was the watchdog, and it says what it ended.  (Mininet's host shells may
    # go by themselves: their terminal's other end closes with the run.)
    logs = [path.read_text() for path in out.rglob("lifeline.log")]
    assert any(f"({target} switch {SWITCH})" in log for log in logs), logs
    print(f"{what} ({target}): nothing left {took:.1f}s after SIGKILL")
    nothing_left(tag)
    return took


@pytest.mark.parametrize("target", ["model", "bmv2"])
@pytest.mark.parametrize("what, phase, spark", CASES, ids=[c[0].replace(" ", "-") for c in CASES])
def test_a_run_killed_with_sigkill_leaves_nothing(tmp_path, target, what, phase, spark):
    if target == "bmv2" and toolchain_missing():
        pytest.skip(f"bmv2 toolchain: {toolchain_missing()}")
    if spark and spark_missing():
        pytest.skip(f"Spark skipped: {spark_missing()}")
    topo = small_topology(tmp_path, SWITCH, WINDOW, events=12000, rate=1000)    # 12 s of stream
    out = tmp_path / "run"
    tag = new_tag()
    args = [str(topo), "--out", str(out), "--target", target,
            *(["--spark-master", "local[1]"] if spark else ["--no-spark"])]
    before = Footprint.take()
    proc = start_run(*args, tag=tag, interrupt=None if phase == "mid-stream" else (phase, "SIGSTOP"))
    reached = (lambda: receivers_wrote(out)) if phase == "mid-stream" else (lambda: stopped(proc.pid))
    kill_and_count(proc, before, tag, out, target, reached, what,
                   ["testbed.emulation.receiver" if phase in ("stream", "mid-stream") else "",
                    "org.apache.spark.deploy.SparkSubmit" if spark else ""])


@needs_spark
def test_a_python_api_run_killed_with_sigkill_leaves_nothing(tmp_path):
    """A process running ``testbed.api.run`` (a test, a notebook), killed mid-stream with Spark."""
    topo = small_topology(tmp_path, SWITCH, WINDOW, events=12000, rate=1000)
    out = tmp_path / "run"
    tag = new_tag()
    code = f"import testbed.api; testbed.api.run({str(topo)!r}, 'model', out={str(out)!r}, spark_master='local[1]')"
    before = Footprint.take()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env_for(tag), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    kill_and_count(proc, before, tag, out, "model", lambda: receivers_wrote(out), "the Python API mid-stream",
                   ["testbed.emulation.receiver", "org.apache.spark.deploy.SparkSubmit"])


@needs_spark
def test_an_experiment_killed_with_sigkill_leaves_nothing_not_even_its_warm_spark(tmp_path):
    """``testbed experiment`` with the warm Spark application its runs share
    (recorded under a state file of its own), killed in its first run's stream."""
    topo = small_topology(tmp_path, SWITCH, WINDOW, events=12000, rate=1000)
    out = tmp_path / "experiment"
    tag = new_tag()
    before = Footprint.take()
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "experiment", str(topo), "--repeat", "2",
                             "--target", "model", "--spark-master", "local[1]", "--out", str(out)],
                            cwd=ROOT, env=env_for(tag), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    kill_and_count(proc, before, tag, out, "model", lambda: receivers_wrote(out), "an experiment's run mid-stream",
                   ["testbed.emulation.receiver", "org.apache.spark.deploy.SparkSubmit", "window_job.py --serve"])
