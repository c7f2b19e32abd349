"""A switch process outside Mininet, on interfaces that already exist.

For tests and benchmarks, which run a switch on veth pairs: ``start()``
returns once the process is alive and its control port listens, ``stop()``
ends it.  Each target supplies the command line and the control client
(``Bmv2Process``, ``EmbeddedProcess``).  With a ``namespace`` (holding the
port interfaces) the switch runs in it, and its control port is reachable
only there, over loopback, as in a run.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Optional

from testbed.emulation import netns
from testbed.emulation.ports import free_loopback_port, port_listening
from testbed.emulation.procs import spawn, stop_group, wait_ready
from testbed.runs.rundir import RunDir
from testbed.targets.base import SwitchNotReady


class SwitchProcess:
    """One switch process; ``ports`` maps port numbers to interface names."""

    #: What the process is, for messages and the run's process records.
    what = "switch"

    def __init__(self, ports: dict[int, str], run_dir: Path, name: str, control_port: Optional[int] = None,
                 namespace: Optional[netns.NamedNamespace] = None):
        self.namespace = namespace
        self.ports = dict(ports)
        self.rundir = RunDir(run_dir)
        self.name = name
        self.control_port = control_port or free_loopback_port()
        self.proc: Optional[subprocess.Popen] = None
        self.console_log = self.rundir.switch_log(name)

    def command(self) -> list[str]:
        raise NotImplementedError

    def api(self):
        """A control client (``testbed.dataplane.contract.SwitchAPI``)."""
        raise NotImplementedError

    @property
    def netns_path(self) -> Optional[str]:
        return self.namespace.path if self.namespace is not None else None

    def start(self, timeout: float = 30.0) -> "SwitchProcess":
        self.rundir.logs.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        if self.namespace is not None:
            cmd = self.namespace.prefix() + cmd
        self.proc = spawn(cmd, self.console_log, f"{self.what} {self.name}", start_new_session=True)
        try:
            wait_ready(self.proc, self._listening, f"{self.what} (control port {self.control_port})",
                       timeout, self.console_log, SwitchNotReady)
        except SwitchNotReady:
            self.stop()
            raise
        return self

    def _listening(self) -> bool:
        if self.namespace is not None:
            return netns.listening(self.namespace.path, self.control_port)
        return port_listening(self.control_port)

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> "SwitchProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
