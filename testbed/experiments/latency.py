"""Latency overhead: the time a frame spends inside the switch, per semantic.

S4 Table V.  The switch runs outside Mininet on veth pairs and is timed by
kernel timestamps on its own interfaces (``stamps.time_in_switch``), so the
time is the switch process's alone.  Frames go in at a low rate so that no
queue forms.

Each round runs the same target twice on the same veth pairs: the plain
forwarding baseline (the embedded switch's ``--forward`` mode, bmv2 with
``p4/baseline/forward.p4``: same I/O, no splitter), then the splitter with
the four semantics installed as four streams whose frames are interleaved.
Rounds alternate the two so that a slow moment of the machine does not
land on one of them only.  The copies each event produced are held against
the window oracle, and every forwarded frame must come out once.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.wire import FrameTemplate
from testbed.emulation.source import SPLITTER_MAC
from testbed.emulation.veth import VethRig
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams, interruptible
from testbed.experiments.resources import SEMANTICS
from testbed.experiments.shipped import check_scenarios, scenario
from testbed.experiments.stamps import SOURCE_PORT, copy_times, time_in_switch
from testbed.rundir import ExperimentDir
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import EventCount, Rate, Repeats
from testbed.semantics.topology import SPLITTER_IP, Topology, parse_topology
from testbed.semantics.workload import stream_events

TABLE_V = "s4_table5"
FORWARD = "forward"
FORWARD_PORT = 2


class LatencyParams(KindParams):
    semantics: dict[str, str] = dict(SEMANTICS)
    events: EventCount = Field(default=300, description="events per semantic per round")
    rate: Rate = Field(default=200, description="events per second, all semantics together")
    rounds: Repeats = 3

    @field_validator("semantics")
    @classmethod
    def _scenarios(cls, semantics: dict[str, str]) -> dict[str, str]:
        check_scenarios(semantics.values())
        return semantics


def latency_topology(semantics: dict[str, str], events: int) -> tuple[Topology, dict[int, str]]:
    """One stream per semantic (ids 1..), each with its scenario's window, N and
    timestamps, all from host ``h1`` on port 1 to hosts ``h2``.. on ports 2..;
    and which semantic each stream id stands for."""
    streams, names = [], {}
    for sid, (sem, name) in enumerate(semantics.items(), start=1):
        s = scenario(name)[1].streams[0]
        operators = [f"h{i}" for i in range(2, 2 + len(s.operators))]
        streams.append(s.model_copy(update={"id": sid, "name": sem, "source": "h1", "operators": operators,
                                            "events": events, "replay": None}).model_dump(mode="json",
                                                                                          exclude_none=True))
        names[sid] = sem
    n_hosts = 1 + max(len(s["operators"]) for s in streams)
    topo = parse_topology({"name": "latency", "hosts": {f"h{i}": {} for i in range(1, n_hosts + 1)},
                           "streams": streams})
    return topo, names


def frames_and_oracle(topo: Topology) -> tuple[list[bytes], dict[tuple[int, int], list[int]]]:
    """Every stream's frames interleaved round robin, and the ports the oracle
    sends each ``(stream, seq)`` to."""
    plan = SplitterPlan(topo)
    per_stream, expected = [], {}
    for s in topo.streams:
        ip, mac = plan.addresses[s.source]
        template = FrameTemplate(mac, SPLITTER_MAC, ip, SPLITTER_IP, s.id)
        ev = stream_events(s, topo.seed)
        oracle = s.oracle()
        frames = []
        for seq, ts, key, value in zip(ev["seq"].tolist(), ev["ts"].tolist(), ev["key"].tolist(),
                                       ev["value"].tolist()):
            frames.append(template.frame(seq, ts, key, value))
            expected[(s.id, seq)] = sorted(plan.ports[h] for h in oracle.step(seq, ts, key).operators)
        per_stream.append(frames)
    interleaved = [f for group in zip(*per_stream) for f in group]
    return interleaved, expected


def samples(rows: list[tuple], target: str, mode: str, round_: int, names: dict[int, str]) -> pd.DataFrame:
    """One row per copy out (``stamps.copy_times``), labelled with the round and what was measured."""
    outs = copy_times(rows)
    semantic = outs["stream"].map(names) if mode != FORWARD else FORWARD
    return outs.assign(target=target, mode=mode, semantic=semantic, round=round_)


def delivery_check(frame: pd.DataFrame, expected: dict[tuple[int, int], list[int]]) -> dict[str, int]:
    """Events whose copies went to other ports than ``expected`` says, and events never seen going in."""
    got = frame.groupby(["stream", "seq"])["port"].apply(sorted).to_dict()
    wrong = sum(1 for key, ports in expected.items() if got.get(key, []) != ports)
    return {"events": len(expected), "wrong_or_missing": wrong, "no_ingress_stamp": int(frame["in_ns"].isna().sum())}


class Latency(ExperimentKind):
    """Kernel timestamps in and out of the switch, splitter against forwarding."""

    Params = LatencyParams
    paper = {"s4_table5": paper.S4_TABLE_V}

    def measure(self) -> dict[str, Any]:
        p = self.params
        topo, names = latency_topology(p.semantics, p.events)
        frames, expected = frames_and_oracle(topo)
        forward_frames = frames[::len(names)]             # the first semantic's, one per event
        forward_expected = {key: [FORWARD_PORT] for key in expected if key[0] == 1}
        plan = SplitterPlan(topo)
        n_ports = max(plan.ports.values())
        parts, checks = [], []
        targets = self.targets()
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"), VethRig(n_ports) as rig:
            for target in targets:
                for r in range(p.rounds):
                    self.log(f"{target}: round {r + 1}/{p.rounds}: forwarding, then the splitter")
                    fwd = time_in_switch(target, self.expdir, rig, f"{target}-forward-{r}", forward_frames,
                                         p.rate, {FORWARD_PORT}, forward={SOURCE_PORT: FORWARD_PORT})
                    parts.append(samples(fwd, target, FORWARD, r, names))
                    checks.append({"target": target, "mode": FORWARD, "round": r,
                                   **delivery_check(parts[-1], forward_expected)})
                    out_ports = set(range(2, n_ports + 1))
                    split = time_in_switch(target, self.expdir, rig, f"{target}-splitter-{r}", frames, p.rate,
                                           out_ports, plan=plan)
                    parts.append(samples(split, target, "splitter", r, names))
                    checks.append({"target": target, "mode": "splitter", "round": r,
                                   **delivery_check(parts[-1], expected)})
        table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
            columns=["target", "mode", "semantic", "round", "stream", "seq", "port", "copy", "in_ns", "out_ns",
                     "latency_ns"])
        table.to_parquet(self.expdir.latency_samples, index=False)
        return {"summary_us": summarize(table), "checks": checks,
                "frame_bytes": len(frames[0]), "rate": p.rate}

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        topo, _names = latency_topology(params.semantics, params.events)
        return {"latency": SplitterPlan(topo).cost()}

    def ok(self, ours: dict[str, Any]) -> bool:
        return all(c["wrong_or_missing"] == 0 and c["no_ingress_stamp"] == 0 for c in ours["checks"])

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        return [draw_table5(pd.read_parquet(expdir.latency_samples), record["paper"]["s4_table5"],
                            expdir.figure(TABLE_V))]


def summarize(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Per target and semantic (and the forwarding baseline): min, avg, p50, p99,
    max in microseconds over every copy, the average of first copies, the
    spread of the round averages, and the ratio to forwarding."""
    if table.empty:
        return []
    us = table.assign(us=table["latency_ns"] / 1000)
    out = []
    for (target, semantic), part in us.groupby(["target", "semantic"]):
        lat = part["us"].to_numpy()
        rounds = part.groupby("round")["us"].mean()
        out.append({"target": target, "semantic": semantic, "copies": len(lat),
                    "min": float(lat.min()), "avg": float(lat.mean()), "p50": float(np.percentile(lat, 50)),
                    "p99": float(np.percentile(lat, 99)), "max": float(lat.max()),
                    "first_copy_avg": float(part.loc[part["copy"] == 0, "us"].mean()),
                    "round_avg_std": float(rounds.std()) if len(rounds) > 1 else 0.0})
    base = {row["target"]: row for row in out if row["semantic"] == FORWARD}
    for row in out:
        ref = base.get(row["target"])
        if ref is not None and row["semantic"] != FORWARD:
            row["avg_over_forward"] = row["avg"] / ref["avg"]
            row["p50_over_forward"] = row["p50"] / ref["p50"]
    return [{k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()} for row in out]


def draw_table5(table: pd.DataFrame, s4: dict[str, Any], out: Path) -> Path:
    """Left: S4's min/avg/max beside our min/median/p99 (and average) per
    semantic, log scale.  Ours lead with the median: on a shared machine
    the scheduler adds millisecond outliers that move averages, not medians.
    Right: our splitter over forwarding on the same target."""
    rows = pd.DataFrame(summarize(table))
    sems = list(s4["avg"])
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    ax, ratio = axes
    targets = sorted(rows["target"].unique()) if len(rows) else []
    width = 0.8 / (1 + len(targets))

    def bars(i: int, label: str, low: list, mid: list, high: list) -> list[float]:
        xs = [k + (i - len(targets) / 2) * width for k in range(len(sems))]
        ax.bar(xs, mid, width, color=f"C{i}", label=label)
        ax.errorbar(xs, mid, yerr=[np.subtract(mid, low), np.subtract(high, mid)], fmt="none", ecolor="black",
                    capsize=2, lw=0.8)
        return xs

    bars(0, "S4 Tofino1 (paper): avg, min-max", [s4["min"][s] for s in sems], [s4["avg"][s] for s in sems],
         [s4["max"][s] for s in sems])
    for i, target in enumerate(targets, start=1):
        by = rows[rows["target"] == target].set_index("semantic").reindex([*sems, FORWARD])
        xs = bars(i, f"ours, {target}: median, min-p99", by.loc[sems, "min"], by.loc[sems, "p50"], by.loc[sems, "p99"])
        ax.scatter(xs, by.loc[sems, "avg"], marker="x", color="black", zorder=3, s=18)
        ax.axhline(by.loc[FORWARD, "p50"], ls="--", lw=1, color=f"C{i}", label=f"{target}: plain forwarding, median")
        part = by.loc[sems]
        offset = (i - 1 - (len(targets) - 1) / 2) * 0.35
        ratio.bar(np.arange(len(sems)) + offset, part["p50_over_forward"], 0.35, color=f"C{i}",
                  label=f"{target}: medians")
        ratio.scatter(np.arange(len(sems)) + offset, part["avg_over_forward"], marker="x", color="black", zorder=3,
                      label="averages" if i == 1 else None)
    ax.set_xticks(range(len(sems)), sems)
    ax.set(yscale="log", ylabel="time in the switch (us)", title="ingress to egress, every copy (x: our average)")
    ax.grid(axis="y", alpha=0.3, which="both")
    # Under the axes: inside, it covered the last semantic's bars.
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    ratio.axhline(1, color="grey", lw=0.8)
    ratio.set_xticks(range(len(sems)), sems)
    ratio.set(ylabel="splitter / plain forwarding", title="overhead over forwarding, same target and run")
    ratio.grid(axis="y", alpha=0.3)
    ratio.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    fig.suptitle("S4 Table V-like: time a frame spends in the switch (ours: kernel timestamps on the switch's veth "
                 "interfaces) beside S4 on Tofino1 (P4STA)", fontsize=10)
    return save_figure(fig, out)
