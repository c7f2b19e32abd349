"""Bookkeeping of the processes a run starts, so nothing outlives it.

Every process the testbed starts is recorded (pid, start time, what it is)
in a state file under ``state_dir()``.  A run removes its entries as it stops
them; ``testbed clean`` ends whatever a crashed run left, by PID, and only
when the PID still belongs to the same process (same start time), so a
recycled PID is never hit.  While a state file is open, a watchdog holds
its lifeline (``testbed.emulation.lifeline``): if the process that records
in it dies, even by SIGKILL, the watchdog ends what it records at once.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from testbed.emulation.lifeline import Lifeline

#: Where runs record what they started; ``TESTBED_STATE_DIR`` overrides it.
DEFAULT_STATE_DIR = "/run/testbed"


def state_dir() -> Path:
    return Path(os.environ.get("TESTBED_STATE_DIR", DEFAULT_STATE_DIR))


_state_file: Optional[Path] = None
#: State file -> its lifeline, open while this process may record in it.
_lifelines: dict[Path, Lifeline] = {}


def _hold(state_file: Path) -> None:
    """Start ``state_file``'s lifeline: from now on, if this process dies, what the file records ends."""
    if state_file not in _lifelines:
        _lifelines[state_file] = Lifeline(state_file).start()


#: Long enough for the watchdog to end what a run could not (``terminate``'s two graces and more).
LET_GO_S = 30.0


def _let_go(state_file: Path) -> None:
    """Close ``state_file``'s lifeline; its watchdog ends what the file still records, if it still exists.

    Waits for the watchdog: once the run has ended, nothing it started runs,
    the watchdog included (a run that ended in order leaves it nothing to do).
    """
    line = _lifelines.pop(state_file, None)
    if line is not None:
        line.close()
        try:
            line.wait(LET_GO_S)
        except subprocess.TimeoutExpired:
            pass


def _start_time(pid: int) -> Optional[str]:
    """When ``pid`` started (clock ticks since boot), or ``None`` if it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


class RunDirBusy(RuntimeError):
    """Another live run writes the same run directory; ``str()`` names it."""


@contextmanager
def _state_lock() -> Iterator[None]:
    """Serialises claims, so two runs started at once cannot both take a directory."""
    state_dir().mkdir(parents=True, exist_ok=True)
    with open(state_dir() / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def begin_run(run_id: str, run_dir: Optional[Path] = None) -> Path:
    """Start recording this process's children under ``run_id``, claiming ``run_dir``
    (which also lets other commands, ``testbed switch-cli``, find the run).

    Raises ``RunDirBusy`` (before anything is written) when a live run
    already writes ``run_dir``; a crashed run's claim only asks for
    ``testbed clean``.
    """
    global _state_file
    with _state_lock():
        for other in live_runs():
            if run_dir is not None and other.get("run_dir") == str(run_dir):
                raise RunDirBusy(f"{run_dir} is the directory of run {other['run_id']} (pid {other['owner']}, "
                                 f"phase {other.get('phase', '?')}); wait for it or choose another --out")
        _state_file = state_dir() / f"{run_id}.json"
        _write({"run_id": run_id, "owner": os.getpid(), "owner_start": _start_time(os.getpid()),
                "started": time.time(), "run_dir": None if run_dir is None else str(run_dir),
                "phase": "starting", "pids": {}, "paths": [], "interfaces": []})
        _hold(_state_file)
    return _state_file


def set_phase(phase: str) -> None:
    """Say which phase the run is in, for ``testbed clean``, the soak and a second run's refusal."""
    if _state_file is None:
        return
    state = _read()
    state["phase"] = phase
    _write(state)


def end_run() -> list[str]:
    """Stop recording; return what is still alive of what was recorded.

    The state file is removed when nothing recorded survives.  Otherwise
    the run's watchdog, its lifeline cut here, tries once more to end what
    a failed stop left, as ``testbed clean`` would; what it cannot end stays
    recorded for ``testbed clean``.
    """
    global _state_file
    if _state_file is None:
        return []
    alive = alive_of(_read())
    if not alive:
        _state_file.unlink(missing_ok=True)
    _let_go(_state_file)
    _state_file = None
    return alive


@contextmanager
def owned_by(owner_id: str, what: str) -> Iterator[None]:
    """Record what is started or stopped inside under ``owner_id``'s own state
    file, whatever run is current, then go back to that run's.

    For a process that outlives the runs it serves (an experiment's warm
    Spark application): the runs begin and end their own state files around
    it, and ``testbed clean`` still finds it after a crash, since its file
    stays while anything it records lives (its owner is this process).
    """
    global _state_file
    saved, _state_file = _state_file, state_dir() / f"{owner_id}.json"
    state_dir().mkdir(parents=True, exist_ok=True)
    if not _state_file.exists():
        _write({"run_id": owner_id, "what": what, "owner": os.getpid(), "owner_start": _start_time(os.getpid()),
                "started": time.time(), "run_dir": None, "phase": "serving", "pids": {}, "paths": [],
                "interfaces": []})
    _hold(_state_file)
    try:
        yield
    finally:
        if not alive_of(_read()):
            _state_file.unlink(missing_ok=True)
            _let_go(_state_file)
        _state_file = saved


def alive_of(state: dict) -> list[str]:
    """``pid N (what)`` of each recorded process that is still the same process."""
    return [f"pid {pid} ({info.get('what')})" for pid, info in state["pids"].items()
            if info.get("start") is not None and _start_time(int(pid)) == info.get("start")]


def _read() -> dict:
    assert _state_file is not None
    return json.loads(_state_file.read_text())


def _write(state: dict) -> None:
    assert _state_file is not None
    tmp = _state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(_state_file)


def register_pid(pid: int, what: str) -> None:
    if _state_file is None:
        return
    state = _read()
    state["pids"][str(pid)] = {"what": what, "start": _start_time(pid)}
    _write(state)


def unregister_pid(pid: int) -> None:
    if _state_file is None:
        return
    state = _read()
    state["pids"].pop(str(pid), None)
    _write(state)


def _remember(key: str, values: list) -> None:
    """Add ``values`` to the run's state under ``key``, for ``testbed clean``."""
    if _state_file is None:
        return
    state = _read()
    state.setdefault(key, []).extend(values)
    _write(state)


def register_interfaces(names: list[str]) -> None:
    """Root-namespace interfaces (the switch's ends) to delete after a crash."""
    _remember("interfaces", list(names))


def register_namespace(name: str) -> None:
    """A named network namespace (``ip netns add``) to delete after a crash."""
    _remember("namespaces", [name])


def register_path(path: str) -> None:
    """A temporary file or folder (IPC) the run must remove."""
    _remember("paths", [str(path)])


def _stat(pid: int) -> Optional[tuple[str, int]]:
    """``(start time, process group)`` of ``pid``, or ``None`` if it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else (fields[19], int(fields[2]))


def _group_members(groups: set[int]) -> bool:
    """Whether any live process is in one of ``groups``."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] in groups:
                return True
    return False


def terminate(recorded: dict[int, Optional[str]], grace: float = 3.0) -> list[int]:
    """End every recorded ``pid -> start time`` that is still the same process,
    with its process group when it leads one.

    The switch, the host programs and Spark each lead a group of their own
    (``start_new_session``, ``mnexec -d``); what they start (Spark's JVM
    starts ``window_job.py`` and its Python workers) is in it, unrecorded.
    A group is taken only if its leader is still the recorded process when
    the ending begins: its number cannot then belong to anyone else.  All
    get SIGTERM at once and SIGKILL together after ``grace`` (a node's
    interactive shell ignores SIGTERM), so ending a big network takes
    seconds, not seconds per node.  Returns the PIDs that were ended.
    """
    alive = {pid: start for pid, start in recorded.items() if start is not None and _start_time(pid) == start}
    groups = {pid for pid in alive if (_stat(pid) or ("", 0))[1] == pid}

    def left() -> bool:
        return any(_start_time(p) == s for p, s in alive.items()) or (bool(groups) and _group_members(groups))

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        for pgid in groups:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        for pid in [pid for pid, start in alive.items() if pid not in groups and _start_time(pid) == start]:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and left():
            time.sleep(0.05)
    return sorted(alive)


def spawn(cmd: list[str], log_path: Path, what: str, host=None, **popen_args):
    """Start ``cmd`` (inside Mininet ``host`` when given), output to ``log_path``,
    and record its PID.  The log is closed here: the child keeps its own handle."""
    with open(log_path, "ab") as log:
        popen = host.popen if host is not None else subprocess.Popen
        proc = popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **popen_args)
    register_pid(proc.pid, what)
    return proc


def node_run(node, *argv: str) -> str:
    """``argv`` run to its end inside Mininet ``node``'s namespaces; its standard output.

    Mininet's ``node.cmd`` hands a string to the node's shell; this passes an
    argument list, so nothing in a name or value is ever read by a shell.
    """
    out, _err, _code = node.pexec(list(argv))
    return out


def stop(proc, grace: float = 15.0) -> None:
    """SIGTERM one child and wait for it (SIGKILL after ``grace``); forget its PID."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    unregister_pid(proc.pid)


def run_until_signalled(worker) -> None:
    """Call ``worker.run()``; SIGTERM or SIGINT set ``worker.stopping`` so it
    can finish its loop and write what it has, instead of dying mid-write."""
    def _stop(signum, frame):
        worker.stopping = True
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    worker.run()
    # Everything is written.  The stopper may signal again while the
    # interpreter shuts down, when Python has put back the default handlers:
    # that would turn a clean exit into a death by SIGTERM.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def wait_ready(proc, is_ready, what: str, timeout: float, log_path: Optional[Path] = None,
               error: type[Exception] = RuntimeError, poll_s: float = 0.05) -> None:
    """Poll ``is_ready()`` until it holds; readiness is checked, never slept.

    Raise ``error`` naming ``what`` (with the tail of ``log_path``) if the
    process exits first or ``timeout`` seconds pass.
    """
    def tail() -> str:
        return "" if log_path is None else f"; log tail:\n{log_tail(log_path)}"

    deadline = time.monotonic() + timeout
    while not is_ready():
        if proc is not None and proc.poll() is not None:
            raise error(f"{what} exited (code {proc.returncode}){tail()}")
        if time.monotonic() > deadline:
            raise error(f"{what} not ready after {timeout:.0f}s{tail()}")
        time.sleep(poll_s)


def log_tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log, for error messages about a process that failed."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_group(proc, grace: float = 5.0) -> None:
    """End a child started with ``start_new_session=True`` and its whole
    process group (SIGTERM, then SIGKILL after ``grace``); forget its PID."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
    unregister_pid(proc.pid)


def _runs() -> Iterator[dict]:
    """Every recorded run's state, with ``_file`` (its state file) and ``_live`` (its owner runs)."""
    if not state_dir().exists():
        return
    for f in sorted(state_dir().glob("*.json")):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        state["_file"] = str(f)
        state["_live"] = _start_time(state.get("owner", -1)) == state.get("owner_start")
        yield state


def live_runs() -> list[dict]:
    """State of runs whose owning ``testbed run`` process still runs."""
    return [state for state in _runs() if state["_live"]]


def stale_runs() -> list[dict]:
    """State of runs whose owning ``testbed run`` process is gone."""
    return [state for state in _runs() if not state["_live"]]


def running_runs() -> list[dict]:
    """State of runs still going, oldest first."""
    return sorted(live_runs(), key=lambda state: state.get("started", 0))
