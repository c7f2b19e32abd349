"""Output rate against input rate, up to and past where the target loses events.

S4 Fig. 8.  Every point is an ordinary emulation run (Mininet, the target,
receivers; no Spark) of a scenario at one offered rate, kept in
``runs/<target>-<scenario>-<k>/``.  First the target's sustained capacity is
measured on one scenario (default cbtw1, one copy per event): the rate
doubles until a run is not sustained, then is bisected.  Then each scenario is
run at fractions of that capacity, below and past it.  Input events/s is
what the source achieved (events over the span of their send times), output
events/s what the operators received (copies over the span of their receive
times); losses come from the run's accounting.  A switch with deep socket
buffers can absorb a short run it cannot keep up with: nothing is lost, but
its output trails the input.  So a point counts as sustained only when
nothing was lost *and* the output kept up (``KEEP_UP``); the capacity is the
highest sustained rate.  Below saturation the output must be the input
times the oracle's copies per event.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import pandas as pd
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.capacity import Calibration, RatePoints
from testbed.experiments.shipped import check_scenarios, plan_cost, scenario
from testbed.rundir import ExperimentDir
from testbed.semantics.strict import EventCount, Rate

FIG_8 = "s4_fig8"
#: Amplification lines drawn in the figure (S4 Fig. 8's x1, x2 and the cbsw1 factor).
GUIDES = (1, 2, 5)


class RateParams(KindParams):
    scenarios: list[str] = Field(default=["cbtw1", "cbsw1", "tbtw1", "tbsw1"], min_length=1)
    fractions: list[Annotated[float, Field(gt=0, le=100)]] = Field(
        default=[0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5], min_length=1)
    seconds: float = Field(default=2.0, gt=0, le=3600, description="stream duration of each point")
    min_events: EventCount = 200
    #: Events/s per target to take as the capacity instead of measuring it.
    capacity: Optional[dict[str, Rate]] = None
    calibration: Calibration = Calibration()

    @field_validator("scenarios")
    @classmethod
    def _scenarios(cls, names: list[str]) -> list[str]:
        check_scenarios(names)
        return names


class RateSweep(ExperimentKind):
    """Calibrate each target's sustained capacity, then sweep every scenario across it."""

    Params = RateParams
    paper = {"s4_fig8": paper.S4_FIG_8}

    def measure(self) -> dict[str, Any]:
        points = RatePoints(self, self.expdir.rate_points, self.params.seconds, self.params.min_events)
        capacities = {}
        for target in self.targets():
            given = (self.params.capacity or {}).get(target)
            capacities[target] = given if given else points.capacity(target, self.params.calibration)
            self.log(f"{target}: capacity {capacities[target]:.0f} events/s"
                     f"{' (given)' if given else ' (measured)'}")
            for name in self.params.scenarios:
                for fraction in self.params.fractions:
                    points.point(target, name, fraction * capacities[target], "sweep", fraction)
        rows = pd.DataFrame(points.rows)
        rows.to_parquet(self.expdir.rate_points, index=False)
        return {"capacity_events_per_s": capacities, "saturation": saturation(rows),
                "overload_losses": overload_losses(rows)}

    def ok(self, ours: dict[str, Any]) -> bool:
        """Every run finished, none put a copy where it does not belong, and every
        lossless run delivered exactly the oracle's copies.  Losses above capacity
        are measured points, not failures."""
        return points_ok(pd.read_parquet(self.expdir.rate_points))

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        # A point changes only its stream's rate and events, never the plan.
        return {name: plan_cost(scenario(name)[1]) for name in [*params.scenarios, params.calibration.scenario]}

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        return [draw_fig8(pd.read_parquet(expdir.rate_points), record, expdir.figure(FIG_8))]


def points_ok(rows: pd.DataFrame) -> bool:
    """The sweep's verdict: no faults wherever they can be judged, and exact
    delivery wherever nothing was lost.

    Faults are not judged at a bmv2 point that lost events before the switch.
    There the check must guess which events bmv2 saw: its counters say how
    many, not which. The guess goes wrong when bmv2 also drops copies in
    its egress queues, which it does silently (64 frames per port) once its
    output falls behind. A count window's events are then numbered off by
    the copies it lost, and the check sees extra copies where the switch
    made none. The embedded target's copies are never lost unseen.
    """
    if not len(rows):
        return False
    # Events lost before the switch are not in "lost" (the accounting's missing copies): a point
    # is lossless only when nothing went missing on either side of the switch.
    lossless = rows[(rows["lost"] == 0) & (rows["missing_after_switch"] == 0)
                    & (rows["lost_before_switch_checked"] == 0)]
    judged = rows[(rows["target"] != "bmv2") | (rows["lost_before_switch_checked"] == 0)]
    return bool((judged["faults"] == 0).all()) and bool(
        (lossless["copies_received"] == lossless["copies_expected"]).all())


def overload_losses(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Per point that lost events: where (before the switch, or missing after it)."""
    if not len(rows):
        return []
    lossy = rows[(rows["lost_before_switch_checked"] > 0) | (rows["missing_after_switch"] > 0)]
    return lossy[["target", "scenario", "phase", "fraction", "offered", "lost_before_switch_checked",
                  "missing_after_switch"]].to_dict("records")


def saturation(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Per target and scenario: the highest lossless input and its output, the
    highest sustained one, the first point that fell behind and the first that lost."""
    out = []
    if rows.empty:
        return out
    for (target, name), part in rows[rows["phase"] == "sweep"].groupby(["target", "scenario"]):
        part = part.sort_values("offered")
        clean, lossy = part[part["lost"] == 0], part[part["lost"] > 0]
        best = clean.iloc[-1] if len(clean) else None
        first = lossy.iloc[0] if len(lossy) else None
        kept, behind = part[part["sustained"]], part[~part["sustained"]]
        out.append({"target": target, "scenario": name,
                    "max_sustained_input": round(float(kept["input_rate"].max()), 1) if len(kept) else None,
                    "output_at_max_sustained": round(float(kept["output_rate"].iloc[-1]), 1) if len(kept) else None,
                    "first_behind_fraction": float(behind["fraction"].iloc[0]) if len(behind) else None,
                    "max_lossless_input": None if best is None else round(float(best["input_rate"]), 1),
                    "output_there": None if best is None else round(float(best["output_rate"]), 1),
                    "copies_per_event": None if best is None else
                    round(float(best["copies_expected"]) / float(best["sent"]), 3),
                    "first_loss_offered": None if first is None else round(float(first["offered"]), 1),
                    "first_loss_fraction": None if first is None else float(first["fraction"]),
                    "first_loss_share": None if first is None else
                    round(float(first["lost"]) / float(first["copies_expected"]), 4)})
    return out


def draw_fig8(rows: pd.DataFrame, record: dict[str, Any], out: Path) -> Path:
    """Top: output against input on log-log axes, where the x1/x2/x5 lines
    run parallel; a diamond where a scenario first falls behind, a circle
    where it first loses.  Bottom: the share of expected copies lost, before
    the switch and after it."""
    targets = sorted(rows["target"].unique()) if len(rows) else ["(none)"]
    fig, axes = plt.subplots(2, len(targets), figsize=(max(9.0, 6.5 * len(targets)), 8.5), squeeze=False)
    capacity = record.get("ours", {}).get("capacity_events_per_s", {})
    for col, target in enumerate(targets):
        top, bottom = axes[0, col], axes[1, col]
        part = rows[(rows["target"] == target) & (rows["phase"] == "sweep")] if len(rows) else rows
        if len(part):
            lo, hi = float(part["input_rate"].min()), max(float(part["input_rate"].max()), capacity.get(target, 0.0))
            for k in GUIDES:
                top.plot([lo, hi], [k * lo, k * hi], ls=":", color="grey", lw=0.8)
                top.annotate(f"x{k}", (hi, k * hi), fontsize=8, color="grey")
        for i, (name, p) in enumerate(part.groupby("scenario", sort=False)):
            p = p.sort_values("offered")
            top.plot(p["input_rate"], p["output_rate"], marker="o", ms=4, color=f"C{i}", label=name)
            # Where the overload lost them: solid before the switch, dashed after it (missing copies).
            before = p.get("lost_before_switch_checked", p["lost"])
            after = p.get("missing_after_switch", pd.Series(0, index=p.index))
            bottom.plot(p["input_rate"], before / p["copies_expected"], marker="o", ms=4, color=f"C{i}",
                        label=f"{name}: lost before the switch")
            bottom.plot(p["input_rate"], after / p["copies_expected"], marker="x", ms=4, ls="--", color=f"C{i}",
                        label=f"{name}: missing after it")
            for marks, style in ((p[~p["sustained"]], {"marker": "D", "s": 90, "edgecolors": "darkorange"}),
                                 (p[p["lost"] > 0], {"marker": "o", "s": 170, "edgecolors": "red"})):
                if len(marks):
                    top.scatter([marks.iloc[0]["input_rate"]], [marks.iloc[0]["output_rate"]], facecolors="none",
                                zorder=3, **style)
        top.scatter([], [], marker="D", facecolors="none", edgecolors="darkorange", label="falls behind (first)")
        top.scatter([], [], marker="o", s=90, facecolors="none", edgecolors="red", label="loses events (first)")
        if target in capacity:
            for ax in (top, bottom):
                ax.axvline(capacity[target], color="black", ls="--", lw=0.8,
                           label="sustained capacity (cbtw1)" if ax is top else None)
        top.set(xscale="log", yscale="log", title=f"{target}: output against input",
                xlabel="input events/s (achieved by the source)",
                ylabel="output events/s (copies received by operators)")
        bottom.set(xscale="log", title=f"{target}: share of expected copies lost", xlabel="input events/s",
                   ylabel="lost / expected")
        for ax in (top, bottom):
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
    s4 = record["paper"]["s4_fig8"]
    fig.suptitle(f"S4 Fig. 8-like (ours).  S4 on Tofino1, cbsw1 at 100%: {s4['input_gbps_at_100_percent']} Gbps "
                 f"in, {s4['cbsw1_output_gbps_at_100_percent']} Gbps out\n(x{s4['cbsw1_ratio_from_numbers']}; "
                 f"its text says x4 for cbsw1, x2 for tbsw1), {s4['packet_bytes']}-byte packets", fontsize=9)
    return save_figure(fig, out)
