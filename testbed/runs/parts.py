"""The parts a run is put together from, and what the run asks of each.

``Run`` drives phases; it does not know how a network is built, which
switch runs the plan, how the operators' Spark application starts or how a
run is judged.  The layer that composes a run (``testbed.experiments.launch``
for the CLI, the API and the experiments) hands those in as factories, and
tests hand in fakes, so that the phases can be tested without root, Mininet,
a switch or Spark.  The protocols below are the whole of what the run uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from testbed.rundir import RunDir, RunRecord
from testbed.semantics.topology import Topology


class PartFailed(RuntimeError):
    """A part the run can go on without (the Spark application) failed."""


class Process(Protocol):
    """What the run watches of a process: ``subprocess.Popen``'s poll and signals."""

    returncode: Optional[int]

    def poll(self) -> Optional[int]: ...

    def send_signal(self, sig: int) -> None: ...


class Switch(Protocol):
    """The splitter as the run sees it: a process, a control API, what to record."""

    name: str
    proc: Process
    cpu_policy: Any             # how its process is scheduled: ``.name`` and ``.description``

    def control_api(self) -> Any: ...

    def attach_info(self) -> dict[str, Any]: ...

    def versions(self) -> dict[str, str]: ...

    def port_map(self) -> dict[int, str]: ...


class Network(Protocol):
    """The emulated network: hosts around the switch, with links that can fail."""

    switch: Switch
    link_modes: dict[str, str]

    def build(self) -> Any: ...

    def start(self) -> Any: ...

    def stop(self) -> None: ...

    def host(self, name: str) -> Any: ...

    def intf_of(self, host: str) -> str: ...

    def link_down(self, host: str) -> None: ...

    def link_up(self, host: str) -> None: ...

    def path_counters(self) -> dict[str, Any]: ...


class Spark(Protocol):
    """The operators' windowed computation, one application for the run."""

    cpu_policy: Any             # how its process is scheduled: ``.name`` and ``.description``

    def start(self) -> None: ...

    def wait_ready(self) -> None: ...

    def finish(self, record: RunRecord) -> dict[str, Any]: ...

    def stop(self) -> None: ...


@dataclass
class RunParts:
    """Factories of a run's parts, and how the run is judged.

    ``network(topology, rundir)`` builds the network with its switch;
    ``spark(topology, run_id, rundir)`` the Spark application, or ``None``
    for a run without one; ``conclude(rundir, record)`` checks the finished
    run, writes its verdicts and figures, and says whether it passed;
    ``missing()`` says why these parts cannot run on this machine, before
    anything starts, as the one line the user reads (``None`` when they can).
    """

    network: Callable[[Topology, RunDir], Network]
    conclude: Callable[[RunDir, RunRecord], bool]
    spark: Optional[Callable[[Topology, str, RunDir], Spark]] = None
    missing: Callable[[], Optional[str]] = lambda: None
