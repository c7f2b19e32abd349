"""``testbed clean``: remove what a crashed or killed run left behind.

Only what the run recorded is touched: its processes, by PID and start time
(never by name), the interfaces and namespaces it recorded (veth rigs and
switches started outside Mininet), and its temporary files.  Every node of
a run's Mininet network, the switch included, lives in a network namespace
of its own, held by the node's shell and the processes started in it;
ending them removes the namespace and with it every interface in it.

A run whose process dies is cleaned the same way at once by its watchdog
(``testbed.emulation.lifeline``), one state file at a time (``clean_file``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from testbed.emulation import procs


def clean_stale() -> list[str]:
    lines = []
    for state in procs.stale_runs():
        lines += clean_state(state)
    if not lines:
        lines.append("nothing to clean")
    return lines


def clean_file(state_file: Path) -> tuple[Optional[dict], list[str]]:
    """``clean_state`` of the state in ``state_file`` (a run's lifeline broke): the state and
    what was done, or ``None`` and nothing when the run removed its file (it ended in order)."""
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None, []
    state["_file"] = str(state_file)
    return state, clean_state(state)


def clean_state(state: dict) -> list[str]:
    """End what one run's state records, and remove its state file unless something
    recorded survived; a line per thing done."""
    lines = []
    run_id = state.get("run_id", "?")
    pids = state.get("pids", {})
    for pid in procs.terminate({int(pid): info.get("start") for pid, info in pids.items()}):
        lines.append(f"{run_id}: ended pid {pid} ({pids[str(pid)].get('what')})")
    for intf in state.get("interfaces", []):
        if Path(f"/sys/class/net/{intf}").exists():
            subprocess.run(["ip", "link", "del", intf], capture_output=True)
            lines.append(f"{run_id}: removed interface {intf}")
    for name in state.get("namespaces", []):
        if Path(f"/run/netns/{name}").exists():
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            lines.append(f"{run_id}: removed namespace {name}")
    for path in state.get("paths", []):
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()
        lines.append(f"{run_id}: removed {path}")
    survivors = procs.alive_of(state)
    if survivors:
        # kept, so that a later `testbed clean` can try again
        lines.append(f"{run_id}: could not end {', '.join(survivors)}")
    else:
        Path(state["_file"]).unlink(missing_ok=True)
    return lines
