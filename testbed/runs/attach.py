"""``testbed switch-cli``: the runtime CLI of a running run's switch.

A run records itself in the state directory (``procs.running_runs``, with
its run directory) and, once its switch is ready, writes ``switch.json``
(target, control port, namespace) into the run directory.  That is all
another process needs: the target's ``attach`` opens its CLI, bmv2's own
``simple_switch_CLI`` inside the switch's namespace or the embedded
target's ``RuntimeCLI`` over loopback.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from testbed.emulation import procs
from testbed.rundir import RunDir, read_json
from testbed.targets import switch_class


class AttachError(Exception):
    """No running switch to attach to; ``str()`` says why."""


def running_switch(run_dir: Optional[Path] = None) -> tuple[RunDir, dict[str, Any]]:
    """The run directory and ``switch.json`` of ``run_dir``, or of the newest
    running run; ``AttachError`` when that run is not running or has no switch yet."""
    runs = [state for state in procs.running_runs() if state.get("run_dir")]
    if run_dir is None:
        if not runs:
            raise AttachError(f"no run is running (none recorded in {procs.state_dir()})")
        rundir = RunDir(Path(runs[-1]["run_dir"]))
    else:
        rundir = RunDir(run_dir)
        if not any(RunDir(Path(state["run_dir"])) == rundir for state in runs):
            raise AttachError(f"{run_dir}: not a running run (its switch stops when the run ends)")
    info = read_json(rundir.switch_info)
    if not info:
        raise AttachError(f"{rundir.root}: the run's switch is not up yet")
    return rundir, info


def attach(run_dir: Optional[Path] = None) -> int:
    """Open the runtime CLI of the run's switch (commands from standard input)."""
    _rundir, info = running_switch(run_dir)
    return switch_class(info["target"]).attach(info)
