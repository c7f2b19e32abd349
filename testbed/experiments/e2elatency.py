"""Result latency and operator lag against input rate, with the Spark operators live (issue 21).

Beyond the papers: S4 and P4SS measure the splitter; here the whole
pipeline is timed, from an event's send to its window's result leaving the
live merger.  First each target's lossless capacity (no Spark) is measured
on this machine, as ``s4amp`` does (``capacity.RatePoints``).  Then every
scenario runs with its operators on the experiment's warm Spark application
at fractions of that capacity, up to the rate where the operators stop
keeping up (their lag grows over the whole run, ``analysis.operatorlag``):
that is the pipeline's sustainable throughput, set beside the switch's.
Every point is an ordinary run in ``runs/<target>-<scenario>-<k>/``; the
rows are ``raw/e2elatency.parquet``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from pydantic import Field

from testbed.analysis.operatorlag import GROWING, live_summary
from testbed.analysis.plots import plt, save_figure
from testbed.analysis.verdicts import fmt_s
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind
from testbed.experiments.capacity import RatePoints
from testbed.experiments.rates import RateParams, points_ok
from testbed.experiments.shipped import scenario
from testbed.rundir import ExperimentDir, RunDir

FIGURE = "e2elatency"
#: Sweep a scenario no further once this many points in a row fell behind.
STOP_AFTER_BEHIND = 2


def beside_the_paper(record: dict[str, Any]) -> str:
    """How the figure relates to the papers: they time the splitter alone, we the whole pipeline."""
    s4 = record.get("paper", {}).get("s4_table5") or paper.S4_TABLE_V
    avg = s4.get("avg", {})
    return (f"S4 Table V times the switch alone: {min(avg.values(), default=0)}-{max(avg.values(), default=0)} "
            f"{s4.get('unit', 'us')} on Tofino1. No paper in the seeds times results end to end; here they are "
            f"Spark micro-batches, seconds, on a 2-core machine.")


class E2EParams(RateParams):
    fractions: list[Annotated[float, Field(gt=0, le=100)]] = Field(
        default=[0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0], min_length=1)
    seconds: float = Field(default=8.0, gt=0, le=3600, description="stream duration of each point")
    calibration_seconds: float = Field(default=2.0, gt=0, le=3600,
                                       description="stream duration of each capacity point (no Spark)")


class ResultLatency(ExperimentKind):
    """Capacity per target (no Spark), then each scenario with Spark live at fractions of it."""

    Params = E2EParams
    paper = {"s4_table5": paper.S4_TABLE_V}

    @property
    def rows_path(self) -> Path:
        return self.expdir.raw / "e2elatency.parquet"

    def measure(self) -> dict[str, Any]:
        capacities: dict[str, float] = {}
        calibration = RatePoints(self, self.expdir.raw / "calibration.parquet", self.params.calibration_seconds,
                                 self.params.min_events, prefix="calibration-")
        sweep = RatePoints(self, self.expdir.raw / "points.parquet", self.params.seconds, self.params.min_events,
                           spark=self.settings.spark)
        rows: list[dict[str, Any]] = []
        for target in self.targets():
            given = (self.params.capacity or {}).get(target)
            capacities[target] = given if given else calibration.capacity(target, self.params.calibration)
            self.log(f"{target}: lossless capacity {capacities[target]:.0f} events/s without Spark")
            for name in self.params.scenarios:
                per_event = copies_per_event(name)
                behind = 0
                for fraction in self.params.fractions:
                    # the switch's packet budget at this fraction, shared by the event and its copies
                    offered = fraction * capacities[target] * 2 / (1 + per_event)
                    row = sweep.point(target, name, offered, "sweep", fraction)
                    row.update(live_summary(RunDir(self.expdir.root / row["run_dir"])))
                    rows.append(row)
                    pd.DataFrame(rows).to_parquet(self.rows_path, index=False)
                    self.log(f"{target} {name} at {row['input_rate']:.0f} events/s: result p99 "
                             f"{fmt_s(row.get('result_p99_s'))}, lag up to {fmt_s(row.get('max_lag_s'))}, "
                             f"{'keeps up' if row.get('keeps_up') else 'falls behind'}")
                    behind = 0 if row.get("keeps_up") else behind + 1
                    if behind >= STOP_AFTER_BEHIND:
                        break
        table = pd.DataFrame(rows)
        return {"capacity_events_per_s": capacities, "lag_growth_threshold": GROWING,
                "sustainable": sustainable(table, capacities), "points": point_table(table)}

    def ok(self, ours: dict[str, Any]) -> bool:
        """Every run finished with no copy misplaced and exact delivery where
        nothing was lost, and every window the live merger emitted as
        complete equals its final result.  Latencies never decide."""
        rows = pd.read_parquet(self.rows_path) if self.rows_path.exists() else pd.DataFrame()
        if not len(rows) or not points_ok(rows):
            return False
        return bool((rows.get("mismatched", pd.Series([0])).fillna(0) == 0).all())

    @classmethod
    def installs(cls, params) -> dict[str, Any]:
        from testbed.experiments.shipped import plan_cost

        return {name: plan_cost(scenario(name)[1]) for name in [*params.scenarios, params.calibration.scenario]}

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        path = expdir.raw / "e2elatency.parquet"
        rows = pd.read_parquet(path) if path.exists() else pd.DataFrame()
        return [draw_latency(rows, record, expdir.figure(FIGURE))]


def copies_per_event(name: str) -> float:
    """The oracle's copies per event of a scenario's first stream (1 for tumbling windows)."""
    _path, topo = scenario(name)
    stream = topo.streams[0]
    return stream.copies() / stream.events


def sustainable(rows: pd.DataFrame, capacities: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Per ``<target> <scenario>``: the highest input rate up to which every
    point kept up, its share of the target's lossless capacity, the result
    latency there, and the first rate at which the operators fell behind."""
    out: dict[str, dict[str, Any]] = {}
    if rows.empty:
        return out
    for (target, name), part in rows.groupby(["target", "scenario"], sort=False):
        part = part.sort_values("offered")
        falling = part.index[~part["keeps_up"].fillna(False).astype(bool)]
        kept = part.loc[:falling[0]].iloc[:-1] if len(falling) else part
        best = kept.iloc[-1] if len(kept) else None
        out[f"{target} {name}"] = {
            "events_per_s": None if best is None else round(float(best["input_rate"])),
            "share_of_capacity": None if best is None else round(float(best["input_rate"]) / capacities[target], 3),
            "p99_s": None if best is None else round(float(best["result_p99_s"]), 2),
            "first_behind": round(float(part.loc[falling[0], "input_rate"])) if len(falling) else None}
    return out


def point_table(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The record's copy of every point: rate, latency, lag, and whether it kept up."""
    if rows.empty:
        return []
    columns = ["target", "scenario", "fraction", "input_rate", "result_p50_s", "result_p99_s",
               "before_last_send_share", "last_result_after_last_send_s", "max_backlog_events", "max_lag_s",
               "lag_growth", "keeps_up", "lost"]
    table = rows[[c for c in columns if c in rows.columns]].copy()
    return [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in table.to_dict("records")]


def draw_latency(rows: pd.DataFrame, record: dict[str, Any], out: Path) -> Path:
    """Per target: result latency (p50 solid, p99 dashed) and the largest
    operator lag against input rate, one colour per scenario; a cross where
    the operators fell behind; the switch's lossless capacity (no Spark) and
    half of it as vertical lines."""
    targets = sorted(rows["target"].unique()) if len(rows) else ["(none)"]
    fig, axes = plt.subplots(2, len(targets), figsize=(max(8.0, 6.5 * len(targets)), 8.5), squeeze=False)
    capacity = record.get("ours", {}).get("capacity_events_per_s", {})
    for col, target in enumerate(targets):
        lat_ax, lag_ax = axes[0, col], axes[1, col]
        part = rows[rows["target"] == target] if len(rows) else rows
        for i, (name, p) in enumerate(part.groupby("scenario", sort=False)):
            p = p.sort_values("input_rate")
            lat_ax.plot(p["input_rate"], p["result_p50_s"], "o-", ms=4, color=f"C{i}", label=f"{name} p50")
            lat_ax.plot(p["input_rate"], p["result_p99_s"], "s--", ms=3, color=f"C{i}", label=f"{name} p99")
            lag_ax.plot(p["input_rate"], p["max_lag_s"], "o-", ms=4, color=f"C{i}", label=name)
            behind = p[~p["keeps_up"].fillna(False).astype(bool)]
            for ax, column in ((lat_ax, "result_p99_s"), (lag_ax, "max_lag_s")):
                ax.scatter(behind["input_rate"], behind[column], marker="x", s=80, color="red", zorder=3)
        lat_ax.scatter([], [], marker="x", color="red", label="operators fall behind")
        if target in capacity:
            for ax in (lat_ax, lag_ax):
                ax.axvline(capacity[target], color="black", ls="--", lw=0.8,
                           label="switch's lossless capacity (cbtw1, no Spark)" if ax is lat_ax else None)
                ax.axvline(capacity[target] / 2, color="grey", ls=":", lw=0.8,
                           label="half of it (issue 21's target on cbtw1)" if ax is lat_ax else None)
        lat_ax.set(xscale="log", title=f"{target}: result latency (send of the completing event to emission)",
                   xlabel="input events/s (achieved by the source)", ylabel="seconds")
        lag_ax.set(xscale="log", title=f"{target}: largest operator lag over the run",
                   xlabel="input events/s", ylabel="seconds behind the newest copy received")
        for ax in (lat_ax, lag_ax):
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
    fig.suptitle(f"Results end to end with the Spark operators live (ours).\n{beside_the_paper(record)}",
                 fontsize=9)
    return save_figure(fig, out)
