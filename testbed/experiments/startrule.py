"""Where windows start, grid against event (issue 45): the same streams under both rules.

Each stream of the chosen scenarios is replayed through the embedded
target's data plane in process (``SplitterPipeline`` holding the installed
plan: the bytes bmv2 also sends, as the differential tests hold), once with
``starts: grid`` and once with ``starts: event`` (S4's rule).  Per rule it
records the windows (their starts, events and the stream's query result),
the copies per operator, and per event whether the two rules send it to the
same operators.  Every event's operators are also held to the oracle, so
the record is a check as well as a measurement.

A stream whose timestamps leave no slide without an event at its grid start
(tbsw1: step 10, slide 500) gets the same windows under both rules; a
replayed stream with gaps (the flights of one year in departure order, with
the nights between them) does not.  ``sort_by_time`` sends a dataset in
timestamp order: the rule under test takes no lateness.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.shipped import check_scenarios, plan_cost, scenario
from testbed.rundir import ExperimentDir
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import Topology, parse_topology
from testbed.semantics.windows import EVENT, GRID, START_RULES
from testbed.semantics.workload import stream_events

FIGURE = "startrule"


class StartRuleParams(KindParams):
    scenarios: list[str] = Field(min_length=1, description="topologies whose time streams are compared")
    #: At most this many events of each stream (None: all of them).
    events: int | None = Field(default=None, ge=1)
    #: Send each stream's events in timestamp order: the event rule takes no lateness.
    sort_by_time: bool = True
    targets: list[str] = ["model"]


def under_rule(topo: Topology, starts: str) -> Topology:
    """``topo`` with every time stream's windows starting by ``starts``, and no lateness."""
    data = topo.model_dump(mode="json")
    for s in data["streams"]:
        if s["window"]["kind"] == "time":
            s["window"].update(starts=starts, lateness=0)
    return parse_topology(data, f"{topo.name} (starts: {starts})")


def replay(topo: Topology, stream_id: int, events: dict[str, np.ndarray]) -> tuple[list[tuple], list[tuple]]:
    """One stream's events through the data plane and the oracle.

    Returns per event ``(seq, ts, operators, windows, dropped)`` from the
    oracle after holding the data plane's operators to it, and per window
    ``(window, start, events, value_sum)``.
    """
    plan = SplitterPlan(topo)
    pipe = SplitterPipeline()
    Controller(pipe).install(plan)
    operator_of = plan.operator_of_id()
    stream = next(s for s in topo.streams if s.id == stream_id)
    oracle = stream.oracle()
    rows, windows = [], {}
    for seq, ts, value in zip(events["seq"].tolist(), events["ts"].tolist(), events["value"].tolist()):
        verdict = oracle.step(seq, ts)
        sent = sorted(operator_of[r.instance] for r in pipe.replicate(pipe.ingress(stream_id, ts)))
        if sent != sorted(verdict.operators):
            raise AssertionError(f"{topo.name} stream {stream_id} event {seq} (ts {ts}): the data plane sent it "
                                 f"to {sent}, the oracle says {sorted(verdict.operators)}")
        rows.append((seq, ts, tuple(sent), tuple(verdict.windows), verdict.dropped or ""))
        for j in verdict.windows:
            n, total = windows.get(j, (0, 0))
            windows[j] = (n + 1, total + value)
    starts = window_starts(oracle, sorted(windows))
    return rows, [(j, starts[j], n, total) for j, (n, total) in sorted(windows.items())]


def window_starts(oracle, ids: list[int]) -> dict[int, int]:
    """Where each window starts, in timestamps."""
    origin = oracle.origin or 0
    assigner = oracle.assigner
    if assigner.starts == EVENT:
        known = assigner.window_starts
        return {j: origin + known[j] for j in ids}
    return {j: origin + j * assigner.slide for j in ids}


class StartRule(ExperimentKind):
    """The time streams of some scenarios under ``starts: grid`` and ``starts: event``."""

    Params = StartRuleParams
    paper = {"s4_start_rule": paper.S4_START_RULE}

    def measure(self) -> dict[str, Any]:
        check_scenarios(self.params.scenarios)
        window_rows, load_rows, summary = [], [], {}
        for name in self.params.scenarios:
            _path, topo = scenario(name)
            for s in (s for s in topo.streams if s.window.kind == "time"):
                events = stream_events(s, topo.seed, self.params.events)
                if self.params.sort_by_time:
                    order = np.argsort(events["ts"], kind="stable")
                    events = {k: v[order] for k, v in events.items()}
                    events["seq"] = np.arange(len(order), dtype=np.int64)
                per_event = {}
                for rule in START_RULES:
                    ruled = under_rule(topo, rule)
                    rows, windows = replay(ruled, s.id, events)
                    per_event[rule] = rows
                    window_rows += [{"scenario": name, "stream": s.id, "rule": rule, "window": j, "start": start,
                                     "events": n, "value_sum": total} for j, start, n, total in windows]
                    copies = pd.Series([op for r in rows for op in r[2]], dtype=object).value_counts()
                    load_rows += [{"scenario": name, "stream": s.id, "rule": rule, "operator": op,
                                   "copies": int(copies.get(op, 0))} for op in s.operators]
                key = f"{name}/{s.id}"
                summary[key] = self._compare(per_event, window_rows, name, s.id, list(s.operators))
                self.log(f"{key}: {summary[key]}")
        pd.DataFrame(window_rows).to_parquet(self.expdir.start_windows, index=False)
        pd.DataFrame(load_rows).to_parquet(self.expdir.start_load, index=False)
        return {"streams": summary, "sorted_by_time": self.params.sort_by_time}

    @staticmethod
    def _compare(per_event: dict[str, list[tuple]], window_rows: list[dict], name: str, sid: int,
                 operators: list[str]) -> dict[str, Any]:
        """How the rules differ on one stream: events sent elsewhere, windows,
        their sizes and results, and the load per operator."""
        grid, event = per_event[GRID], per_event[EVENT]
        out: dict[str, Any] = {"events": len(grid),
                               "events_to_other_operators": sum(g[2] != e[2] for g, e in zip(grid, event))}
        frames = {rule: pd.DataFrame([r for r in window_rows if r["scenario"] == name and r["stream"] == sid
                                      and r["rule"] == rule]) for rule in START_RULES}
        for rule, frame in frames.items():
            copies = [op for r in per_event[rule] for op in r[2]]
            load = pd.Series(copies, dtype=object).value_counts().reindex(operators, fill_value=0)
            out[rule] = {"windows": len(frame), "events_per_window_mean": float(frame["events"].mean()),
                         "copies": len(copies),
                         "load_max_over_mean": float(load.max() / load.mean()) if load.sum() else 0.0,
                         "dropped": int(sum(1 for r in per_event[rule] if r[4]))}
        # A window's result is the same under both rules when some window of
        # the other rule holds exactly as many events with the same sum.
        g = set(map(tuple, frames[GRID][["events", "value_sum"]].to_numpy().tolist()))
        e = set(map(tuple, frames[EVENT][["events", "value_sum"]].to_numpy().tolist()))
        out["event_windows_with_a_grid_twin"] = sum(
            tuple(x) in g for x in frames[EVENT][["events", "value_sum"]].to_numpy().tolist())
        out["distinct_results"] = {"grid_only": len(g - e), "event_only": len(e - g)}
        return out

    def ok(self, ours: dict[str, Any]) -> bool:
        # replay() raised if the data plane and the oracle parted on any event
        return bool(ours.get("streams"))

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        return {f"{name} ({rule})": plan_cost(under_rule(scenario(name)[1], rule))
                for name in params.scenarios for rule in START_RULES}

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        load = pd.read_parquet(expdir.start_load)
        windows = pd.read_parquet(expdir.start_windows)
        groups = list(load.groupby(["scenario", "stream"], sort=True))
        fig, axes = plt.subplots(2, len(groups), figsize=(5 * len(groups), 7), squeeze=False)
        for col, ((name, sid), part) in enumerate(groups):
            table = part.pivot(index="operator", columns="rule", values="copies").reindex(columns=list(START_RULES))
            table.plot.bar(ax=axes[0][col], rot=0)
            # Room above the bars for the legend: even loads reach the same height everywhere.
            axes[0][col].set_ylim(0, 1.3 * float(table.to_numpy().max() or 1))
            axes[0][col].legend(title="rule", ncol=2, fontsize=8, loc="upper center")
            axes[0][col].set_title(f"{name}, stream {sid}: copies per operator", fontsize=9)
            axes[0][col].set_ylabel("copies")
            w = windows[(windows["scenario"] == name) & (windows["stream"] == sid)]
            for rule in START_RULES:
                sizes = w[w["rule"] == rule]["events"]
                axes[1][col].hist(sizes, bins=40, alpha=0.5, label=f"{rule}: {len(sizes)} windows")
            axes[1][col].set_xlabel("events per window")
            axes[1][col].set_ylabel("windows")
            axes[1][col].legend(fontsize=8)
        fig.suptitle("where windows start: grid (Flink, Spark) against event (S4)", fontsize=10)
        return [save_figure(fig, expdir.figure(FIGURE))]
