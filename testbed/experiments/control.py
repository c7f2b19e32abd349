"""Control-plane time: how long it takes to configure one stream with N operators.

S4 Fig. 9.  On each target a switch runs outside Mininet with no
interfaces at all: operators are port numbers to the control plane, so a
sweep to N = 1,024 needs no host per operator (past bmv2's 510 ports, the
instances of a few shared hosts, as a live run places them; the s4scale
experiment times the same installs with the operators running behind the
switch).  Each point installs a
one-stream plan with ``Controller.install`` (groups, then entries: window
spec, operator count, N unicast entries, the multicast entries, one
egress rewrite per operator) on the empty switch, timed from the first
call to the last reply, then ``Controller.clear`` empties the switch
(untimed) for the next one.  One untimed round warms the switch and the
client up first.  Points are interleaved (repetition, N,
tumbling or sliding) so that a slow moment of the machine spreads over all
of them instead of one.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.control import Controller
from testbed.emulation.veth import VethRig
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams, interruptible, live_switch
from testbed.experiments.resources import readback_topology, semantic_windows
from testbed.experiments.shipped import check_scenarios
from testbed.rundir import ExperimentDir
from testbed.semantics.instances import MAX_SHARED_INSTANCES
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import OperatorCount, Repeats

FIG_9 = "s4_fig9"


class ControlParams(KindParams):
    n_values: list[OperatorCount] = Field(default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], min_length=1)
    #: tumbling and sliding, each with the window spec of a scenario (count and
    #: time windows cost the same: one window_spec entry, S4 §V-B3c)
    semantics: dict[str, str] = {"tumbling": "cbtw1", "sliding": "cbsw1"}
    repeat: Repeats = 20

    @field_validator("n_values")
    @classmethod
    def _instances(cls, values: list[int]) -> list[int]:
        if min(values) < 1 or max(values) > MAX_SHARED_INSTANCES:
            raise ValueError(f"N must be 1..{MAX_SHARED_INSTANCES} (16-bit instance ids past the ports)")
        return values

    @field_validator("semantics")
    @classmethod
    def _scenarios(cls, semantics: dict[str, str]) -> dict[str, str]:
        check_scenarios(semantics.values())
        return semantics


def time_installs(api: Any, plans: dict[tuple[str, int], SplitterPlan], repeat: int, target: str) -> list[dict]:
    """Install every plan ``repeat`` times on one switch; one row per install.

    One untimed round first: the first calls of a fresh switch and client
    pay for connections, caches and imports, which is not configuration.
    """
    controller = Controller(api)
    for plan in plans.values():
        controller.install(plan)
        controller.clear()
    rows = []
    for rep in range(repeat):
        for (semantic, n), plan in plans.items():
            t0 = time.perf_counter()
            parts = controller.install(plan)
            seconds = time.perf_counter() - t0
            controller.clear()
            rows.append({"target": target, "semantic": semantic, "N": n, "rep": rep, "seconds": seconds, **parts})
    return rows


def summarize(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Mean and spread per target, semantic and N, in milliseconds."""
    ms = rows.assign(ms=rows["seconds"] * 1000)
    g = ms.groupby(["target", "semantic", "N"])
    out = g["ms"].agg(["count", "mean", "std", "min", "median", "max"]).reset_index()
    out["operations"] = g["operations"].first().to_numpy()
    return out.round(4).to_dict("records")


class ControlTime(ExperimentKind):
    """Time to install one stream against N, tumbling against sliding, per target."""

    Params = ControlParams
    paper = {"s4_fig9": paper.S4_FIG_9}
    accepts = frozenset({"targets", "repeat"})

    def measure(self) -> dict[str, Any]:
        p = self.params
        plans = self.plans(p)
        rows: list[dict] = []
        targets = self.targets()
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"), VethRig(0) as rig:
            for target in targets:
                self.log(f"{target}: {len(plans)} plans x {p.repeat} repetitions")
                with live_switch(target, self.expdir, f"{target}-control", rig) as (_proc, api):
                    rows += time_installs(api, plans, p.repeat, target)
        table = pd.DataFrame(rows)
        table.to_parquet(self.expdir.control_times, index=False)
        return {"summary_ms": summarize(table) if rows else []}

    @staticmethod
    def plans(params: ControlParams) -> dict[tuple[str, int], SplitterPlan]:
        """The plans whose install is timed: each semantic at each N (past
        bmv2's ports, instances on shared hosts, as a live run places them)."""
        windows = semantic_windows(params.semantics)
        return {(sem, n): SplitterPlan(readback_topology(w, n)) for n in params.n_values
                for sem, w in windows.items()}

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        return {f"{sem}-{n}": plan.cost() for (sem, n), plan in cls.plans(params).items()}

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        rows = pd.read_parquet(expdir.control_times)
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
        if len(rows):
            ms = rows.assign(ms=rows["seconds"] * 1000)
            stats = ms.groupby(["target", "semantic", "N"])["ms"].agg(["mean", "std"]).reset_index()
            for (target, semantic), part in stats.groupby(["target", "semantic"]):
                axes[0].errorbar(part["N"], part["mean"], yerr=part["std"].fillna(0), marker="o", ms=3, capsize=2,
                                 ls="-" if semantic == "sliding" else "--", label=f"{target}, {semantic}")
            ops = rows.groupby(["semantic", "N"])["operations"].first().reset_index()
            for semantic, part in ops.groupby("semantic"):
                axes[1].plot(part["N"], part["operations"], marker="o", ms=3, label=semantic)
        reps = int(rows["rep"].max()) + 1 if len(rows) else 0
        axes[0].set(xscale="log", yscale="log", xlabel="N (operator instances)",
                    ylabel="configuration time (ms)", title=f"install one stream: mean and std of {reps} runs")
        axes[1].set(xscale="log", yscale="log", xlabel="N (operator instances)",
                    ylabel="control calls", title="control calls per install (groups x 3 + entries)")
        for ax in axes:
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=8)
        s4 = record["paper"]["s4_fig9"]
        fig.suptitle(f"S4 Fig. 9-like (ours). S4 on Tofino, {s4['repeat']} runs per point, values {s4['values']}: "
                     f"{s4['finding']}", fontsize=8, wrap=True)
        return [save_figure(fig, expdir.figure(FIG_9))]
