"""Every shipped experiment at its full size, through everything that needs no network.

The integration tests run the quick variants; a full-size parameter that the
code cannot plan (more operators than an address pool holds, a scenario that
no longer validates) would otherwise first fail in a user's ``make figures``.
"""
from __future__ import annotations

from functools import cache

import pytest

from testbed.experiments import kind_class
from testbed.experiments.base import Settings, all_experiments, load_experiment
from testbed.experiments.resources import N_STREAMS

pytestmark = pytest.mark.unit


@cache
def full_size(stem: str):
    """An experiment file's full-size parameters and what they would install (the sweep takes ~20 s)."""
    path = next(p for p in all_experiments() if p.stem == stem)
    spec, params = load_experiment(path, Settings(quick=False))
    return params, kind_class(spec.kind).installs(params)


@pytest.mark.parametrize("stem", [p.stem for p in all_experiments()])
def test_full_size_plans(stem):
    _params, installs = full_size(stem)
    assert installs, f"{stem}: nothing would be installed"


def test_resources_sweep_reaches_its_largest_sizes():
    """The figure's range: every N and stream count of the file has its row."""
    params, rows = full_size("s4resources")
    assert {r["N"] for r in rows["by_n"]} == set(params.n_sweep)
    assert {r["streams"] for r in rows["by_streams"]} == set(params.stream_sweep)
    assert max(params.n_sweep) >= 1024 and max(params.stream_sweep) == N_STREAMS
    largest = [r for r in rows["by_n"] if r["N"] == max(params.n_sweep)]
    assert all(r["entries"] > 0 for r in largest) and max(r["multicast_ports"] for r in largest) > 0


def test_s4scale_stretches_to_every_16_bit_stream_id():
    """The stretch point: 65,536 streams, two entries each over one operator set."""
    params, installs = full_size("s4scale")
    cost = installs[f"streams-{params.stretch_streams}"]
    assert params.stretch_streams == N_STREAMS
    assert cost["window_spec"] == cost["operator_count"] == N_STREAMS and cost["multicast_groups"] <= 2 * 64
