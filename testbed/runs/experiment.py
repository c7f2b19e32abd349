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

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testbed import ROOT
from testbed.analysis.plots import plot_experiment
from testbed.runs.rundir import ExperimentDir
from testbed.semantics.topology import NAME_PATTERN, TopologyError, load_topology, resolve_topology


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    figure: Literal["load", "amplification", "lateness"] = "load"
    runs: list[str] = Field(min_length=1)


def experiment_path(name: str) -> Path | None:
    p = Path(name)
    if p.suffix == ".yaml" and p.exists() and p.parent.name == "experiments":
        return p
    cand = ROOT / "experiments" / f"{name}.yaml"
    return cand if cand.exists() else None


def load_experiment(path: Path) -> Experiment:
    try:
        exp = Experiment.model_validate(yaml.safe_load(path.read_text()))
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise TopologyError(f"{path}: {loc}: {first['msg']}") from None
    for i, name in enumerate(exp.runs):
        try:
            load_topology(resolve_topology(name))
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
