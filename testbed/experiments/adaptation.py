"""Adaptation: streams that change while they run (P4SS §2.2, S4 Fig. 3).

One emulation run per target of a topology with a ``schedule`` and/or
``adapt`` section (``p4ssadapt``, ``failover``, ``elastic``), checked
against the epoch-aware oracle.  The record keeps, per change, the control
plane's install time and the time from arming to the boundary; per failure,
the time to detect it and to remove the operator, and the windows it
affected; the events lost.  The figure shows the copies each operator
received over time, with the changes, failures and (elastic) N marked.

Neither paper measures adaptation; P4SS claims it (its adaptability
property) without a number, so the record says so beside ours.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import numpy as np
import pandas as pd
import yaml
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.shipped import check_scenarios, plan_cost, scenario, scenario_run
from testbed.rundir import ExperimentDir, RunDir, RunRecord, RunVerdicts
from testbed.semantics.plan import load_planned
from testbed.semantics.topology import Topology, parse_topology

#: Width of one bin of the load-over-time figure (seconds).
BIN_S = 0.1


class AdaptationParams(KindParams):
    #: A topology with a ``schedule`` and/or ``adapt`` section.
    topology: str
    #: More such topologies run beside it on each target, to compare (``elastic``:
    #: the same ramp with the operators' lag as the policy's signal).
    compare: list[str] = []
    targets: list[str] = Field(default=["model", "bmv2"], min_length=1)
    #: Per target, a factor on every rate of the run (``paced``), for a
    #: target that cannot carry the topology's rates on this machine.
    pace: dict[Literal["model", "bmv2"], Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=dict)

    @field_validator("topology")
    @classmethod
    def _adaptive(cls, name: str) -> str:
        check_scenarios([name])
        topo = scenario(name)[1]
        if not (topo.schedule or topo.adapt):
            raise ValueError(f"{name} has neither a schedule nor an adapt section: nothing would change")
        return name

    @field_validator("compare")
    @classmethod
    def _all_adaptive(cls, names: list[str]) -> list[str]:
        for i, name in enumerate(names):
            try:
                cls._adaptive(name)
            except ValueError as err:
                raise ValueError(f"[{i}]: {err}") from None
        return names

    def topologies(self) -> list[str]:
        return [self.topology, *self.compare]


def paced(data: dict[str, Any], factor: float) -> dict[str, Any]:
    """A topology file's data with every rate times ``factor``: the streams'
    rates and event counts, the schedule's rates, its points in stream terms
    and the elastic policies' thresholds.  The run keeps its timeline (the same seconds, the same
    ramps, the same boundaries in time) and, scaled alike, the load that
    drives the policies, so N takes the same course at a pace the target
    carries."""
    out = copy.deepcopy(data)
    for stream in out.get("streams", []):
        stream["rate"] = stream["rate"] * factor
        stream["events"] = max(1, round(stream["events"] * factor))
    starts = {s.get("id"): (s.get("timestamps") or {}).get("start", 0) for s in out.get("streams", [])}
    for entry in out.get("schedule") or []:
        if "rate" in entry:
            entry["rate"]["rate"] = entry["rate"]["rate"] * factor
        point = entry.get("after") or {}
        if "events" in point:                  # the same point of the stream, which has fewer events
            point["events"] = max(1, round(point["events"] * factor))
        if "ts" in point:
            start = starts.get(point.get("stream"), 0)
            point["ts"] = start + round((point["ts"] - start) * factor)
    for policy in (out.get("adapt") or {}).get("elastic") or []:
        policy["high"], policy["low"] = policy["high"] * factor, policy["low"] * factor
    return out


def summarize(run: RunRecord, verdicts: Optional[RunVerdicts]) -> dict[str, Any]:
    """What one run's facts and verdicts say about its adaptation."""
    adaptation = run.adaptation or {}
    changes = [
        {"stream": int(sid), "epoch": c["epoch"], "policy": c["policy"], "operators": c["operators"],
         "boundary": c["boundary"], "install_ms": round(c["install_s"] * 1000, 2),
         "arm_to_boundary_ms": round((c["applied_at"] - c["armed_at"]) * 1000, 2)}
        for sid, cs in run.changes.items() for c in cs]
    failures = []
    for f in adaptation.get("failures", []):
        detected = next((d for d in adaptation.get("detections", []) if d["host"] == f["host"]), None)
        removal = [c for c in adaptation.get("decisions", []) if c["policy"] == "failover"
                   and c.get("applied_at") and f["host"] not in c["operators"]]
        row = {"host": f["host"], "how": f["how"],
               "detect_ms": None if detected is None else round((detected["detected_at"] - f["at"]) * 1000, 1)}
        if detected is not None and removal:
            row["detect_to_removed_ms"] = round((max(c["applied_at"] for c in removal)
                                                 - detected["detected_at"]) * 1000, 1)
        failures.append(row)
    check = {k: v.model_dump() for k, v in verdicts.check.items()} if verdicts else {}
    windows = {k: v.model_dump() for k, v in verdicts.window_check.items()} if verdicts else {}
    return {
        "ok": verdicts is not None and verdicts.ok,
        "changes": changes,
        "failures": failures,
        "events_sent": sum(c["sent"] for c in check.values()),
        "events_lost": sum(c["missing"] + c["lost_before_switch"] for c in check.values()),
        "lost_at_failed_operators": sum(c.get("lost_at_failed_operators", 0) for c in check.values()),
        "windows_affected_by_failure": sum(len(c.get("windows_affected_by_failure", [])) for c in check.values()),
        "elastic_n": [(round(s["t"], 2), s["N"]) for s in adaptation.get("elastic_samples", [])],
        # Spark's windows (computed from the Windows headers) against the reference with the run's epochs
        "windows": {key: sum(w.get(field, 0) for w in windows.values())
                    for key, field in (("reference", "reference_windows"), ("matching", "matching"),
                                       ("affected_by_failure", "affected_by_failure"))} if windows else None,
    }


class Adaptation(ExperimentKind):
    """A topology that changes while it runs, on each target."""

    Params = AdaptationParams
    paper = {"p4ss_adaptability": paper.P4SS_ADAPTABILITY}

    def measure(self) -> dict[str, Any]:
        runs: dict[str, Any] = {}
        for target in self.targets():
            for name in self.params.topologies():
                label = self.label(target, name)
                path, topo = self.topology(target, name)
                rundir = self.expdir.run(label)
                ok = scenario_run(topo, path, target, rundir, self.settings)
                runs[label] = {"ok": ok, "run_dir": str(rundir.root.relative_to(self.expdir.root)),
                               "target": target, "topology": name, "pace": self.params.pace.get(target, 1.0),
                               **summarize(rundir.read_record(), rundir.read_verdicts())}
        return {"runs": runs}

    def label(self, target: str, name: str) -> str:
        """A run's name: the target, and the topology unless it is the main one
        (so the main topology's runs read as in records before ``compare``)."""
        return target if name == self.params.topology else f"{target}-{name}"

    def topology(self, target: str, name: Optional[str] = None) -> tuple[Path, Topology]:
        """A topology of the experiment (the main one by default), paced for ``target``
        if the parameters say so (written into raw/, and copied into the run
        directory as every run's is)."""
        name = name or self.params.topology
        path, topo = scenario(name)
        factor = self.params.pace.get(target)
        if factor is None or factor == 1:
            return path, topo
        out = self.expdir.paced_topology(self.label(target, name))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(paced(yaml.safe_load(path.read_text()), factor), sort_keys=False))
        return out, load_planned(out)[0]

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        out = {}
        for name in params.topologies():
            path, topo = scenario(name)
            out[name] = plan_cost(topo)
            for target, factor in params.pace.items():
                paced_topo = parse_topology(paced(yaml.safe_load(path.read_text()), factor),
                                            f"{path} paced x{factor}")
                out[f"{name}-{target}"] = plan_cost(paced_topo)
        return out

    def ok(self, ours: dict[str, Any]) -> bool:
        return bool(ours["runs"]) and all(r["ok"] for r in ours["runs"].values())

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        out = []
        for label, r in record["ours"]["runs"].items():
            rundir = RunDir(expdir.root / r["run_dir"])
            if rundir.is_run():
                pace = f", at {r['pace']:g}x the rates" if r.get("pace", 1) != 1 else ""
                title = record["experiment"]["description"]
                if r.get("topology", record["params"]["topology"]) != record["params"]["topology"]:
                    title = f"{title}; topology {r['topology']}"
                out.append(draw_run(rundir, expdir.figure(f"adaptation-{label}"), f"{title} ({label}{pace})"))
        return out


def draw_run(rundir: RunDir, path: Path, title: str) -> Path:
    """Copies per operator per second over time; changes, failures and N marked."""
    run = rundir.read_record()
    deliveries = pd.read_parquet(rundir.deliveries, columns=["operator", "recv_ns"])
    t0 = deliveries["recv_ns"].min()
    deliveries["t"] = (deliveries["recv_ns"] - t0) / 1e9
    bins = np.arange(0, deliveries["t"].max() + BIN_S, BIN_S)
    elastic = (run.adaptation or {}).get("elastic_samples", [])
    fig, axes = plt.subplots(2 if elastic else 1, 1, figsize=(10, 6 if elastic else 4), sharex=True, squeeze=False)
    ax = axes[0][0]
    for op, group in deliveries.groupby("operator"):
        counts, _ = np.histogram(group["t"], bins=bins)
        ax.plot(bins[:-1], counts / BIN_S, label=op, linewidth=1)
    ymax = ax.get_ylim()[1]
    for sid, changes in run.changes.items():
        for c in changes:
            x = (c["applied_at"] * 1e9 - t0) / 1e9
            ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
            ax.text(x, ymax * 0.97, f" s{sid} e{c['epoch']}: N={len(c['operators'])}", rotation=90,
                    va="top", fontsize=7)
    adaptation = run.adaptation or {}
    for f in adaptation.get("failures", []):
        ax.axvline((f["at"] * 1e9 - t0) / 1e9, color="red", linewidth=1)
        ax.text((f["at"] * 1e9 - t0) / 1e9, ymax * 0.5, f" {f['host']} fails", color="red", fontsize=8)
    for d in adaptation.get("detections", []):
        ax.axvline((d["detected_at"] * 1e9 - t0) / 1e9, color="orange", linewidth=1)
        ax.text((d["detected_at"] * 1e9 - t0) / 1e9, ymax * 0.35, " detected", color="orange", fontsize=8)
    ax.set_ylabel("copies received per second")
    # Beside the axes: inside, it covered the labels of the latest changes.
    ax.legend(fontsize=7, ncol=1 if deliveries["operator"].nunique() <= 12 else 2, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), title="operator", title_fontsize=7)
    ax.set_title(title, fontsize=9)
    if elastic:
        samples = pd.DataFrame(elastic)
        ax2 = axes[1][0]
        ax2.step((samples["at"] * 1e9 - t0) / 1e9, samples["N"], where="post")
        ax2.set_ylabel("N (elastic)")
    axes[-1][0].set_xlabel("seconds since the first copy")
    return save_figure(fig, path)
