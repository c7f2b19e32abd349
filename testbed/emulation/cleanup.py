"""``testbed clean``: remove what a crashed or killed run left behind.

Only what the run recorded is touched: its processes, by PID and start time
(never by name), the switch-side interfaces of its network, the namespaces
of switches started outside Mininet, and its temporary files.  Killing a Mininet host's shell removes its network
namespace and with it the host end of each veth pair.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testbed.emulation import procs


def clean_stale() -> list[str]:
    lines = []
    for state in procs.stale_runs():
        run_id = state.get("run_id", "?")
        for pid_text, info in state.get("pids", {}).items():
            if procs.terminate(int(pid_text), info.get("start")):
                lines.append(f"{run_id}: ended pid {pid_text} ({info.get('what')})")
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
        Path(state["_file"]).unlink(missing_ok=True)
    if not lines:
        lines.append("nothing to clean")
    return lines
