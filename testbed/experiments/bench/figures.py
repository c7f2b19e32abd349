"""The bench's figures, one per part, drawn from its raw tables alone (``testbed plot`` redraws them)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from testbed.analysis.plots import plt, save_figure

PLAN_KEYS = ("N", "size", "slide", "seconds")


def draw_pipeline(rows: pd.DataFrame, out: Path) -> Path:
    rates = rows.dropna(subset=["decisions_per_s"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    rates.set_index("spec")[["decisions_per_s", "frames_per_s"]].plot.barh(ax=ax)
    ax.set(xlabel="per second, one core", ylabel="", title="embedded target's pipeline, in process")
    return save_figure(fig, out)


def draw_lateness(rows: pd.DataFrame, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(rows["event"], rows["ns_per_event"])
    ax.invert_yaxis()
    ax.set(xlabel="ns per event (ingress and replication)", title="model: an event in order against late ones")
    return save_figure(fig, out)


def draw_plan(rows: pd.DataFrame, out: Path) -> Path:
    tables = [c for c in rows.columns if c not in PLAN_KEYS and not c.startswith("multicast")]
    totals = rows.assign(entries=rows[tables].fillna(0).sum(axis=1))
    fig, (entries, groups) = plt.subplots(1, 2, figsize=(10, 3.5))
    for (size, slide), part in totals.groupby(["size", "slide"]):
        entries.plot(part["N"], part["entries"], marker="o", label=f"n={size} slide={slide}")
        groups.plot(part["N"], part["multicast_groups"], marker="o", label=f"n={size} slide={slide}")
    entries.set(xlabel="N (operators)", ylabel="table entries", xscale="log", yscale="log")
    groups.set(xlabel="N (operators)", ylabel="multicast groups", xscale="log")
    entries.legend(fontsize=8)
    fig.suptitle("what one stream's plan costs as N grows")
    return save_figure(fig, out)


def draw_late_in_switch(rows: pd.DataFrame, out: Path) -> Path:
    events = sorted(rows["event"].unique())
    targets = sorted(rows["target"].unique())
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for i, target in enumerate(targets):
        part = rows[rows["target"] == target]
        data = [part.loc[part["event"] == e, "latency_ns"] / 1000 for e in events]
        positions = [k + (i - (len(targets) - 1) / 2) * 0.35 for k in range(len(events))]
        box = ax.boxplot(data, positions=positions, widths=0.3, showfliers=False, patch_artist=True)
        for patch in box["boxes"]:
            patch.set_facecolor(f"C{i}")
        ax.plot([], [], color=f"C{i}", lw=6, label=target)
    ax.set_xticks(range(len(events)), events, fontsize=8)
    ax.set(ylabel="time in the switch (us)", yscale="log", title="in-order and late events, every copy")
    ax.legend()
    return save_figure(fig, out)


def draw_reconfiguration(rows: pd.DataFrame, out: Path) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, column in zip(axes, ("install_ms", "arm_to_boundary_ms", "arm_to_seen_ms")):
        for i, (target, part) in enumerate(rows.groupby("target")):
            ax.plot(range(1, len(part) + 1), part[column], marker="o", color=f"C{i}", label=target)
        ax.set(xlabel="change", ylabel=column.replace("_", " "))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].legend()
    fig.suptitle("changing a sliding stream's operators while its events flow")
    return save_figure(fig, out)


def draw_emulation(rows: pd.DataFrame, out: Path) -> Path:
    fig, (lost, latency) = plt.subplots(1, 2, figsize=(10, 3.5))
    lost.plot(rows["offered_rate"], rows["lost"] / rows["expected_deliveries"], marker="o")
    lost.set(xlabel="offered events/s", ylabel="share of copies lost")
    for q in ("p50", "p99"):
        latency.plot(rows["offered_rate"], rows[f"latency_us_{q}"], marker="o", label=q)
    latency.set(xlabel="offered events/s", ylabel="delivery latency (us)", yscale="log")
    latency.legend()
    fig.suptitle("embedded target in Mininet, one sliding stream")
    return save_figure(fig, out)


def draw_scale(rows: pd.DataFrame, out: Path) -> Path:
    fig, (memory, setup) = plt.subplots(1, 2, figsize=(10, 3.5))
    rows.set_index("name")[["estimated_memory_mib", "peak_memory_mib_pss"]].plot.bar(ax=memory, rot=0)
    memory.set(xlabel="", ylabel="MiB")
    if "setup_s" in rows:
        rows.set_index("name")[["setup_s"]].plot.bar(ax=setup, rot=0, legend=False)
    setup.set(xlabel="", ylabel="setup (s): phases before the stream")
    fig.suptitle("scale runs: memory of all their processes, and their setup time")
    return save_figure(fig, out)


#: bmv2's threads in the order a frame passes them (bench.instructions.THREAD_FUNCTIONS).
THREAD_ORDER = ("receive", "ingress", "egress", "transmit")


def draw_instructions(rows: pd.DataFrame, out: Path) -> Path:
    """Each program and workload's instructions per event as a bar, cut into
    what each of bmv2's threads spent (its egress threads together) where the
    bench counted them apart; the busiest single thread, which bounds a
    blast's rate, is outlined."""
    labels = [f"{program}, {workload}" for program, workload in zip(rows["program"], rows["workload"])]
    fig, ax = plt.subplots(figsize=(10, 0.4 * len(rows) + 1.5))
    threads = rows["threads_per_event"] if "threads_per_event" in rows else pd.Series([None] * len(rows))
    split = whole = False
    for y, (total, counted) in enumerate(zip(rows["instructions_per_event"], threads)):
        counted = {name: cost for name, cost in (counted or {}).items() if cost is not None and pd.notna(cost)}
        if not counted:
            ax.barh(y, total, color="0.6")
            whole = True
            continue
        busiest = max((name for name in counted if name.split()[0] in THREAD_ORDER), key=lambda name: counted[name],
                      default=None)
        left = 0.0
        for i, step in enumerate(THREAD_ORDER):
            for name in sorted(name for name in counted if name == step or name.startswith(f"{step} ")):
                ax.barh(y, counted[name], left=left, color=f"C{i}", edgecolor="black" if name == busiest else "none",
                        linewidth=1.5)
                left += counted[name]
        ax.barh(y, sum(cost for name, cost in counted.items() if name.split()[0] not in THREAD_ORDER), left=left,
                color="0.8")
        split = True
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="instructions per event (the busiest thread outlined)",
           title="bmv2: instructions per event, by the thread that spent them")
    if split:
        ax.legend(handles=[Patch(color=f"C{i}", label=step) for i, step in enumerate(THREAD_ORDER)]
                  + [Patch(color="0.8", label="other threads")]
                  + ([Patch(color="0.6", label="not counted apart")] if whole else []),
                  fontsize=8, loc="lower right")
    return save_figure(fig, out)


#: part -> how its figure is drawn; the oracle's one number needs none.
FIGURES: dict[str, Callable[[pd.DataFrame, Path], Path]] = {
    "pipeline": draw_pipeline, "lateness": draw_lateness, "plan": draw_plan,
    "late_in_switch": draw_late_in_switch, "reconfiguration": draw_reconfiguration,
    "emulation": draw_emulation, "scale": draw_scale, "instructions": draw_instructions,
}
