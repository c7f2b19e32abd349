"""A switch process outside Mininet: on interfaces that already exist, or none.

Experiments and tests that need a switch but no emulated hosts (control-plane
timing, read-back of what was installed, latency on veth pairs) start one of
these.  A target supplies the command line and the control client
(``testbed.targets.embedded.process``, ``testbed.targets.bmv2.process``);
starting, readiness, the namespace and stopping are the same for every
target and live here.  ``testbed.targets.switch_process`` picks the class.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Optional

from testbed.emulation import netns
from testbed.emulation.placement import on_cpus
from testbed.emulation.ports import free_loopback_port, port_listening
from testbed.emulation.procs import spawn, stop_group, wait_ready
from testbed.rundir import RunDir


class SwitchNotReady(RuntimeError):
    pass


def run_port_setup(inside: list[str], commands: list[list[str]], switch: str) -> None:
    """Run a switch's ``port_setup`` commands behind ``inside`` (the prefix that
    enters its namespace); raise ``SwitchNotReady`` with the first failure's stderr."""
    for setup in commands:
        done = subprocess.run(inside + setup, capture_output=True, text=True)
        if done.returncode:
            raise SwitchNotReady(f"{switch}: {' '.join(setup)} failed: {done.stderr.strip()}")


class SwitchProcess:
    """One switch process; ``start()`` returns once its control port accepts
    connections, ``stop()`` ends its process group.

    ``namespace`` holds the port interfaces; the switch runs inside it so its
    control port is reachable only over that namespace's loopback (bmv2's
    Thrift server binds every address).  ``forward`` (ingress port -> egress
    port) runs the target's plain forwarding baseline instead of the splitter.
    """

    #: Short name of the target (``model``, ``bmv2``).
    target = ""

    def __init__(self, ports: dict[int, str], run_dir: Path, name: str = "switch",
                 control_port: Optional[int] = None, namespace: Optional[netns.NamedNamespace] = None,
                 forward: Optional[dict[int, int]] = None, cep: bool = False, changes: bool = True,
                 cpus: Optional[frozenset[int]] = None):
        self.ports = dict(ports)
        #: The CPUs every thread of the process runs on (all, when None):
        #: a timed switch kept off its sender's (testbed.emulation.placement).
        self.cpus = cpus
        #: Run the build with the CEP stage (bmv2; the model always has it).
        self.cep = cep
        #: False: no stream changes mid-stream, and bmv2 runs its build
        #: without changes (the model always takes them).
        self.changes = changes
        self.rundir = RunDir(run_dir)
        self.name = name
        self.control_port = control_port or free_loopback_port()
        self.namespace = namespace
        self.forward = dict(forward) if forward else None
        self.proc: Optional[subprocess.Popen] = None
        self.console_log = self.rundir.switch_log(name)

    @classmethod
    def available(cls) -> Optional[str]:
        """``None`` when the target can run here, else the reason it cannot."""
        return None

    # -- what a target supplies -------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def api(self):
        """A new client of the contract's control API (close it when done)."""
        raise NotImplementedError

    def port_setup(self) -> list[list[str]]:
        """Commands run on the port interfaces (in the namespace) before the process starts."""
        return []

    def configure(self) -> None:
        """What the switch needs once it listens, before frames flow."""

    # -- lifecycle -----------------------------------------------------------
    @property
    def netns_path(self) -> Optional[str]:
        return self.namespace.path if self.namespace is not None else None

    def start(self, timeout: float = 30.0) -> "SwitchProcess":
        self.rundir.logs.mkdir(parents=True, exist_ok=True)
        inside = self.namespace.prefix() if self.namespace is not None else []
        run_port_setup(inside, self.port_setup(), f"{self.target} {self.name}")
        self.proc = spawn(self.launch_command(), self.console_log, f"{self.target} {self.name}",
                          start_new_session=True)
        try:
            wait_ready(self.proc, self._listening, f"{self.target} switch {self.name} "
                       f"(control port {self.control_port})", timeout, self.console_log, SwitchNotReady)
            self.configure()
        except BaseException:
            self.stop()
            raise
        return self

    def launch_command(self) -> list[str]:
        """``command()`` as started: inside the namespace, on the process's CPUs."""
        inside = self.namespace.prefix() if self.namespace is not None else []
        return inside + (on_cpus(self.cpus) if self.cpus else []) + self.command()

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
