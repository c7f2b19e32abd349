"""Figures, drawn from raw data only, so they can always be redrawn.

A run's figures (``plot_run``): ``load.png``, events per operator per
stream, like S4's Fig. 6; ``latency.png``; ``analysis.png`` from Spark's
summary; ``result_latency.png``, each window's result latency over the
run.  A scenario set's figure (``plot_experiment``) compares its runs; the
other experiment kinds draw their own (``testbed.experiments``) with
``save_figure``.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from testbed.rundir import RunDir, RunDirError  # noqa: E402

#: Beyond this many streams a figure shows them summed (or pooled), in one
#: bar or curve: a legend of 1,000 streams is neither readable nor quick to draw.
MAX_STREAMS_SHOWN = 12
#: Points of a latency CDF actually drawn; more only cost time.
CDF_POINTS = 2000


def legend_below(ax, entries: int) -> None:
    """The streams' legend under the axes: inside, it covered the last operators' bars."""
    ax.legend(title="stream", fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=min(entries, 4))


def load_table(rundir: RunDir) -> pd.DataFrame:
    """Events received per (operator, stream), operators in topology order."""
    run = rundir.read_record()
    deliveries = pd.read_parquet(rundir.deliveries, columns=["stream", "operator"])
    counts = deliveries.groupby(["operator", "stream"]).size().unstack(fill_value=0)
    order = [h for h in run.operator_hosts]
    counts = counts.reindex(order, fill_value=0)
    if len(counts.columns) > MAX_STREAMS_SHOWN:
        return counts.sum(axis=1).to_frame(f"all {len(counts.columns)} streams")
    counts.columns = [run.streams[str(c)].get("name") or str(c) for c in counts.columns]
    return counts


def plot_load(rundir: RunDir) -> Path:
    counts = load_table(rundir)
    run = rundir.read_record()
    fig, ax = plt.subplots(figsize=(7, 4))
    if counts.columns.empty:        # every operator failed, or every event was lost, before one arrived
        _say_nothing_arrived(ax)
    else:
        counts.plot.bar(ax=ax, width=0.8, rot=0, legend=False)
        legend_below(ax, len(counts.columns))
    ax.set_xlabel("operator instance (host)")
    ax.set_ylabel("events received")
    ax.set_title(f"{run.name}: load per operator ({run.target} target)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out = rundir.figure("load")
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def latency_table(rundir: RunDir) -> pd.DataFrame:
    """Delivery latency (receive - send, microseconds) of every delivered copy."""
    sources = pd.read_parquet(rundir.sources, columns=["stream", "seq", "send_ns"])
    deliveries = pd.read_parquet(rundir.deliveries, columns=["stream", "seq", "recv_ns"])
    joined = deliveries.merge(sources, on=["stream", "seq"])
    return joined.assign(latency_us=(joined["recv_ns"] - joined["send_ns"]) / 1000.0)[["stream", "latency_us"]]


def plot_latency(rundir: RunDir) -> Path:
    """CDF of delivery latency per stream (source send to operator socket)."""
    run = rundir.read_record()
    lat = latency_table(rundir)
    fig, ax = plt.subplots(figsize=(7, 4))
    streams = lat["stream"].nunique()
    groups = lat.groupby("stream") if streams <= MAX_STREAMS_SHOWN else [(None, lat)]
    for sid, part in groups:
        values = np.sort(part["latency_us"].to_numpy())
        points = np.unique(np.linspace(0, len(values) - 1, min(len(values), CDF_POINTS)).astype(int))
        label = f"all {streams} streams" if sid is None else run.streams[str(sid)].get("name") or str(sid)
        ax.plot(values[points], (points + 1) / len(values), label=label)
    if lat.empty:
        _say_nothing_arrived(ax)
    else:
        ax.set_xscale("log")
        ax.legend(title="stream")
    return _save_axes(fig, ax, rundir.figure("latency"), "delivery latency (us, source send to operator receive)",
                      "fraction of deliveries", f"{run.name}: latency ({run.target} target)")


def _save_axes(fig, ax, out: Path, xlabel: str, ylabel: str, title: str) -> Path:
    """Label and grid a one-axes figure, write it to ``out`` and close it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def _say_nothing_arrived(ax) -> None:
    ax.text(0.5, 0.5, "no event reached an operator (see testbed check)", ha="center", va="center",
            transform=ax.transAxes)


def plot_analysis(rundir: RunDir) -> Path:
    """Spark's summary (spark/analysis.json): windows per operator, window
    completeness and latency percentiles per stream.  The tables are small;
    the aggregation over the raw events was done on Spark."""
    run = rundir.read_record()
    analysis = json.loads(rundir.spark_analysis.read_text())
    name = lambda sid: run.streams[str(sid)].get("name") or str(sid)  # noqa: E731
    load = pd.DataFrame(analysis["load"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    windows = load.pivot_table(index="operator", columns="stream", values="windows", fill_value=0)
    windows = windows.reindex(run.operator_hosts, fill_value=0).rename(columns=name)
    windows.plot.bar(ax=axes[0], rot=0, legend=False)
    axes[0].set(title="windows computed per operator", xlabel="operator instance (host)", ylabel="windows")
    if len(windows.columns) > 1:
        legend_below(axes[0], len(windows.columns))
    comp = pd.DataFrame(analysis["completeness"]).set_index("stream")
    axes[1].bar([name(s) for s in comp.index], comp["complete"] / comp["windows"])
    axes[1].set(ylim=(0, 1.05), title="complete windows", xlabel="stream",
                ylabel="fraction of the reference's windows")
    plot_percentiles(axes[2], pd.DataFrame(analysis["latency_us"]).set_index("stream").rename(index=name))
    fig.suptitle(f"{run.name} on {run.target}: Spark analysis ({analysis['spark_master']})")
    return save_figure(fig, rundir.figure("analysis"))


#: The latency percentiles ``plot_percentiles`` draws, each with its own marker.
PERCENTILES = {"p50": "o", "p90": "s", "p99": "^"}


def plot_percentiles(ax, lat: pd.DataFrame) -> None:
    """Each stream's latency percentiles as markers joined by a line, on a log
    axis: bars on a log axis start at an arbitrary floor, so a p50 far below
    the p99 drew as a stub or not at all; a marker shows every value."""
    x = np.arange(len(lat))
    ax.vlines(x, lat[list(PERCENTILES)].min(axis=1), lat[list(PERCENTILES)].max(axis=1), color="lightgrey")
    for column, marker in PERCENTILES.items():
        ax.plot(x, lat[column], marker, label=column)
    ax.set_xticks(x, [str(s) for s in lat.index])
    ax.set_xlim(-0.5, len(lat) - 0.5)
    ax.set_yscale("log")
    ax.margins(y=0.15)
    ax.set(title="delivery latency", xlabel="stream", ylabel="µs (source send to operator receive, log)")
    ax.grid(alpha=0.3, which="both", axis="y")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=len(PERCENTILES))


def result_latency_table(rundir: RunDir) -> pd.DataFrame:
    """Per window the live merger emitted as complete: when (seconds since the
    run's first send) and its result latency (seconds from the send of the
    event that completed it to its emission)."""
    sources = pd.read_parquet(rundir.sources, columns=["stream", "seq", "send_ns"])
    windows = pd.read_parquet(rundir.windows)
    if "emitted_by" not in windows.columns:          # a run from before the live merger
        return pd.DataFrame(columns=["stream", "window", "at_s", "latency_s"])
    done = (windows[(windows["emitted_by"] == "complete") & (windows["completing_seq"] >= 0)]
            .drop_duplicates(["stream", "window"]).rename(columns={"completing_seq": "seq"}))
    joined = done.merge(sources, on=["stream", "seq"])
    start = sources["send_ns"].min()
    return pd.DataFrame({"stream": joined["stream"], "window": joined["window"],
                         "at_s": (joined["emitted_ns"] - start) / 1e9,
                         "latency_s": (joined["emitted_ns"] - joined["send_ns"]) / 1e9})


def plot_result_latency(rundir: RunDir) -> Path:
    """Result latency of every window over the run, per stream, with the last send marked."""
    run = rundir.read_record()
    table = result_latency_table(rundir)
    sources = pd.read_parquet(rundir.sources, columns=["send_ns"])
    fig, ax = plt.subplots(figsize=(7, 4))
    streams = table["stream"].nunique()
    groups = table.groupby("stream") if streams <= MAX_STREAMS_SHOWN else [(None, table)]
    for sid, part in groups:
        label = f"all {streams} streams" if sid is None else run.streams[str(sid)].get("name") or str(sid)
        ax.plot(part["at_s"], part["latency_s"], ".", ms=3, label=label)
    if table.empty:
        ax.text(0.5, 0.5, "no window was emitted complete while the run went", ha="center", va="center",
                transform=ax.transAxes)
    else:
        ax.legend(title="stream")
    if len(sources):
        ax.axvline((sources["send_ns"].max() - sources["send_ns"].min()) / 1e9, color="grey", ls="--", lw=1,
                   label="last event sent")
    return _save_axes(fig, ax, rundir.figure("result_latency"), "emitted at (s since the first event was sent)",
                      "result latency (s)", f"{run.name}: window results over the run ({run.target} target)")


def plot_run(rundir: RunDir) -> list[Path]:
    """Every figure a run has data for."""
    figures = [plot_load(rundir), plot_latency(rundir)]
    if rundir.spark_analysis.exists():
        figures.append(plot_analysis(rundir))
    if rundir.windows.exists():
        figures.append(plot_result_latency(rundir))
    return figures


# ---------------------------------------------------------------------------
# experiments: one figure over several runs
# ---------------------------------------------------------------------------
def plot_load_grid(runs: dict[str, RunDir], ax_grid) -> None:
    for ax, (name, rundir) in zip(ax_grid.flat, runs.items()):
        table = load_table(rundir)
        table.plot.bar(ax=ax, rot=0, legend=False)
        if len(table.columns) > 1:
            # Beside the panel: a small panel has no room under its axis label.
            ax.legend(title="stream", fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
        ax.set_title(name)
        ax.set_xlabel("operator instance (host)")
        ax.set_ylabel("events received")
    for ax in list(ax_grid.flat)[len(runs):]:
        ax.axis("off")


def lateness_table(runs: dict[str, RunDir]) -> pd.DataFrame:
    """Per run of one time stream: its lateness in slides, the events dropped as
    too late, and the windows that differ from the centralized reference."""
    rows = []
    for name, rundir in runs.items():
        record, verdicts = rundir.read_record(), rundir.read_verdicts()
        if verdicts is None:
            raise RunDirError(f"{rundir.verdicts}: missing (the run was never checked: testbed check)")
        for sid, stream in record.streams.items():
            window = stream["window"]
            frames, windows = verdicts.check[sid], verdicts.window_check.get(sid)
            rows.append({"run": name, "lateness": window["lateness"],
                         "lateness_slides": window["lateness"] / window["slide"],
                         "too_late": frames.undelivered_by_design.get("too_late", 0),
                         "sent": frames.sent,
                         "windows": windows.reference_windows if windows else None,
                         "windows_differing": windows.affected_by_lateness if windows else None,
                         "windows_check_ok": windows.ok if windows else None})
    return pd.DataFrame(rows)


def plot_lateness(runs: dict[str, RunDir], ax_pair) -> pd.DataFrame:
    table = lateness_table(runs)
    x = [f"L = {v:g}\n({s:.2g} slides)" for v, s in zip(table["lateness"], table["lateness_slides"])]
    ax_pair[0].bar(x, table["too_late"])
    ax_pair[0].set_ylabel("events dropped as too late")
    ax_pair[1].bar(x, table["windows_differing"].fillna(0))
    ax_pair[1].set_ylabel("windows differing from the reference")
    for ax, col, total in zip(ax_pair, ("too_late", "windows_differing"), ("sent", "windows")):
        for i, (v, of) in enumerate(zip(table[col].fillna(0), table[total].fillna(0))):
            ax.text(i, v, f"{v:.0f}\nof {of:.0f}", ha="center", va="bottom", fontsize=7)
        ax.margins(y=0.2)
        ax.tick_params(axis="x", labelsize=8)
    return table


def plot_experiment(figure: str, title: str, runs: dict[str, RunDir], out: Path) -> Path:
    """``load``: one load panel per run (S4 Fig. 6, P4SS Fig. 5); ``lateness``:
    too-late events and differing windows against the allowed lateness."""
    if figure == "lateness":
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        plot_lateness(runs, axes)
    elif figure == "load":
        cols = min(4, len(runs))
        rows = (len(runs) + cols - 1) // cols
        # At least 7 inches wide, so the title fits over a single run's panel.
        fig, axes = plt.subplots(rows, cols, figsize=(max(3.2 * cols, 7), 2.8 * rows + 0.4), squeeze=False)
        plot_load_grid(runs, axes)
    else:
        raise ValueError(f"unknown experiment figure {figure!r}")
    # Wrapped to the figure's width (about ten characters an inch at this size): a long
    # title over two panels ran past both edges of the image.
    fig.suptitle(textwrap.fill(title, width=int(fig.get_figwidth() * 10)))
    return save_figure(fig, out)


def save_figure(fig, out: Path) -> Path:
    """Lay out, write at the testbed's one resolution, and free the figure."""
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
