"""The shipped scenarios (``topologies/``): found by name, checked, costed, and run once.

Every kind that runs emulation runs of named topologies (scenario sets, the
rate sweep, adaptation, the bench) goes through ``scenario_run``, so a run
of an experiment is an ordinary run (``testbed.runs.orchestrator.Run``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from testbed.experiments.base import Settings
from testbed.rundir import RunDir
from testbed.rundir.names import UnsafeName, path_name
from testbed.semantics.plan import SplitterPlan, load_planned
from testbed.semantics.topology import Topology, TopologyError, resolve_topology


def scenario(name: str) -> tuple[Path, Topology]:
    path = resolve_topology(name)
    return path, load_planned(path)[0]     # the plan must fit the switch too


def plan_cost(topo: Topology) -> dict[str, int]:
    """What installing ``topo``'s plan takes (``SplitterPlan.cost``)."""
    return SplitterPlan(topo).cost()


def check_scenarios(names: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the first scenario that is not a usable topology."""
    for i, name in enumerate(names):
        try:
            path_name(name, "scenario")      # it names the experiment's run folders too
            scenario(name)
        except (TopologyError, UnsafeName) as err:
            raise ValueError(f"[{i}]: {err}") from None


def scenario_run(topo: Topology, path: Path, target: str, rundir: RunDir, settings: Settings,
                 timeout: Optional[float] = None) -> bool:
    """One emulation run of ``topo`` on ``target`` into ``rundir``; ``True`` when its checks pass.

    ``settings.switch_name`` renames the Mininet switch, so that runs on a
    shared machine never meet another's interfaces.
    """
    from testbed.experiments.launch import launch
    from testbed.runs.orchestrator import RunOptions

    if settings.switch_name:
        topo = topo.with_switch_name(settings.switch_name)
    options = RunOptions(target=target, out=rundir.root, spark=settings.spark,
                         spark_master=settings.spark_master, timeout=timeout, switch_cpu=settings.switch_cpu)
    settings.console.print(f"== {topo.name} on {target}")
    return launch(topo, path, options, settings.console, settings.spark_service)
