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
import time

import psutil
import pytest

from support.runs import new_tag, nothing_left, small_topology, start_run, wait_for
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


def held_namespaces(namespaces: set[str]) -> set[str]:
    """Those of ``namespaces`` some live process on the machine is still in."""
    return net_namespaces(int(e.name) for e in os.scandir("/proc") if e.name.isdigit()) & namespaces


def ours(name: str) -> bool:
    """An interface or named namespace this test's runs could have made in the root namespace."""
    return name.startswith((SWITCH, "tbq", *OPERATORS, "src"))


def stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


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
    before = Footprint.take()
    args = [str(topo), "--out", str(out), "--target", target,
            *(["--spark-master", "local[1]"] if spark else ["--no-spark"])]
    proc = start_run(*args, tag=tag, interrupt=None if phase == "mid-stream" else (phase, "SIGSTOP"))
    try:
        if phase == "mid-stream":
            parts = lambda: all(read_json(RunDir(out).receiver_status(op)).get("parts") for op in OPERATORS)  # noqa: E731
            wait_for(lambda: parts() or proc.poll() is not None, 300, "every receiver's first part")
        else:
            wait_for(lambda: stopped(proc.pid) or proc.poll() is not None, 300, f"the run to enter {phase!r}")
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        started = [p for p in tagged_processes(tag) if p.pid != proc.pid]
        names = " ".join(" ".join(p.cmdline()) for p in started)
        expected = ["mininet:src", f"mininet:{SWITCH}", "testbed.emulation.lifeline",
                    "testbed.emulation.receiver" if phase in ("stream", "mid-stream") else "",
                    "org.apache.spark.deploy.SparkSubmit" if spark else ""]
        assert all(part in names for part in expected), names
        namespaces = net_namespaces(p.pid for p in started)
        assert len(namespaces) >= 1 + len(OPERATORS)           # the switch's and every host's
        os.killpg(proc.pid, signal.SIGKILL)                     # the run and anything of its own group
        killed = time.monotonic()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = killed + BUDGET_S
    while time.monotonic() < deadline and (tagged_processes(tag) or held_namespaces(namespaces)):
        time.sleep(0.1)
    took = time.monotonic() - killed
    left = [f"{p.pid} {' '.join(p.cmdline())[:100]}" for p in tagged_processes(tag)]
    assert left == [] and held_namespaces(namespaces) == set(), f"after {took:.1f}s: {left}"
    after = Footprint.take()
    assert [n for n in after.interfaces - before.interfaces if ours(n)] == []
    assert [n for n in after.namespaces - before.namespaces if ours(n)] == []
    # It was the watchdog, and it says what it ended.  (Mininet's host shells may
    # go by themselves: their terminal's other end closes with the run.)
    log = (RunDir(out).logs / "lifeline.log").read_text()
    assert f"({target} switch {SWITCH})" in log, log
    print(f"{what} ({target}): nothing left {took:.1f}s after SIGKILL")
    nothing_left(tag)
