"""Scenario sets: emulation runs of named topologies and one figure over them.

S4 Fig. 6 (``s4load``: the eight scenarios of Tables II and III) and P4SS
Fig. 5 (``p4ssexp``) draw the load per operator; ``disorder`` draws the
events dropped as too late and the windows that then differ, against the
lateness its runs allow.  Each scenario is an ordinary run
(``testbed.runs.orchestrator.Run``) in ``runs/<scenario>/`` of the
experiment directory; the figure is drawn from the runs' deliveries.
With a ``calibration``, each target's capacity is measured on this machine
first (``capacity.RatePoints``) and every scenario runs at a rate it carries.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field, field_validator

from testbed.analysis.plots import plot_experiment
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.capacity import ScenarioCalibration, calibrated, machine_capacity
from testbed.experiments.shipped import check_scenarios, plan_cost, scenario, scenario_run
from testbed.rundir import ExperimentDir, RunDir
from testbed.semantics.topology import distinct


class ScenarioParams(KindParams):
    runs: list[str] = Field(min_length=1)
    #: ``load`` (S4 Fig. 6, P4SS Fig. 5) or ``lateness`` (the disorder experiment).
    figure: Literal["load", "lateness"] = "load"
    #: None: each topology's own ``switch.target``.
    targets: Optional[list[str]] = None  # type: ignore[assignment]
    #: None: every scenario at its own rate; else at a rate this machine carries.
    calibration: Optional[ScenarioCalibration] = None

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
        capacities: dict[str, float] = {}
        for name in self.params.runs:
            path, topo = scenario(name)
            targets = self.params.targets or [topo.switch.target]
            for target in targets:
                label = name if len(targets) == 1 else f"{name}-{target}"
                entry: dict[str, Any] = {}
                if self.params.calibration is not None:
                    if target not in capacities:
                        capacities[target] = machine_capacity(self, target, self.params.calibration)
                    topo, entry = calibrated(topo, capacities[target], self.params.calibration.fraction)
                rundir = self.expdir.run(label)
                ok = scenario_run(topo, path, target, rundir, self.settings)
                runs[label] = {"ok": ok, "target": target, "run_dir": str(rundir.root.relative_to(self.expdir.root)),
                               **entry}
        out: dict[str, Any] = {"runs": runs}
        if self.params.calibration is not None:
            # The rates chosen are each run's own (rates, topology_rates, rate_scale).
            out["calibration"] = {"capacity_events_per_s": capacities, "fraction": self.params.calibration.fraction,
                                  "scenario": self.params.calibration.scenario}
        return out

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

