"""What every splitter switch node shares: a process, a control port, readiness.

A target subclasses ``SplitterSwitch`` and supplies the command line of its
switch process and a control client.  Mininet calls ``start``/``stop``; the
run calls ``wait_ready`` before it installs the plan, so readiness is checked
(process alive, control port accepting connections), never assumed.

Every switch runs in a network namespace of its own.  Its ports are created
there, so two runs whose switches share a name (and so their interface
names, ``s1-eth1``...) never meet: Mininet deletes an interface of the
chosen name before it creates one, which in the root namespace would take
another run's port away.  The control port is reachable only over that
namespace's loopback.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Any, Optional

from mininet.node import Switch

from testbed.emulation import netns
from testbed.emulation.ports import free_loopback_port
from testbed.emulation.procs import node_run, register_pid, spawn, stop_group, wait_ready
from testbed.rundir import RunDir
from testbed.targets.process import SwitchNotReady, run_port_setup

__all__ = ["CPU_POLICIES", "CpuPolicy", "SplitterSwitch", "SwitchNotReady"]


@dataclass(frozen=True)
class CpuPolicy:
    """How the switch process is scheduled against the run's other processes."""

    name: str
    prefix: list[str]           # put before the switch's command line
    description: str


#: ``fifo``: the switch runs in the real-time class (SCHED_FIFO, priority 20) and
#: takes a core whenever it has frames, ahead of the sources, the receivers and
#: Spark (nice 10 by default, testbed.analysis.spark.SPARK_CPU); the kernel's real-time throttling still leaves the
#: others 5 % of every second.  ``none``: the default time-sharing class, nice 0,
#: like the sources and receivers.  Measured in experiments/cpupolicy.yaml.
CPU_POLICIES = {
    "fifo": CpuPolicy("fifo", ["chrt", "--fifo", "20"], "SCHED_FIFO, priority 20"),
    "none": CpuPolicy("none", [], "SCHED_OTHER, nice 0 (the sources' and receivers' class)"),
}


class SplitterSwitch(Switch):
    """A Mininet switch node whose data plane is one external process.

    Parameters (passed through ``net.addSwitch(..., cls=..., **params)``):
    ``run_dir`` (the run's directory: logs go to its ``logs/``), ``control_port`` (loopback TCP port; picked
    when not given), ``device_id``, ``cpu_policy`` (a key of ``CPU_POLICIES``).
    """

    #: Short name of the target, recorded in run.json.
    target = ""

    def __init__(self, name: str, run_dir: str, control_port: Optional[int] = None,
                 device_id: int = 0, cpu_policy: str = "fifo", batches: bool = False, cep: bool = False,
                 changes: bool = True, **kwargs: Any):
        # Mininet derives a datapath id from digits in the name; ours may have none.
        kwargs.setdefault("dpid", "%016x" % (device_id + 1))
        # Mininet's addSwitch passes inNamespace=False; a namespace of its own is the point (see above).
        kwargs["inNamespace"] = True
        super().__init__(name, **kwargs)
        self.rundir = RunDir(run_dir)
        self.control_port = control_port or free_loopback_port()
        self.device_id = device_id
        self.cpu_policy = CPU_POLICIES[cpu_policy]
        #: The topology sends batches: a target that builds them into a
        #: program of its own (bmv2) runs that one.
        self.batches = batches
        #: The topology has CEP rules: bmv2 runs its build with the CEP stage.
        self.cep = cep
        #: Some stream may change mid-stream (a scheduled change, failover,
        #: elastic N): else bmv2 runs its build without changes.
        self.changes = changes
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = self.rundir.switch_log(name)

    # -- what a target supplies -----------------------------------------
    def command(self) -> list[str]:
        """Command line of the switch process; ``self.port_map()`` gives ports."""
        raise NotImplementedError

    def control_api(self):
        """A client of the contract's control API (``testbed.dataplane.contract.SwitchAPI``)."""
        raise NotImplementedError

    @classmethod
    def available(cls) -> Optional[str]:
        """``None`` when the target can run here, else the reason it cannot."""
        return None

    def versions(self) -> dict[str, str]:
        return {}

    def attach_info(self) -> dict[str, Any]:
        """What another process needs to reach this switch (``testbed switch-cli``):
        the run writes it to ``switch.json`` once the switch is ready."""
        own = self.inNamespace
        return {"target": self.target, "name": self.name, "control_port": self.control_port,
                "pid": self.pid if own else None, "netns": self.netns_path if own else None}

    @classmethod
    def attach(cls, info: dict[str, Any]) -> int:
        """Run the target's runtime CLI on the switch ``info`` (``attach_info``)
        describes, commands from standard input; return its exit code."""
        raise NotImplementedError

    # -- lifecycle ------------------------------------------------------
    def port_map(self) -> dict[int, str]:
        """Switch port number -> interface name, as Mininet numbered them."""
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def control_listening(self) -> bool:
        """Whether the control port accepts connections, seen from the switch's namespace."""
        return netns.listening(self.netns_path, self.control_port)

    def startShell(self, mnopts=None) -> None:
        """Mininet's node shell, recorded at once so ``testbed clean`` finds it after any crash."""
        super().startShell(mnopts)
        register_pid(self.pid, f"mininet switch {self.name}")

    @property
    def netns_path(self) -> str:
        return f"/proc/{self.pid}/ns/net"

    def port_setup(self) -> list[list[str]]:
        """Commands run on the port interfaces (in the node's namespace) before the process starts."""
        return []

    def start(self, controllers) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        node_run(self, "ip", "link", "set", "lo", "up")    # the control port's only way in
        inside = ["mnexec", "-a", str(self.pid)]      # into the node's namespaces
        run_port_setup(inside, self.port_setup(), f"{self.target} switch {self.name}")
        cmd = inside + self.cpu_policy.prefix + cmd
        self.proc = spawn(cmd, self.log_path, f"{self.target} switch {self.name}", start_new_session=True)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Return once the process is alive and its control port accepts
        connections; raise ``SwitchNotReady`` with the log's tail otherwise."""
        if self.proc is None:
            raise SwitchNotReady(f"{self.target} switch {self.name} was not started")
        wait_ready(self.proc, self.control_listening,
                   f"{self.target} switch {self.name} (control port {self.control_port})",
                   timeout, self.log_path, SwitchNotReady)

    def stop(self, deleteIntfs: bool = True) -> None:
        stop_group(self.proc)
        super().stop(deleteIntfs)
