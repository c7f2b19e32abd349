"""Experiments: a set of scenario runs and the figure that compares them.

An experiment file (``experiments/<name>.yaml``) names the scenarios to run
and the figure to draw.  Each run gets its usual run directory under
``results/<experiment>/<id>/runs/<scenario>/``; ``experiment.json`` lists them
with their check results, and the figure is drawn from their raw data.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, ValidationError  # noqa: E402

from .plots import load_table  # noqa: E402
from .topology import NAME_PATTERN, TopologyError, load_topology, resolve_topology  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    figure: Literal["load", "amplification"] = "load"
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


def draw(exp: Experiment, runs: dict[str, Path], out: Path) -> Path:
    if exp.figure == "load":
        n = len(runs)
        cols = min(4, n)
        rows = (n + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
        for ax, (name, run_dir) in zip(axes.flat, runs.items()):
            table = load_table(run_dir)
            table.plot.bar(ax=ax, rot=0, legend=len(table.columns) > 1)
            ax.set_title(name)
            ax.set_xlabel("")
            ax.set_ylabel("events")
        for ax in list(axes.flat)[n:]:
            ax.axis("off")
    else:
        ratios = {}
        for name, run_dir in runs.items():
            acct = json.loads((run_dir / "run.json").read_text())["accounting"]["streams"]
            sent = sum(s["sent"] for s in acct.values())
            out_copies = sum(sum(s["received_per_operator"].values()) for s in acct.values())
            ratios[name] = out_copies / sent
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(list(ratios), list(ratios.values()))
        ax.set_ylabel("copies delivered per event sent")
        for i, v in enumerate(ratios.values()):
            ax.text(i, v, f"{v:.2f}", ha="center", va="bottom")
    fig.suptitle(exp.description)
    fig.tight_layout()
    path = out / f"{exp.figure}.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_experiment(exp: Experiment, make_run, out: Path | None = None) -> tuple[bool, Path]:
    """Run every scenario with ``make_run(topology, path, run_dir) -> ok``; draw the figure."""
    out = out or ROOT / "results" / exp.name / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    runs, summary = {}, {}
    for name in exp.runs:
        path = resolve_topology(name)
        run_dir = out / "runs" / name
        ok = make_run(load_topology(path), path, run_dir)
        runs[name], summary[name] = run_dir, {"ok": ok, "run_dir": str(run_dir)}
        (out / "experiment.json").write_text(json.dumps({"experiment": exp.model_dump(), "runs": summary}, indent=2))
    figure = draw(exp, runs, out)
    summary_ok = all(r["ok"] for r in summary.values())
    (out / "experiment.json").write_text(json.dumps({"experiment": exp.model_dump(), "runs": summary,
                                                     "figure": str(figure), "ok": summary_ok}, indent=2))
    return summary_ok, out
