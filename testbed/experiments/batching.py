"""What several events per frame buy (issue 23): lossless capacity against the batch size.

For each scenario (cbtw1, cbsw1, tbsw1 by default) and each batch size k,
the sustained capacity is found as the rate sweep finds it
(``RatePoints.capacity``: double the offered rate until a run loses or falls
behind, then bisect), with the scenario's stream sending ``batch: {events:
k, max_delay}``; ``k = 0`` is the stream unbatched, one event per frame as
before batches existed, so the cost of the feature for unbatched streams is
measured beside it.  Every point also records the frames per second, the
bytes on the wire per delivered event (source frames and copies, Ethernet
headers included) and the latency per event including the time it waited
for its frame.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.capacity import SOURCE_LIMIT, Calibration, RatePoints, median_run
from testbed.experiments.rates import points_ok
from testbed.experiments.shipped import check_scenarios, plan_cost, scenario
from testbed.rundir import ExperimentDir, RunDir
from testbed.semantics.limits import MAX_BATCH
from testbed.semantics.strict import EventCount, Rate
from testbed.semantics.topology import Batching

FIGURE = "batching"
#: Bytes of a frame before its UDP payload: Ethernet, IPv4, UDP.
HEADERS = 14 + 20 + 8
EVENT, WINDOWS, BATCH_HEADER = 32, 32, 4
#: What the issue asks of k = 8 on cbtw1, as a multiple of the unbatched capacity.
TARGET_RATIO = {"model": 4.0, "bmv2": 5.0}


class BatchingParams(KindParams):
    scenarios: list[str] = Field(default=["cbtw1", "cbsw1", "tbsw1"], min_length=1)
    #: Batch sizes; 0 is the stream unbatched (one event per frame, UDP port 50000).
    sizes: list[int] = Field(default=[0, 1, 2, 4, 8, 16], min_length=1)
    max_delay: float = Field(default=0.005, ge=0, le=1, description="seconds an event may wait for its frame")
    seconds: float = Field(default=2.0, gt=0, le=3600, description="stream duration of each point")
    min_events: EventCount = 200
    start: Rate = 2000
    max_rate: Rate = 512000
    refine: int = Field(default=2, ge=0, le=20)
    repeats: int = Field(default=1, ge=1, le=9, description="runs per offered rate (Calibration.repeats)")
    #: The latency panel compares batch sizes at one offered rate, not each at its saturation.
    latency_at: Rate = 8000

    @field_validator("scenarios")
    @classmethod
    def _scenarios(cls, names: list[str]) -> list[str]:
        check_scenarios(names)
        return names

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, sizes: list[int]) -> list[int]:
        bad = [k for k in sizes if not 0 <= k <= MAX_BATCH]
        if bad:
            raise ValueError(f"{bad[0]} is neither 0 (unbatched) nor a batch size of 1 to {MAX_BATCH}")
        return sizes


def wire_row(rundir: RunDir) -> dict[str, Any]:
    """A point's frames, bytes on the wire and latency per event, from its raw data."""
    sources = pd.read_parquet(rundir.sources, columns=["stream", "seq", "frame", "send_ns", "batch_wait_ns"])
    deliveries = pd.read_parquet(rundir.deliveries, columns=["stream", "seq", "operator", "recv_ns"])
    sources = sources.drop_duplicates(["stream", "seq"])
    # A frame of one event is a plain event frame (docs/wire.md, "Batches"), batched stream or not.
    frames = sources.groupby(["stream", "frame"]).size().rename("events").reset_index()
    in_batch = frames["events"] > 1
    source_bytes = np.where(in_batch, HEADERS + BATCH_HEADER + EVENT * frames["events"], HEADERS + EVENT).sum()
    joined = deliveries.merge(sources, on=["stream", "seq"], how="left")
    copies = joined.groupby(["stream", "operator", "frame"]).size().rename("events").reset_index()
    copies = copies.merge(frames.rename(columns={"events": "frame_events"}), on=["stream", "frame"], how="left")
    copy_batched = copies["frame_events"] > 1
    copy_bytes = np.where(copy_batched, HEADERS + BATCH_HEADER + (EVENT + WINDOWS) * copies["events"],
                          (HEADERS + EVENT + WINDOWS) * copies["events"]).sum()
    latency_us = (joined["recv_ns"] - joined["send_ns"] + joined["batch_wait_ns"]) / 1000.0
    span = (sources["send_ns"].max() - sources["send_ns"].min()) / 1e9 if len(sources) > 1 else 0.0
    return {"frames": len(frames), "events_per_frame": len(sources) / max(1, len(frames)),
            "frame_rate": (len(frames) - 1) / span if span > 0 else float("nan"),
            "bytes_per_event": float(source_bytes + copy_bytes) / max(1, len(deliveries)),
            "latency_p50_us": float(latency_us.quantile(0.5)) if len(joined) else float("nan"),
            "latency_p99_us": float(latency_us.quantile(0.99)) if len(joined) else float("nan"),
            "batch_wait_p50_us": float(sources["batch_wait_ns"].quantile(0.5) / 1000.0)}


class BatchCapacity(ExperimentKind):
    """Lossless capacity, frames, bytes and latency per event against the batch size."""

    Params = BatchingParams
    paper = {"s4_one_event_per_packet": paper.S4_ONE_EVENT_PER_PACKET}

    def measure(self) -> dict[str, Any]:
        p = self.params
        capacity: dict[str, dict[str, dict[str, Optional[float]]]] = {}
        rows: list[dict[str, Any]] = []
        for target in self.targets():
            for name in p.scenarios:
                for k in p.sizes:
                    found = self._capacity(target, name, k, rows)
                    capacity.setdefault(target, {}).setdefault(name, {})[str(k)] = found
        frame = pd.DataFrame(rows)
        frame.to_parquet(self.expdir.rate_points, index=False)
        return summarize(frame, capacity, p.max_delay)

    def _capacity(self, target: str, name: str, k: int, rows: list[dict[str, Any]]) -> Optional[float]:
        p = self.params
        update = {"batch": Batching(events=k, max_delay=p.max_delay) if k else None}
        points = RatePoints(self, self.expdir.rate_points, p.seconds, p.min_events, prefix=f"k{k}-",
                            stream_update=update, extra_row=lambda rundir: {"batch": k, **wire_row(rundir)})
        points.rows = rows
        try:
            found: Optional[float] = points.capacity(
                target, Calibration(scenario=name, start=p.start, max_rate=p.max_rate, refine=p.refine,
                                    repeats=p.repeats))
        except RuntimeError as err:
            self.log(str(err))
            found = None
        self.log(f"{target} {name} k={k or 'unbatched'}: "
                 f"{'none found' if found is None else f'{found:.0f} events/s'}")
        return found

    def ok(self, ours: dict[str, Any]) -> bool:
        return points_ok(pd.read_parquet(self.expdir.rate_points))

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        out = {}
        for name in params.scenarios:
            topo = scenario(name)[1]
            for k in params.sizes:
                stream = topo.streams[0].model_copy(
                    update={"batch": Batching(events=k, max_delay=params.max_delay) if k else None})
                out[f"{name}/k={k}"] = plan_cost(topo.model_copy(update={"streams": [stream, *topo.streams[1:]]}))
        return out

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        rows = pd.read_parquet(expdir.rate_points)
        best = at_capacity(rows)
        steady = at_rate(rows, float((record.get("params") or {}).get("latency_at", 8000)))
        fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
        panels = [("input_rate", "lossless capacity, events/s"), ("frame_rate", "frames/s at that rate"),
                  ("bytes_per_event", "bytes on the wire per delivery (an event at one of its operators)"),
                  ("latency_p50_us", "latency per event with its wait for the frame, µs (p99 dashed), "
                                     f"at {steady['offered'].max() if len(steady) else 0:.0f}/s")]
        for ax, (column, title) in zip(axes.flat, panels):
            shown = steady if column == "latency_p50_us" else best
            for (target, name), part in shown.groupby(["target", "scenario"]):
                part = part.sort_values("batch")
                x = part["batch"].replace(0, 0.5)       # unbatched drawn left of k = 1
                line, = ax.plot(x, part[column], "o-", label=f"{name} ({target})")
                bound = part["input_rate"] < SOURCE_LIMIT * part["offered"]
                ax.plot(x[bound], part.loc[bound, column], "o", mfc="white", color=line.get_color())
                if column == "latency_p50_us":
                    ax.plot(x, part["latency_p99_us"], "--", color=line.get_color(), alpha=0.6)
            ax.set_xscale("log", base=2)
            ax.set_xticks([0.5, 1, 2, 4, 8, 16], ["none", "1", "2", "4", "8", "16"])
            ax.set_xlabel("events per frame (k)")
            ax.set_title(title, fontsize=9)
            ax.grid(alpha=0.3)
            if column in ("input_rate", "frame_rate", "latency_p50_us"):
                ax.set_yscale("log")
        axes.flat[0].legend(fontsize=7, title="hollow: the source's limit, a lower bound", title_fontsize=7)
        ours = record.get("ours") or {}
        notes = [f"{t} {s}: k=8 is {r['k8_over_unbatched']:.1f}x unbatched (asked: {TARGET_RATIO.get(t, 0):.0f}x)"
                 for t, by in (ours.get("ratios") or {}).items() for s, r in by.items()
                 if r.get("k8_over_unbatched") is not None and s == "cbtw1"]
        fig.suptitle("Several events per frame: no paper measures this (S4 names it an open problem). "
                     + "; ".join(notes), fontsize=8)
        fig.tight_layout()
        return [save_figure(fig, expdir.figure(FIGURE))]


def summarize(rows: pd.DataFrame, capacity: dict[str, dict[str, dict[str, Optional[float]]]],
              max_delay: float) -> dict[str, Any]:
    """The record's numbers, headline first: the ratios the issue asks about,
    then every capacity that was measured, and where it was only the source's."""
    best = at_capacity(rows) if len(rows) else rows
    # Where the source could not send faster, the capacity is only a lower bound: the switch kept up.
    limited = [f"{r.target}/{r.scenario}/k={r.batch}" for r in best.itertuples()
               if r.input_rate < SOURCE_LIMIT * r.offered]
    measured = {target: {name: {k: round(v) for k, v in by_k.items() if v is not None}
                         for name, by_k in by_name.items()} for target, by_name in capacity.items()}
    return {"ratios": ratios(capacity), "targets": TARGET_RATIO, "capacity_events_per_s": measured,
            "only_the_sources_limit": limited,
            "max_delay_s": max_delay, "at_capacity": best.to_dict(orient="records")}


def at_capacity(rows: pd.DataFrame) -> pd.DataFrame:
    """Per target, scenario and batch size, the run the capacity was read
    from (``RatePoints.held``): at the highest offered rate that held, the
    lower median of its sustained runs by input rate (``median_run``).  Rows without ``held`` (one
    run per rate) held when they were sustained."""
    held = rows["held"].fillna(rows["sustained"]).astype(bool) if "held" in rows else rows["sustained"]
    ok = rows[held & rows["sustained"]]
    if not len(ok):
        return ok
    keys = ["target", "scenario", "batch"]
    top = ok[ok["offered"] == ok.groupby(keys)["offered"].transform("max")]
    return pd.DataFrame([median_run(part.to_dict("records")) for _, part in top.groupby(keys)])


def at_rate(rows: pd.DataFrame, rate: float) -> pd.DataFrame:
    """Per target, scenario and batch size, the sustained point offered at
    ``rate`` (or the highest below it)."""
    ok = rows[rows["sustained"] & (rows["offered"] <= rate)]
    if not len(ok):
        return ok
    return ok.loc[ok.groupby(["target", "scenario", "batch"])["offered"].idxmax()].reset_index(drop=True)


def ratios(capacity: dict[str, dict[str, dict[str, Optional[float]]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per target and scenario: k = 8 and k = 1 against the unbatched
    capacity (the issue's targets), and k = 8 against k = 1."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for target, by_scenario in capacity.items():
        for name, by_k in by_scenario.items():

            def over(k: str, base: str) -> Optional[float]:
                got, under = by_k.get(k), by_k.get(base)
                return round(got / under, 2) if got and under else None

            out.setdefault(target, {})[name] = {"k8_over_unbatched": over("8", "0"),
                                                "k1_over_unbatched": over("1", "0"), "k8_over_k1": over("8", "1")}
    return out
