"""The lifeline (testbed.emulation.lifeline): what a process recorded ends when it dies.

An owner process (``support.lifeline_owner``) records a group leader with
an unrecorded child and a plain child, then is killed with SIGKILL, its
whole process group with it.  Its watchdog must end all three and remove
the state file; an owner that ends in order leaves its watchdog nothing
to do.  No root needed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import ROOT
from testbed.emulation import procs
from testbed.emulation.lifeline import Lifeline

TESTS = Path(__file__).resolve().parents[1]
#: The watchdog starts a Python interpreter and ends SIGTERM-ignoring processes after a grace of 3 s.
WITHIN_S = 10.0


def alive(pid: int) -> bool:
    return procs._start_time(pid) is not None


def gone_within(pids, seconds: float = WITHIN_S) -> list[int]:
    """``pids`` still alive after waiting up to ``seconds`` for them to go."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def start_owner(mode: str) -> tuple[subprocess.Popen, dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(TESTS)]))
    owner = subprocess.Popen([sys.executable, "-m", "support.lifeline_owner", mode], cwd=ROOT, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    return owner, json.loads(owner.stdout.readline())


def watchdogs_of(state_file: Path) -> list[int]:
    """Live watchdogs whose lifeline is ``state_file``'s."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                argv = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"testbed.emulation.watchdog" in argv and str(state_file).encode() in argv:
                found.append(int(entry.name))
    return [p for p in found if alive(p)]


@pytest.mark.parametrize("mode, state", [("run", "owner-run"), ("service", "owner-service")])
def test_what_a_process_recorded_ends_when_it_is_killed(mode, state):
    owner, pids = start_owner(mode)
    state_file = (procs.state_dir() / f"{state}.json").resolve()
    try:
        assert all(alive(p) for p in pids.values()) and state_file.exists()
        assert len(watchdogs_of(state_file)) == 1
        os.killpg(owner.pid, signal.SIGKILL)        # the owner and its own group: not its watchdog
        owner.wait()
        left = gone_within(pids.values())           # the leader's unrecorded child too
        assert left == [], {role: pid for role, pid in pids.items() if pid in left}
        assert gone_within(watchdogs_of(state_file)) == []
        assert not state_file.exists()
    finally:
        for pid in pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_owner_that_ends_in_order_leaves_its_watchdog_nothing_to_do(tmp_path):
    procs.begin_run("in-order")
    state_file = procs.state_dir() / "in-order.json"
    line = procs._lifelines[state_file]
    keep = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        # recorded, then stopped by the run itself: its entry goes, and so does the state file
        procs.register_pid(keep.pid, "stopped in order")
        procs.stop_group(keep, grace=2)
        assert procs.end_run() == [] and not state_file.exists()
        # gone by the time end_run returns: a finished run leaves no process, its watchdog included
        assert line.watchdog.poll() == 0
        assert state_file not in procs._lifelines
    finally:
        keep.kill()


def test_a_run_that_could_not_stop_something_leaves_it_to_its_watchdog():
    """``end_run`` keeps the state file of a process that survived its stop, and
    cuts the lifeline: the watchdog tries again at once, ``testbed clean``'s way."""
    procs.begin_run("left")
    state_file = procs.state_dir() / "left.json"
    line = procs._lifelines[state_file]
    left = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        procs.register_pid(left.pid, "not stopped")
        assert procs.end_run() == [f"pid {left.pid} (not stopped)"]
        assert line.watchdog.poll() == 0
        assert left.wait(timeout=WITHIN_S) == -signal.SIGTERM
        assert not state_file.exists()
    finally:
        left.kill()


def test_the_lifeline_is_held_only_by_its_owner():
    """A child the owner starts, even one keeping its inheritable descriptors,
    does not get the write end: otherwise the line would outlive its owner."""
    line = Lifeline(procs.state_dir() / "nothing.json").start()
    child = subprocess.Popen(["sleep", "300"], close_fds=False)
    try:
        held = {os.readlink(f"/proc/{child.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{child.pid}/fd")}
        assert os.readlink(f"/proc/self/fd/{line.fd}") not in held
        line.close()
        assert line.wait(WITHIN_S) == 0           # its state file never existed: nothing to do
        assert child.poll() is None               # and nothing of the owner's was touched
    finally:
        child.kill()
        child.wait()


def test_a_recycled_pid_and_its_group_are_never_hit():
    """A recorded PID whose start time is not the recorded one is another process:
    neither it nor its group is signalled."""
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        assert procs.terminate({other.pid: "1"}, grace=0.2) == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
