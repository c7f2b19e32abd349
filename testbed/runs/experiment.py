"""Experiments: a set of scenario runs and the figure that compares them.

An experiment file (``experiments/<name>.yaml``) names the scenarios to run
and the figure to draw.  Each run gets its usual run directory under
``results/<experiment>/<id>/runs/<scenario>/`` (``ExperimentDir``);
``experiment.json`` lists them with their check results, and the figure is
drawn from their raw data (``testbed.analysis.plots.plot_experiment``).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from testbed import ROOT
from testbed.analysis.plots import plot_experiment
from testbed.runs.rundir import ExperimentDir
from testbed.semantics.plan import load_planned
from testbed.semantics.topology import (
    NAME_PATTERN,
    TopologyError,
    describe,
    distinct,
    load_topology,
    read_yaml,
    resolve_topology,
)


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    figure: Literal["load", "amplification"] = "load"
    runs: list[str] = Field(min_length=1)

    @field_validator("runs")
    @classmethod
    def _distinct(cls, runs: list[str]) -> list[str]:
        # Each run gets the folder runs/<scenario>/: a scenario listed twice would overwrite itself.
        return distinct(runs, "scenarios")


def experiment_path(name: str) -> Path | None:
    p = Path(name)
    if p.suffix == ".yaml" and p.exists() and p.parent.name == "experiments":
        return p
    cand = ROOT / "experiments" / f"{name}.yaml"
    return cand if cand.exists() else None


def load_experiment(path: Path) -> Experiment:
    """Read and validate an experiment file and every scenario it names; failures are one-line ``TopologyError``s."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise TopologyError(f"{path}: (top level): expected a mapping, got {type(data).__name__}")
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as err:
        raise TopologyError(f"{path}: {describe(err)}") from None
    for i, name in enumerate(exp.runs):
        try:
            load_planned(resolve_topology(name))
        except TopologyError as err:
            raise TopologyError(f"{path}: runs[{i}]: {err}") from None
    return exp


def run_experiment(exp: Experiment, make_run, out: Path | None = None) -> tuple[bool, Path]:
    """Run every scenario with ``make_run(topology, path, run_dir) -> ok``; draw the figure.

    ``experiment.json`` is rewritten after every run, so an interrupted
    experiment still says which runs it finished.
    """
    expdir = ExperimentDir(out or ROOT / "results" / exp.name / time.strftime("%Y%m%d-%H%M%S"))
    runs, summary = {}, {}
    for name in exp.runs:
        path = resolve_topology(name)
        rundir = expdir.run(name)
        ok = make_run(load_topology(path), path, rundir.root)
        runs[name], summary[name] = rundir, {"ok": ok, "run_dir": str(rundir.root)}
        expdir.write_record({"experiment": exp.model_dump(), "runs": summary})
    figure = plot_experiment(exp.figure, exp.description, runs, expdir.figure(exp.figure))
    ok = all(r["ok"] for r in summary.values())
    expdir.write_record({"experiment": exp.model_dump(), "runs": summary, "figure": str(figure), "ok": ok})
    return ok, expdir.root
