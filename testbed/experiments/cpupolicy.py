"""The switch's CPU policy, measured: lossless capacity with Spark live, per target and policy.

On a machine the switch shares with the sources, the receivers and Spark,
a switch that waits for the CPU overflows its socket buffers and events
are lost before it.  ``targets.base.CPU_POLICIES`` gives the switch the
real-time class (``fifo``) or leaves it in the default one (``none``).
This kind calibrates each target's sustained capacity (``RatePoints.capacity``:
double the rate until a run loses or falls behind, then bisect) once per
policy, every point a run with the operators' Spark application live, so
the two policies are compared under the load a real run has.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Optional

import pandas as pd
from pydantic import Field

from testbed.analysis.plots import plt, save_figure
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.capacity import Calibration, RatePoints
from testbed.experiments.rates import points_ok
from testbed.experiments.shipped import plan_cost, scenario
from testbed.rundir import ExperimentDir
from testbed.semantics.strict import EventCount

FIGURE = "cpu_policy"


class PolicyParams(KindParams):
    policies: list[Literal["none", "fifo"]] = Field(default=["none", "fifo"], min_length=1)
    spark: bool = Field(default=True, description="the operators' Spark application live in every point")
    seconds: float = Field(default=2.0, gt=0, le=3600, description="stream duration of each point")
    min_events: EventCount = 200
    calibration: Calibration = Calibration()


class CpuPolicyCapacity(ExperimentKind):
    """Each target's sustained capacity under each CPU policy of its switch."""

    Params = PolicyParams
    paper: dict[str, Any] = {}

    def measure(self) -> dict[str, Any]:
        capacity: dict[str, dict[str, Optional[float]]] = {}
        rows: list[dict[str, Any]] = []
        for target in self.targets():
            for policy in self.params.policies:
                points = RatePoints(self, self.expdir.rate_points, self.params.seconds, self.params.min_events,
                                    spark=self.params.spark, policy=policy, prefix=f"{policy}-")
                points.rows = rows           # one table for every policy and target
                try:
                    found: Optional[float] = points.capacity(target, self.params.calibration)
                except RuntimeError as err:           # not sustained even at the calibration's start
                    self.log(str(err))
                    found = None
                capacity.setdefault(target, {})[policy] = found
                self.log(f"{target}, switch {policy}: capacity "
                         f"{'none found' if found is None else f'{found:.0f} events/s'}")
        pd.DataFrame(rows).to_parquet(self.expdir.rate_points, index=False)
        return {"capacity_events_per_s": capacity, "spark_live": self.params.spark,
                "scenario": self.params.calibration.scenario}

    def ok(self, ours: dict[str, Any]) -> bool:
        return points_ok(pd.read_parquet(self.expdir.rate_points))

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        return {params.calibration.scenario: plan_cost(scenario(params.calibration.scenario)[1])}

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        rows = pd.read_parquet(expdir.rate_points)
        fig, ax = plt.subplots(figsize=(7, 4))
        for (target, policy), part in rows.groupby(["target", "policy"]):
            part = part.sort_values("offered")
            ok = part[part["sustained"]]
            ax.plot(part["offered"], part["input_rate"], "o:", alpha=0.4, label=f"{target}, {policy}: every point")
            ax.plot(ok["offered"], ok["input_rate"], "s", label=f"{target}, {policy}: sustained")
        capacity = (record.get("ours") or {}).get("capacity_events_per_s", {})
        lines = [f"{t} {p}: {c:.0f}/s" if c else f"{t} {p}: none" for t, by in capacity.items() for p, c in by.items()]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered events/s")
        ax.set_ylabel("achieved input events/s")
        spark = "Spark live" if (record.get("ours") or {}).get("spark_live") else "no Spark"
        ax.set_title(f"switch CPU policy: sustained capacity ({spark}); " + "; ".join(lines), fontsize=8)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        return [save_figure(fig, expdir.figure(FIGURE))]
