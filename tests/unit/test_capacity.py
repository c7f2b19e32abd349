"""How a capacity is read from rate points (testbed.experiments.capacity), on
a scripted switch: which offered rates hold, and which run the figure shows."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from testbed.experiments.batching import at_capacity, ratios
from testbed.experiments.capacity import Calibration, RatePoints


class ScriptedPoints(RatePoints):
    """Rate points whose runs are sustained as ``verdicts(offered, repeat)``
    says, each achieving ``offered - repeat`` events/s, instead of emulation runs."""

    def __init__(self, tmp_path, verdicts):
        kind = SimpleNamespace(settings=SimpleNamespace(switch_cpu=None), log=lambda message: None)
        super().__init__(kind, tmp_path / "points.parquet", seconds=1.0, min_events=10)
        self.verdicts = verdicts

    def point(self, target, name, offered, phase, fraction=None, repeat=0):
        row = {"target": target, "scenario": name, "batch": 8, "offered": offered, "repeat": repeat,
               "held": None, "sustained": self.verdicts(offered, repeat), "input_rate": offered - repeat}
        self.rows.append(row)
        return row


def test_one_run_per_rate_doubles_then_bisects(tmp_path):
    points = ScriptedPoints(tmp_path, lambda offered, repeat: offered <= 5000)
    found = points.capacity("model", Calibration(start=1000, max_rate=64000, refine=2))
    # 1000, 2000, 4000 hold; 8000 fails; then 6000 fails and 5000 holds
    assert [r["offered"] for r in points.rows] == [1000, 2000, 4000, 8000, 6000, 5000]
    assert found == 5000 and [r["held"] for r in points.rows] == [True, True, True, False, False, True]
    assert pd.read_parquet(tmp_path / "points.parquet")["held"].tolist() == [r["held"] for r in points.rows]


def test_a_rate_holds_when_most_of_its_runs_are_sustained(tmp_path):
    # At 8000 one run of three fails (it still holds); at 16000 two of three fail.
    script = {(8000, 1): False, (16000, 0): False, (16000, 2): False}
    points = ScriptedPoints(tmp_path, lambda offered, repeat: script.get((offered, repeat), offered < 20000))
    found = points.capacity("model", Calibration(start=8000, max_rate=64000, refine=0, repeats=3))
    assert [(r["offered"], r["held"]) for r in points.rows] == [(8000, True)] * 3 + [(16000, False)] * 3
    # the sustained runs at 8000 achieved 8000 and 7998: the lower median is 7998
    assert found == 7998


def test_the_runs_at_a_rate_stop_once_the_majority_is_decided(tmp_path):
    points = ScriptedPoints(tmp_path, lambda offered, repeat: offered <= 1000)
    assert points.held("model", "cbtw1", 1000, 5)["offered"] == 1000       # 3 of 5 sustained: held
    assert points.held("model", "cbtw1", 2000, 5) is None                  # 3 of 5 lost: not held
    assert [(r["offered"], r["held"]) for r in points.rows] == [(1000, True)] * 3 + [(2000, False)] * 3


def test_a_lucky_run_at_a_rate_that_did_not_hold_is_not_the_capacity(tmp_path):
    script = {(8000, 1): False, (16000, 0): False, (16000, 2): False}
    points = ScriptedPoints(tmp_path, lambda offered, repeat: script.get((offered, repeat), offered < 20000))
    found = points.capacity("model", Calibration(start=8000, max_rate=64000, refine=0, repeats=3))
    (best,) = at_capacity(pd.DataFrame(points.rows)).itertuples()
    assert best.offered == 8000 and best.input_rate == found      # not 16000's one sustained run
    single = pd.DataFrame([{"target": "model", "scenario": "x", "batch": 1, "offered": o, "sustained": s,
                            "input_rate": o - 1} for o, s in ((1000, True), (2000, True), (4000, False))])
    assert at_capacity(single)["input_rate"].tolist() == [1999]    # rows without held: one run per rate


def test_no_rate_that_holds_is_an_error(tmp_path):
    points = ScriptedPoints(tmp_path, lambda offered, repeat: repeat == 0)
    with pytest.raises(RuntimeError, match="not sustained even at 1000"):
        points.capacity("model", Calibration(start=1000, repeats=3))


def test_ratios_against_unbatched_and_against_k1():
    got = ratios({"bmv2": {"cbtw1": {"0": 20000.0, "1": 19000.0, "8": 100000.0}, "cbsw1": {"0": 1.0}}})
    assert got["bmv2"]["cbtw1"] == {"k8_over_unbatched": 5.0, "k1_over_unbatched": 0.95, "k8_over_k1": 5.26}
    assert got["bmv2"]["cbsw1"] == {"k8_over_unbatched": None, "k1_over_unbatched": None, "k8_over_k1": None}


@pytest.mark.parametrize("capacity, start, max_rate, offered, found", [
    # doubling overshoots the ceiling: the ceiling itself is offered, and held
    (1e9, 30_000, 100_000, [30_000, 60_000, 100_000], 100_000),
    # the ceiling fails: bisection between the last held and it
    (70_000, 30_000, 100_000, [30_000, 60_000, 100_000, 80_000, 70_000], 70_000),
    # the start fails: bisection between nothing and it
    (10_000, 30_000, 100_000, [30_000, 15_000, 7_500], 7_500),
    # nothing holds at all
    (0, 30_000, 100_000, [30_000, 15_000, 7_500], None),
])
def test_the_search_doubles_up_to_the_ceiling_itself_then_bisects(capacity, start, max_rate, offered, found):
    from testbed.experiments.capacity import highest_held
    asked = []

    def held(rate):
        asked.append(rate)
        return {"rate": rate} if rate <= capacity else None

    best, failed = highest_held(held, start, max_rate, refine=2)
    assert asked == offered
    assert (best or {}).get("rate") == found
    assert failed == (None if capacity >= max_rate else min(r for r in asked if r > capacity))
