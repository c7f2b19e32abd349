"""Scenario sets: emulation runs of named topologies and one figure over them.

S4 Fig. 6 (``s4load``: the eight scenarios of Tables II and III) and P4SS
Fig. 5 (``p4ssexp``) draw the load per operator; ``disorder`` draws the
events dropped as too late and the windows that then differ, against the
lateness its runs allow.  Each scenario is an ordinary run
(``testbed.runs.orchestrator.Run``) in ``runs/<scenario>/`` of the
experiment directory; the figure is drawn from the runs' deliveries.
``scenario_run`` is also how the rate sweep runs its points.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import Field, field_validator

from testbed.analysis.plots import plot_experiment
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams, Settings
from testbed.rundir import ExperimentDir, RunDir
from testbed.semantics.plan import SplitterPlan, load_planned
from testbed.semantics.topology import Topology, TopologyError, distinct, resolve_topology


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
            scenario(name)
        except TopologyError as err:
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
        topo = topo.model_copy(update={"switch": topo.switch.model_copy(update={"name": settings.switch_name})})
    options = RunOptions(target=target, out=rundir.root, spark=settings.spark,
                         spark_master=settings.spark_master, timeout=timeout, switch_cpu=settings.switch_cpu)
    settings.console.print(f"== {topo.name} on {target}")
    return launch(topo, path, options, settings.console)


class ScenarioParams(KindParams):
    runs: list[str] = Field(min_length=1)
    #: ``load`` (S4 Fig. 6, P4SS Fig. 5) or ``lateness`` (the disorder experiment).
    figure: Literal["load", "lateness"] = "load"
    #: None: each topology's own ``switch.target``.
    targets: Optional[list[str]] = None  # type: ignore[assignment]

    @field_validator("runs")
    @classmethod
    def _loadable(cls, runs: list[str]) -> list[str]:
        # Each run gets the folder runs/<scenario>/: a scenario listed twice would overwrite itself.
        distinct(runs, "scenarios")
        check_scenarios(runs)
        return runs


class ScenarioRuns(ExperimentKind):
    """Every scenario once per target, and the load per operator of each."""

    Params = ScenarioParams
    paper = {"s4_fig6": paper.S4_FIG_6, "p4ss_fig5": paper.P4SS_FIG_5}

    def measure(self) -> dict[str, Any]:
        runs: dict[str, Any] = {}
        for name in self.params.runs:
            path, topo = scenario(name)
            targets = self.params.targets or [topo.switch.target]
            for target in targets:
                label = name if len(targets) == 1 else f"{name}-{target}"
                rundir = self.expdir.run(label)
                ok = scenario_run(topo, path, target, rundir, self.settings)
                runs[label] = {"ok": ok, "target": target, "run_dir": str(rundir.root.relative_to(self.expdir.root))}
        return {"runs": runs}

    def ok(self, ours: dict[str, Any]) -> bool:
        return all(r["ok"] for r in ours["runs"].values())

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        return {name: plan_cost(scenario(name)[1]) for name in params.runs}

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        runs = {label: RunDir(expdir.root / r["run_dir"]) for label, r in record["ours"]["runs"].items()}
        runs = {label: rundir for label, rundir in runs.items() if rundir.is_run()}
        figure = record["params"].get("figure", "load")
        return [plot_experiment(figure, record["experiment"]["description"], runs, expdir.figure(figure))]
