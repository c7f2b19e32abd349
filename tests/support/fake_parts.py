"""Fake parts for ``Run``: the phases without root, Mininet, a switch process or Spark.

``fake_parts()`` builds ``RunParts`` whose network starts its host programs
as ``support.fake_hosts`` (real processes, recorded and stopped as the real
ones are), whose switch is the pipeline model in this process, and whose
conclusion is the real analysis.  The switch's counters are the model's
after it has seen what the sources sent, so the check judges a run the way
it judges an emulated one.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

import pandas as pd
from rich.console import Console

from support.switched import through_model
from testbed.analysis.conclude import RunAnalysis
from testbed.dataplane.model import SplitterPipeline
from testbed.rundir import RunDir
from testbed.runs.parts import PartFailed, RunParts
from testbed.semantics.topology import Topology

TESTS = Path(__file__).resolve().parent.parent


class Alive:
    """The switch's process as the run watches it: alive until told otherwise."""

    returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.returncode = -sig


class FakeHost:
    """A host whose programs run as ``support.fake_hosts`` in this machine's namespace."""

    def __init__(self, name: str, network: "FakeNetwork"):
        self.name = name
        self.network = network

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen:
        role = "source" if "testbed.emulation.source" in cmd else "receiver"
        self.network.started.append((role, self.name))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(TESTS.parent)]))
        kwargs.update(cwd=TESTS, env=env)
        return subprocess.Popen([sys.executable, "-m", "support.fake_hosts", role, *cmd[3:]], **kwargs)


class ModelSwitch:
    """The pipeline model as the switch; before its counters are read it sees
    every event the sources wrote down as sent."""

    name = "s1"
    cpu_policy = SimpleNamespace(name="none", description="the test process's own")

    def __init__(self, topo: Topology, rundir: RunDir):
        self.topo, self.rundir = topo, rundir
        self.proc = Alive()
        self.model = SplitterPipeline()
        self.fed = False

    def control_api(self) -> "ModelSwitch":
        return self

    def __getattr__(self, name: str) -> Any:       # table_add, mc_mgrp_create, ... of the model
        return getattr(self.model, name)

    def counter_read(self, name: str, index: int):
        if not self.fed:
            self.fed = True
            sent = [pd.read_parquet(p) for h in self.topo.source_hosts()
                    if (p := self.rundir.source_events(h)).exists()]
            if sent:
                through_model(self.topo, pd.concat(sent), model=self.model)
        return self.model.counter_read(name, index)

    def attach_info(self) -> dict[str, Any]:
        return {"target": "fake", "name": self.name}

    def versions(self) -> dict[str, str]:
        return {"fake": "pipeline model in the test process"}

    def port_map(self) -> dict[int, str]:
        return {}


class FakeNetwork:
    """Hosts without namespaces around the model switch; links fail on paper only."""

    def __init__(self, topo: Topology, rundir: RunDir):
        self.topo = topo
        self.switch = ModelSwitch(topo, rundir)
        self.link_modes: dict[str, str] = {}
        self.started: list[tuple[str, str]] = []
        self.events: list[str] = []
        self.hosts = {name: FakeHost(name, self) for name in topo.hosts}

    def build(self) -> "FakeNetwork":
        self.events.append("build")
        return self

    def start(self) -> "FakeNetwork":
        self.events.append("start")
        return self

    def stop(self) -> None:
        self.events.append("stop")

    def host(self, name: str) -> FakeHost:
        return self.hosts[name]

    def intf_of(self, host: str) -> str:
        return f"{host}-eth0"

    def link_down(self, host: str) -> None:
        self.events.append(f"down {host}")

    def link_up(self, host: str) -> None:
        self.events.append(f"up {host}")

    def path_counters(self) -> dict[str, Any]:
        """No kernel in between: nothing dropped anywhere."""
        return {"hosts": {name: {} for name in self.topo.hosts},
                "switch_ports": {str(port): {} for port in self.topo.switch_ports().values()}, "switch_sockets": {}}


class FailingSpark:
    """A Spark application that fails to start."""

    cpu_policy = None

    def start(self) -> None:
        raise PartFailed("no Spark here (a fake that fails)")

    def wait_ready(self) -> None: ...

    def finish(self, record) -> dict:
        raise AssertionError("a failed application is never finished")

    def stop(self) -> None: ...


def fake_parts(console: Console, spark: Optional[Callable] = None) -> tuple[RunParts, list[FakeNetwork]]:
    """Parts over fakes, and the list the networks they build are appended to."""
    networks: list[FakeNetwork] = []

    def network(topo: Topology, rundir: RunDir) -> FakeNetwork:
        networks.append(FakeNetwork(topo, rundir))
        return networks[-1]

    analysis = RunAnalysis(console, spark=spark is not None)
    return RunParts(network=network, conclude=analysis.conclude, spark=spark), networks

