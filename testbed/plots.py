"""Figures of a run, drawn from its raw data only (so they can be redrawn).

``load.png`` shows events per operator per stream, like S4's Fig. 6.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def load_table(run_dir: Path) -> pd.DataFrame:
    """Events received per (operator, stream), operators in topology order."""
    run = json.loads((run_dir / "run.json").read_text())
    deliveries = pd.read_parquet(run_dir / "deliveries.parquet", columns=["stream", "operator"])
    counts = deliveries.groupby(["operator", "stream"]).size().unstack(fill_value=0)
    order = [h for h in run["operator_hosts"]]
    counts = counts.reindex(order, fill_value=0)
    counts.columns = [run["streams"][str(c)].get("name") or str(c) for c in counts.columns]
    return counts


def plot_load(run_dir: Path) -> Path:
    counts = load_table(run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    fig, ax = plt.subplots(figsize=(7, 4))
    counts.plot.bar(ax=ax, width=0.8, rot=0)
    ax.set_xlabel("operator instance (host)")
    ax.set_ylabel("events received")
    ax.set_title(f"{run['name']}: load per operator ({run['target']} target)")
    ax.legend(title="stream")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out = run_dir / "load.png"
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def latency_table(run_dir: Path) -> pd.DataFrame:
    """Delivery latency (receive - send, microseconds) of every delivered copy."""
    sources = pd.read_parquet(run_dir / "sources.parquet", columns=["stream", "seq", "send_ns"])
    deliveries = pd.read_parquet(run_dir / "deliveries.parquet", columns=["stream", "seq", "recv_ns"])
    joined = deliveries.merge(sources, on=["stream", "seq"])
    return joined.assign(latency_us=(joined["recv_ns"] - joined["send_ns"]) / 1000.0)[["stream", "latency_us"]]


def plot_latency(run_dir: Path) -> Path:
    """CDF of delivery latency per stream (source send to operator socket)."""
    run = json.loads((run_dir / "run.json").read_text())
    lat = latency_table(run_dir)
    fig, ax = plt.subplots(figsize=(7, 4))
    for sid, part in lat.groupby("stream"):
        values = part["latency_us"].sort_values().to_numpy()
        label = run["streams"][str(sid)].get("name") or str(sid)
        ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("delivery latency (us, source send to operator receive)")
    ax.set_ylabel("fraction of deliveries")
    ax.set_title(f"{run['name']}: latency ({run['target']} target)")
    ax.legend(title="stream")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = run_dir / "latency.png"
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_analysis(run_dir: Path) -> Path:
    """Spark's summary (spark/analysis.json): windows per operator, window
    completeness and latency percentiles per stream.  The tables are small;
    the aggregation over the raw events was done on Spark."""
    run = json.loads((run_dir / "run.json").read_text())
    analysis = json.loads((run_dir / "spark" / "analysis.json").read_text())
    name = lambda sid: run["streams"][str(sid)].get("name") or str(sid)  # noqa: E731
    load = pd.DataFrame(analysis["load"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    windows = load.pivot_table(index="operator", columns="stream", values="windows", fill_value=0)
    windows = windows.reindex(run["operator_hosts"], fill_value=0).rename(columns=name)
    windows.plot.bar(ax=axes[0], rot=0)
    axes[0].set_title("windows computed per operator")
    axes[0].set_ylabel("windows")
    comp = pd.DataFrame(analysis["completeness"]).set_index("stream")
    axes[1].bar([name(s) for s in comp.index], comp["complete"] / comp["windows"])
    axes[1].set_ylim(0, 1.05)
    axes[1].set_title("complete windows (fraction of reference)")
    lat = pd.DataFrame(analysis["latency_us"]).set_index("stream")[["p50", "p90", "p99"]]
    lat.index = [name(s) for s in lat.index]
    lat.plot.bar(ax=axes[2], rot=0, logy=True)
    axes[2].set_title("delivery latency (us)")
    fig.suptitle(f"{run['name']} on {run['target']}: Spark analysis ({analysis['spark_master']})")
    fig.tight_layout()
    out = run_dir / "analysis.png"
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_run(run_dir: Path) -> list[Path]:
    """Every figure a run has data for."""
    figures = [plot_load(run_dir), plot_latency(run_dir)]
    if (run_dir / "spark" / "analysis.json").exists():
        figures.append(plot_analysis(run_dir))
    return figures
