"""Running ``testbed`` as a user would, and checking what it leaves behind.

Every run a test starts carries a tag of its own in ``TESTBED_TAG``, which
all its processes inherit (``testbed.emulation.footprint``), so a test finds
exactly its own leftovers on a machine where others run too.  The state
directory is the test's own (``tests/conftest.py``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Optional

from support import topologies
from testbed import ROOT
from testbed.emulation.footprint import TAG_ENV, tagged_processes

TESTS = Path(__file__).resolve().parents[1]


def new_tag() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def env_for(tag: str) -> dict[str, str]:
    # The tests folder on the path lets a run be started through support.interrupt_at.
    return dict(os.environ, **{TAG_ENV: tag}, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))


def run_cli(*args: str, tag: Optional[str] = None, **kw) -> subprocess.CompletedProcess:
    env = kw.pop("env", None) or env_for(tag or new_tag())
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, env=env, **kw)


def finished_run(path: Path, out: Path, target: str, *options: str) -> dict:
    """``testbed run`` of ``path`` on ``target`` without Spark, into ``out``: it must
    succeed and leave nothing behind; its facts and verdicts, merged (``records.written``)."""
    from support.records import written
    from testbed.rundir import RunDir

    tag = new_tag()
    res = run_cli("run", str(path), "--out", str(out), "--no-spark", "--target", target, *options, tag=tag)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    nothing_left(tag)
    return written(RunDir(out))


def start_run(*args: str, tag: str, interrupt: Optional[tuple[str, str]] = None) -> subprocess.Popen:
    """``testbed run ARGS`` in the background; with ``interrupt=(phase, signal)`` it
    sends itself that signal when it enters the phase (``support.interrupt_at``)."""
    entry = ["-m", "support.interrupt_at", *interrupt] if interrupt else ["-m", "testbed.cli"]
    return subprocess.Popen([sys.executable, *entry, "run", *args], cwd=ROOT, env=env_for(tag),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def small_topology(tmp_path, switch, window, n_ops=3, events=300, rate=1500, extra_streams=(), query=None):
    operators = [f"op{i}" for i in range(1, n_ops + 1)]
    extra = {"query": {"kind": query}} if query else {}
    streams = [topologies.stream(5, window, operators, source="src", events=events, rate=rate,
                                 timestamps={"start": 0, "step": 1}, **extra), *extra_streams]
    data = topologies.topology_data(streams, ["src"] + operators, name="t" + switch, switch=switch)
    return topologies.write(tmp_path / "topo.yaml", data)


def kill_watchdogs(tag: str) -> None:
    """SIGKILL the watchdogs of the run tagged ``tag``: a crash that takes them along
    (the OOM killer, ``kill -9`` of everything) leaves only ``testbed clean``."""
    watchdogs = [p for p in tagged_processes(tag) if "testbed.emulation.watchdog" in " ".join(p.cmdline())]
    assert watchdogs, "the run started no watchdog"
    for watchdog in watchdogs:
        watchdog.kill()


def state_files() -> list[Path]:
    folder = Path(os.environ["TESTBED_STATE_DIR"])      # set per test by conftest.state_dir
    return sorted(folder.glob("*.json")) if folder.exists() else []


def recorded_pid(what: str) -> Optional[int]:
    """PID of the first recorded process whose description starts with ``what``."""
    for path in state_files():
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for pid, info in state.get("pids", {}).items():
            if info.get("what", "").startswith(what):
                return int(pid)
    return None


def wait_for(condition: Callable[[], object], timeout: float, what: str):
    """Poll ``condition`` until it returns something true; fail the test naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def nothing_left(tag: str) -> None:
    """No process of the run is alive, no state is left, and ``testbed clean`` finds nothing to do."""
    assert [p.pid for p in tagged_processes(tag)] == []
    assert state_files() == []
    res = run_cli("clean")
    assert res.returncode == 0 and res.stdout.strip() == "nothing to clean", res.stdout
