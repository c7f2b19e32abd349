"""S4's scale, live: N operator instances swept to a thousand, and streams to thousands.

S4 claims up to 457,000 operator instances on one Tofino switch (Fig. 7),
computed from its compiler's fit, and times the control plane against N up
to a few hundred (Fig. 9).  Here every point is a whole ``testbed run``: a
source, the splitter on each target, and N operator instances placed on a
few shared hosts (``testbed.semantics.instances``), each instance with its
own address and one receiver per host.  Every event is checked against the
oracle, and with Spark on, every window against the centralized reference.

Per point the record keeps the set-up time (the phases before the stream),
what installing the plan took (groups, entries, control calls and seconds,
each call acknowledged by the switch), the peak memory of all the run's
processes together (proportional set sizes, sampled every second), the load
over the instances (copies per instance: max over mean), and the verdict.
The events are ``N * slide * windows_per_instance``, so that round robin
gives every instance the same number of windows once the stream is past its
first windows.

The second sweep holds N (``stream_instances``, on two shared hosts) and
grows the streams, declared as one family (docs/topology.md) whose members
take the window kinds in turn: count and time, tumbling and sliding, from
two sources.  Each stream sends N events at ``stream_rate``, so every
instance gets windows of every stream, and the stream lasts the same at
every point.  All members share one operator list, so the switch holds one
operator set and two entries per stream (docs/p4.md, "Operator sets").
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pydantic import Field, field_validator

from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.contract import build_tables
from testbed.emulation.footprint import TAG_ENV
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams
from testbed.experiments.bench.runs import SETUP_PHASES, MemoryPeak, sending_rate, testbed
from testbed.rundir import ExperimentDir, RunDir
from testbed.semantics.instances import MAX_SHARED_INSTANCES
from testbed.semantics.limits import MAX_STREAM_ID
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import Rate, StrictModel
from testbed.semantics.topology import WindowSpec, parse_topology

FIGURE = "s4scale"


class Semantic(StrictModel):
    """A window spec the sweep runs at every N."""

    window: WindowSpec


class ScaleParams(KindParams):
    n_values: list[int] = Field(default=[16, 64, 256, 1024], min_length=1)
    #: The shared hosts the instances are spread over (an equal share each).
    hosts: int = Field(default=4, ge=1, le=16)
    semantics: dict[str, Semantic] = {
        "sliding": Semantic(window=WindowSpec(kind="count", size=20, slide=10)),
        "tumbling": Semantic(window=WindowSpec(kind="count", size=10, slide=10)),
    }
    #: Windows that round robin gives each instance.
    windows_per_instance: int = Field(default=4, ge=1, le=1000)
    rate: Rate = 3000
    #: Operators on Spark, every window against the reference (``False``: events only).
    spark: bool = True
    #: The streams sweep: how many streams, each over ``stream_instances`` instances.
    stream_values: list[int] = Field(default=[16, 256, 1024, 4096], max_length=16)
    stream_instances: int = Field(default=64, ge=2, le=1024)
    #: Events per second of each stream (a stream sends ``stream_instances`` events),
    #: at most: the streams share the N sweep's total ``rate`` (``stream_point_rate``).
    stream_rate: Rate = 2
    #: The stretch (issue 43): this many streams over the same instances, ids
    #: from 0, each sending ``stretch_events`` events at ``stretch_rate``: too
    #: few for every instance to get windows, enough for every stream to reach
    #: operators and be checked (0: no stretch point).
    stretch_streams: int = Field(default=0, ge=0, le=MAX_STREAM_ID + 1)
    stretch_events: int = Field(default=2, ge=1, le=1000)
    stretch_rate: Rate = 0.1
    #: Whether the stretch point runs Spark too: 65,536 streams of two events
    #: have every event checked against the oracle either way, and without
    #: Spark the point stays within a few minutes per target.
    stretch_spark: bool = False

    @field_validator("stream_values")
    @classmethod
    def _streams(cls, values: list[int]) -> list[int]:
        if values and (min(values) < 1 or max(values) > MAX_STREAM_ID):
            raise ValueError(f"streams must be 1..{MAX_STREAM_ID} (16-bit stream ids)")
        return values

    @field_validator("n_values")
    @classmethod
    def _instances(cls, values: list[int]) -> list[int]:
        if min(values) < 1 or max(values) > MAX_SHARED_INSTANCES:
            raise ValueError(f"N must be 1..{MAX_SHARED_INSTANCES} (16-bit instance ids past the ports)")
        return values


def scale_topology(n: int, hosts: int, window: WindowSpec, events: int, rate: float) -> dict[str, Any]:
    """One source and ``n`` instances on ``hosts`` shared hosts (as even as it divides), as YAML data."""
    hosts = min(hosts, n)
    shares = [n // hosts + (1 if i < n % hosts else 0) for i in range(hosts)]
    names = [f"h{i + 2}" for i in range(hosts)]
    return {"name": f"scale{n}", "switch": {"name": "ssc"},
            "hosts": {"h1": {}, **{h: ({"instances": k} if k > 1 else {}) for h, k in zip(names, shares)}},
            "streams": [{"id": 1, "source": "h1", "window": window.model_dump(mode="json", exclude_none=True),
                         "operators": names, "events": events, "rate": rate}]}


#: The window kinds the members of a streams-sweep family take in turn.
MIXED_WINDOWS = [{"kind": "count", "size": 1, "slide": 1}, {"kind": "count", "size": 2, "slide": 1},
                 {"kind": "time", "size": 1, "slide": 1}, {"kind": "time", "size": 2, "slide": 1}]


def streams_topology(count: int, n: int, rate: float, events: int = 0, first: int = 1) -> dict[str, Any]:
    """``count`` streams as one family over ``n`` instances on two shared hosts, from two sources, as YAML
    data; each sends ``events`` events (default ``n``), and the first has id ``first``."""
    return {"name": f"fam{count}", "switch": {"name": "ssc"},
            "hosts": {"h1": {}, "h2": {"instances": n - n // 2}, "h3": {"instances": n // 2}, "h4": {}},
            "streams": [{"family": {"count": count, "windows": MIXED_WINDOWS, "sources": ["h1", "h4"]},
                         "id": first, "operators": ["h2", "h3"], "events": events or n, "rate": rate}]}


def stream_point_rate(p: "ScaleParams", count: int) -> float:
    """Each stream's rate at a point of ``count`` streams: ``stream_rate``, or
    less so that all of them together offer no more than the N sweep's
    ``rate``.  Both sweeps then load the switch alike and differ only in what
    they sweep: 4,096 streams at 2 events/s each were 8,192 events/s, and
    beside Spark on two cores bmv2's egress queues overflowed."""
    return min(p.stream_rate, p.rate / count)


def stretch_topology(p: "ScaleParams") -> dict[str, Any]:
    """The stretch point's streams (``ScaleParams.stretch_streams``), ids from 0 so 65,536 fit 16 bits."""
    return streams_topology(p.stretch_streams, p.stream_instances, p.stretch_rate, p.stretch_events, first=0)


#: Lines of the two targets, which often coincide (the same plan, the same
#: copies): the model's wide and pale, bmv2's thin and dashed on top of it.
TARGET_STYLE = {"model": {"lw": 5, "alpha": 0.45, "zorder": 2},
                "bmv2": {"lw": 1.5, "ls": "--", "marker": "o", "ms": 3, "zorder": 3}}
#: One colour per semantic in the load CDF, shared by both targets' lines.
SEMANTIC_COLOUR = {"sliding": "tab:blue", "tumbling": "tab:orange"}


def table_row(r: dict[str, Any], first: list[str], installed: Any) -> str:
    """A point's row in the docs' tables: ``first``, set-up, install, what was
    installed, peak memory, load and the verdict (which says when the point
    checked events only, without Spark's windows)."""
    cells = [*first, r.get("setup_s", "-"), r.get("install_s", "-"), installed, r.get("peak_memory_mib", "-"),
             r.get("copies_max_over_mean", "-"), ("passes" if r["check_passes"] else "FAILS")
             + (", events only (no Spark)" if r.get("spark") is False else "")]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def load_balance(rundir: RunDir, operators: list[str]) -> dict[str, Any]:
    """Copies per instance: max over mean, and the spread, over every instance of the stream."""
    got = pd.read_parquet(rundir.deliveries, columns=["operator"])["operator"].value_counts()
    copies = np.array([int(got.get(op, 0)) for op in operators], dtype=float)
    if not len(copies) or not copies.mean():
        return {"copies_max_over_mean": None, "copies_min": 0, "copies_max": 0,
                "instances_without_copies": len(copies)}
    return {"copies_max_over_mean": round(float(copies.max() / copies.mean()), 4), "copies_min": int(copies.min()),
            "copies_max": int(copies.max()), "instances_without_copies": int((copies == 0).sum())}


class ScaleRuns(ExperimentKind):
    """Whole runs at N operator instances, per target and window semantic."""

    Params = ScaleParams
    paper = {"s4_fig7": paper.S4_FIG_7, "s4_fig9": paper.S4_FIG_9}

    def measure(self) -> dict[str, Any]:
        p = self.params
        rows = []
        for target in self.targets():
            for name, semantic in p.semantics.items():
                for n in p.n_values:
                    self.log(f"{target} {name}: N = {n}")
                    events = n * semantic.window.slide * p.windows_per_instance
                    rows.append(self.point(target, name, scale_topology(n, p.hosts, semantic.window, events, p.rate),
                                           dict(sweep="instances", N=n, streams=1, events=events,
                                                window=semantic.window.as_json())))
            for count in p.stream_values:
                self.log(f"{target} streams: {count:,} streams of N = {p.stream_instances}")
                rate = stream_point_rate(p, count)
                rows.append(self.point(target, "mixed", streams_topology(count, p.stream_instances, rate),
                                       dict(sweep="streams", N=p.stream_instances, streams=count,
                                            events=count * p.stream_instances, window=None,
                                            stream_rate=round(rate, 4))))
            if p.stretch_streams:
                count = p.stretch_streams
                self.log(f"{target} stretch: {count:,} streams of N = {p.stream_instances}, "
                         f"{p.stretch_events} events each")
                rows.append(self.point(target, "mixed", stretch_topology(p),
                                       dict(sweep="streams", N=p.stream_instances, streams=count,
                                            events=count * p.stretch_events, window=None,
                                            stream_rate=p.stretch_rate),
                                       spark=p.stretch_spark))
        table = pd.DataFrame(rows)
        table.to_parquet(self.expdir.raw / "scale.parquet", index=False)
        return {"points": rows, **{f"largest_{what}_passed": {
            t: max([r[key] for r in rows if r["target"] == t and r["check_passes"] and r["sweep"] == sweep],
                   default=None)
            for t in {r["target"] for r in rows}} for what, key, sweep in (("n", "N", "instances"),
                                                                            ("streams", "streams", "streams"))}}

    def point(self, target: str, semantic: str, data: dict[str, Any], shape: dict[str, Any],
              spark: bool = True) -> dict[str, Any]:
        """One run of ``data`` (a topology as YAML data); ``shape`` goes into its row as it is.

        ``spark=False`` keeps this point off Spark even when the experiment runs it."""
        p = self.params
        label = f"{target}-{semantic}-{shape['N'] if shape['sweep'] == 'instances' else shape['streams']}"
        path = self.expdir.raw / f"topology-{label}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        topo = parse_topology(data, str(path))
        plan = SplitterPlan(topo)
        cost = plan.cost()
        rundir = self.expdir.run(label)
        spark = spark and p.spark and self.settings.spark
        args = ["run", str(path), "--out", str(rundir.root), "--target", target,
                *(["--spark-master", "local[2]"] if spark else ["--no-spark"]),
                *(["--switch-name", self.settings.switch_name] if self.settings.switch_name else [])]
        tag = f"s4scale-{os.getpid()}-{label}"
        t0 = time.perf_counter()
        with MemoryPeak(tag) as memory:
            res = testbed(*args, env=dict(os.environ, **{TAG_ENV: tag}))
        row: dict[str, Any] = {
            "target": target, "semantic": semantic, **shape, "hosts": len(data["hosts"]) - 1,
            "run_dir": str(rundir.root.relative_to(self.expdir.root)),
            "exit": res.returncode, "wall_s": round(time.perf_counter() - t0, 1),
            "spark": bool(spark),
            "peak_memory_mib": round(memory.peak / 2**20), "estimated_memory_mib": round(topo.memory_need() / 2**20),
            "plan_groups": cost["multicast_groups"], "plan_nodes": cost["multicast_nodes"]}
        if not rundir.is_run():
            return dict(row, check_passes=False, error=" ".join(res.stderr.strip().splitlines()[-1:]))
        run, verdicts = rundir.read_record(), rundir.read_verdicts()
        # what the plan has for the tables of the build that ran
        held = build_tables(run.versions.get("p4_program"))
        row["plan_entries"] = sum(e.table in held for e in plan.entries())
        phases, install = run.phases_s, run.install
        check = testbed("check", str(rundir.root))
        operators = list(dict.fromkeys(op for s in topo.streams for op in s.operators))
        return dict(row, **load_balance(rundir, operators),
                    setup_s=round(sum(phases.get(ph, 0) for ph in SETUP_PHASES), 2),
                    network_s=phases.get("network"), plan_s=phases.get("plan"), operators_s=phases.get("operators"),
                    install_s=round(install.groups_s + install.tables_s, 3) if install else None,
                    install_operations=install.operations if install else None,
                    installed_groups=install.groups if install else None,
                    installed_entries=install.entries if install else None, events_per_s=sending_rate(rundir),
                    expected_deliveries=run.expected_deliveries,
                    lost=sum(a["lost"] for a in (verdicts.accounting.get("streams", {}) if verdicts else {}).values()),
                    windows_ok=all(w.ok for w in verdicts.window_check.values()) if verdicts and
                    verdicts.window_check else None,
                    check_passes=check.returncode == 0, error=run.error)

    def ok(self, ours: dict[str, Any]) -> bool:
        return bool(ours.get("points")) and all(r["check_passes"] for r in ours["points"])

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        p = params
        out = {}
        for name, semantic in p.semantics.items():
            for n in p.n_values:
                data = scale_topology(n, p.hosts, semantic.window, n * semantic.window.slide, p.rate)
                out[f"{name}-{n}"] = SplitterPlan(parse_topology(data)).cost()
        for count in p.stream_values:
            data = streams_topology(count, p.stream_instances, stream_point_rate(p, count))
            out[f"streams-{count}"] = SplitterPlan(parse_topology(data)).cost()
        if p.stretch_streams:
            out[f"streams-{p.stretch_streams}"] = SplitterPlan(parse_topology(stretch_topology(p))).cost()
        return out

    @classmethod
    def doc_table(cls, record: dict[str, Any]) -> list[str]:
        ours = record.get("ours") or {}
        every = ours.get("points") or []
        points = [r for r in every if r.get("sweep", "instances") == "instances"]
        fig7 = (record.get("paper") or {}).get("s4_fig7") or paper.S4_FIG_7
        lines = [f"S4 reports up to {fig7['count_tumbling']['max_operators']:,} operator instances on one Tofino "
                 f"(count tumbling; Fig. 7, from the compiler's fit, no traffic). Ours, live, every event checked:",
                 "", "| target | windows | N | set-up (s) | install (s) | control calls | peak memory (MiB) | "
                     "copies max/mean | check |", "|---|---|---|---|---|---|---|---|---|"]
        for r in points:
            lines.append(table_row(r, [r["target"], r["semantic"], f"{r['N']:,}"], r.get("install_operations", "-")))
        largest = ours.get("largest_n_passed") or {}
        if largest:
            ratio = ", ".join(f"{t}: N = {n:,} ({n / fig7['count_tumbling']['max_operators']:.2%} of S4's figure)"
                              for t, n in sorted(largest.items()) if n)
            lines += ["", f"Largest N that passed here: {ratio}. S4's number is a capacity computed from the "
                          f"compiled program's fit on a Tofino; ours is a live run on a 2-core machine, so the two "
                          f"bound different things."]
        streams = [r for r in every if r.get("sweep") == "streams"]
        if streams:
            lines += ["", f"S4 reports up to {fig7['count_tumbling']['max_streams']:,} count-tumbling and "
                          f"{fig7['time_based']['max_streams']:,} time-based concurrent streams (Fig. 7, the same "
                          f"way). Ours, live: the streams of one family over N = {streams[0]['N']} instances, "
                          f"window kinds mixed, every event checked. The streams of a point share the N sweep's "
                          f"total rate:", "",
                      "| target | streams | events | events/s per stream | set-up (s) | install (s) | "
                      "entries installed | peak memory (MiB) | copies max/mean | check |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            for r in streams:
                lines.append(table_row(r, [r["target"], f"{r['streams']:,}", f"{r['events']:,}",
                                           r.get("stream_rate", "-")], r.get("installed_entries", "-")))
            few = sorted({(r["streams"], r["events"] // r["streams"]) for r in streams
                          if r["events"] < r["streams"] * r["N"]})
            for count, each in few:
                lines += ["", f"At {count:,} streams each stream sends {each} events, too few for its windows to "
                              f"reach all {streams[0]['N']} of its instances: that point's copies max/mean says "
                              f"nothing about balance. It shows the switch holding and splitting every stream."]
            most = ours.get("largest_streams_passed") or {}
            ratio = ", ".join(f"{t}: {n:,} streams ({n / fig7['time_based']['max_streams']:.1%} of S4's time-based "
                              f"figure)" for t, n in sorted(most.items()) if n)
            if ratio:
                lines += ["", f"Most streams that passed here: {ratio}; the same caveat holds."]
        return lines

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        table = pd.read_parquet(expdir.raw / "scale.parquet")
        sweep = table["sweep"] if "sweep" in table else pd.Series("instances", index=table.index)
        rows, streams = table[sweep == "instances"], table[sweep == "streams"]
        fig, grid = plt.subplots(2 if len(streams) else 1, 3, figsize=(15, 10.4 if len(streams) else 5.2),
                                 squeeze=False)
        axes = grid[0]
        for (target, semantic), part in rows.groupby(["target", "semantic"]):
            part = part.sort_values("N")
            style = "-" if semantic == "sliding" else "--"
            label = f"{target}, {semantic}"
            if "setup_s" in part:
                axes[0].plot(part["N"], part["setup_s"], style, marker="o", ms=3, label=f"set-up, {label}")
            if "install_s" in part:
                axes[0].plot(part["N"], part["install_s"], style, marker="s", ms=3, alpha=0.7,
                             label=f"plan install, {label}")
            axes[1].plot(part["N"], part["peak_memory_mib"], style, marker="o", ms=3, label=label)
        largest = rows[rows["N"] == rows["N"].max()]
        for _i, r in largest.iterrows():
            if not (isinstance(r.get("run_dir"), str) and RunDir(expdir.root / r["run_dir"]).deliveries.exists()):
                continue
            got = pd.read_parquet(RunDir(expdir.root / r["run_dir"]).deliveries, columns=["operator"])
            per = np.sort(got["operator"].value_counts().to_numpy())
            axes[2].plot(per, np.arange(1, len(per) + 1) / len(per), drawstyle="steps-post",
                         **TARGET_STYLE.get(r["target"], {}), color=SEMANTIC_COLOUR.get(r["semantic"]),
                         label=f"{r['target']}, {r['semantic']} (max/mean {r.get('copies_max_over_mean')})")
        axes[0].set(xscale="log", yscale="log", xlabel="N (operator instances)", ylabel="seconds",
                    title="set-up (network, switch, plan, operators) and plan install")
        axes[1].set(xscale="log", xlabel="N (operator instances)", ylabel="MiB (sum of PSS)",
                    title="peak memory of all the run's processes", ylim=(0, None))
        axes[2].set(xlabel="copies received per instance", ylabel="fraction of instances",
                    title=f"load over the instances at N = {int(rows['N'].max()):,} (CDF)")
        ns = sorted(int(n) for n in rows["N"].unique())
        for ax in axes[:2]:
            ax.set_xticks(ns, [f"{n:,}" for n in ns])
            ax.minorticks_off()
        if len(streams):
            cls._draw_streams(grid[1], streams)
        for ax in grid.flat:
            ax.grid(alpha=0.3, which="both")
            # Below the axes: inside, the set-up and install lines leave no corner free.
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
        fig7 = record["paper"]["s4_fig7"]
        fig.suptitle(f"S4's scale, live. S4 Fig. 7: up to {fig7['count_tumbling']['max_operators']:,} operator "
                     f"instances on a Tofino (compiler fit, no traffic); here every point is a live run, every event "
                     f"checked", fontsize=9)
        fig.tight_layout()
        return [save_figure(fig, expdir.figure(FIGURE))]

    @staticmethod
    def _draw_streams(axes, rows: pd.DataFrame) -> None:
        """The streams sweep: set-up and install, memory, and the entries the switch took, against streams."""
        for target, part in rows.groupby("target"):
            part = part.sort_values("streams")
            if "setup_s" in part:
                axes[0].plot(part["streams"], part["setup_s"], marker="o", ms=3, label=f"set-up, {target}")
            if "install_s" in part:
                axes[0].plot(part["streams"], part["install_s"], "--", marker="s", ms=3,
                             label=f"plan install, {target}")
            axes[1].plot(part["streams"], part["peak_memory_mib"], marker="o", ms=3, label=target)
            if "installed_entries" in part:
                # Both targets take the same entries: a wide pale line under a thin one keeps both in sight.
                axes[2].plot(part["streams"], part["installed_entries"], **TARGET_STYLE.get(target, {}),
                             label=f"entries installed, {target}")
        n = int(rows["N"].iloc[0])
        axes[0].set(xscale="log", yscale="log", xlabel="concurrent streams", ylabel="seconds",
                    title=f"set-up and plan install, streams of N = {n}")
        axes[1].set(xscale="log", xlabel="concurrent streams", ylabel="MiB (sum of PSS)",
                    title="peak memory of all the run's processes", ylim=(0, None))
        axes[2].set(xscale="log", yscale="log", xlabel="concurrent streams", ylabel="table entries",
                    title="entries installed\n(one operator set shared by all streams)")
        counts = sorted(int(c) for c in rows["streams"].unique())
        for ax in axes:
            ax.set_xticks(counts, [f"{c:,}" for c in counts])
            ax.minorticks_off()
