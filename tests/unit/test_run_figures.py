"""A run's Spark figure (``analysis.png``): no legend over the data, every
percentile visible, units on the axes (issue 44)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from testbed.analysis import plots

pytestmark = pytest.mark.unit

OPERATORS = [f"h{i}" for i in range(2, 8)]


def analysis(streams: list[int]) -> dict:
    # The last operator's bars are the tallest: where a legend inside the axes went.
    load = [{"operator": op, "stream": s, "windows": 20 + 10 * i} for i, op in enumerate(OPERATORS)
            for s in streams]
    return {"spark_master": "local[2]", "load": load,
            "completeness": [{"stream": s, "windows": 100, "complete": 100} for s in streams],
            # p50 three orders of magnitude below p99: a bar on a log axis lost it.
            "latency_us": [{"stream": s, "p50": 90.0, "p90": 4_000.0, "p99": 95_000.0} for s in streams]}


@pytest.fixture
def drawn(rundir, monkeypatch):
    def draw(streams):
        rundir.spark_analysis.parent.mkdir(parents=True, exist_ok=True)
        rundir.spark_analysis.write_text(json.dumps(analysis(streams)))
        record = SimpleNamespace(name="cbsw1", target="model", operator_hosts=OPERATORS,
                                 streams={str(s): {"name": f"s{s}"} for s in streams})
        monkeypatch.setattr(type(rundir), "read_record", lambda self: record)
        figures = []
        monkeypatch.setattr(plots, "save_figure", lambda fig, out: figures.append(fig) or out)
        plots.plot_analysis(rundir)
        fig = figures[0]
        fig.canvas.draw()
        return fig
    return draw


def test_the_legend_covers_no_bar(drawn):
    fig = drawn([1, 2, 3])
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    bars = [p.get_window_extent() for p in ax.patches]
    assert len(bars) == 3 * len(OPERATORS)
    assert not any(legend.overlaps(bar) for bar in bars)


def test_every_percentile_is_drawn_inside_the_axis(drawn):
    fig = drawn([1, 2])
    ax = fig.axes[2]
    low, high = ax.get_ylim()
    lines = {line.get_label(): line for line in ax.get_lines()}
    for name, value in (("p50", 90.0), ("p90", 4_000.0), ("p99", 95_000.0)):
        assert list(lines[name].get_ydata()) == [value, value]
        assert low < value < high


def test_every_axis_has_its_unit(drawn):
    fig = drawn([1])
    for ax in fig.axes:
        assert ax.get_ylabel() and ax.get_xlabel()
    assert "µs" in fig.axes[2].get_ylabel()
