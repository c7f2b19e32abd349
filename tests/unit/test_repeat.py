"""The repeat harness and make stress: verdicts counted over repetitions, a busy machine made and unmade."""
import json

import pytest
from click.testing import CliRunner

from testbed.cli import main
from testbed.experiments.repeat import Stability, repeat_experiment, verdict_leaves
from testbed.experiments.stress import StressReport, SuiteRun, parse_pytest


def test_every_ok_of_an_experiment_is_a_verdict():
    record = {"ok": False, "params": {"runs": ["cbsw1"]},
              "ours": {"runs": {"cbsw1": {"ok": True, "lost": 0}, "tbsw1": {"ok": False}},
                       "points": [{"rate": 1, "ok": True}]}}
    assert verdict_leaves(record) == {"ok": False, "ours.runs.cbsw1.ok": True, "ours.runs.tbsw1.ok": False,
                                      "ours.points[0].ok": True}
    verdicts = {"ok": True, "check": {"291": {"ok": True, "sent": 2000}}, "window_check": {}}
    assert verdict_leaves(verdicts) == {"ok": True, "check.291.ok": True}


def fake_experiment(outcomes):
    """A run_once that writes an experiment.json whose run a passes or fails as ``outcomes`` says, in turn."""
    calls = iter(outcomes)

    def run_once(out):
        a = next(calls)
        if a == "raise":
            raise RuntimeError("the switch died\nwith a long story")
        out.mkdir(parents=True)
        record = {"ok": a, "ours": {"runs": {"a": {"ok": a}, "b": {"ok": True}}}}
        (out / "experiment.json").write_text(json.dumps(record))
    return run_once


def test_a_verdict_that_passes_sometimes_is_flaky(tmp_path):
    stability = repeat_experiment("e", 3, tmp_path, fake_experiment([True, False, True]))
    rows = {row["verdict"]: row for row in stability.table()}
    assert rows["ours.runs.a.ok"]["passed"] == 2 and rows["ours.runs.a.ok"]["stable"] is False
    assert rows["ours.runs.b.ok"]["passed"] == 3 and rows["ours.runs.b.ok"]["stable"] is True
    assert not stability.ok
    table = (tmp_path / "stability.md").read_text()
    assert "| `ours.runs.a.ok` | 2 of 3 | FLAKY |" in table and "| `ours.runs.b.ok` | 3 of 3 | yes |" in table
    assert json.loads((tmp_path / "stability.json").read_text())["repetitions"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repeat-1", "repeat-2", "repeat-3", "stability.json",
                                                         "stability.md"]


def test_a_repetition_that_fails_to_finish_is_counted_and_the_next_runs(tmp_path):
    stability = repeat_experiment("e", 3, tmp_path, fake_experiment([True, "raise", True]))
    assert stability.errors == [None, "RuntimeError: the switch died with a long story", None]
    assert {row["verdict"]: row["outcomes"] for row in stability.table()}["ok"] == [True, None, True]
    assert not stability.ok
    assert repeat_experiment("e", 2, tmp_path / "again", fake_experiment([True, True])).ok


def test_an_interrupt_stops_the_repetitions(tmp_path):
    class Stop(Exception):
        pass

    def run_once(out):
        raise Stop()
    with pytest.raises(Stop):
        repeat_experiment("e", 5, tmp_path, run_once, fatal=(Stop,))
    assert not (tmp_path / "repeat-2").exists()


def test_repeat_names_one_experiment():
    result = CliRunner().invoke(main, ["experiment", "all", "--repeat", "2"])
    assert result.exit_code == 2 and "--repeat: name one experiment or scenario, not all" in result.stderr


def test_pytest_output_gives_counts_and_failed_tests():
    output = ("....F\n=========================== short test summary info ============================\n"
              "FAILED tests/integration/test_adaptation_runs.py::test_x[model] - assert 2 == 3\n"
              "SKIPPED [3] tests/x.py:4: no bmv2\n"
              "1 failed, 445 passed, 24 skipped, 2 errors in 1237.00s (0:20:37)\n")
    counts, failed = parse_pytest(output)
    assert counts == {"failed": 1, "passed": 445, "skipped": 24, "errors": 2}
    assert failed == ["tests/integration/test_adaptation_runs.py::test_x[model]"]


def test_the_stress_table_counts_suite_runs_and_scenario_verdicts():
    flaky = Stability("cbsw1")
    flaky.add({"ok": True}, None, 1.0)
    flaky.add({"ok": False}, None, 1.0)
    report = StressReport({"workers": 2, "percent": 50},
                          suite=[SuiteRun({"passed": 530}, [], 600, 0), SuiteRun({"passed": 529, "failed": 1},
                                                                                  ["t::x"], 620, 1)],
                          scenarios={"cbsw1": flaky})
    text = report.markdown()
    assert "## Test suite: passed 1 of 2 runs" in text and "| 2 | 529 | 1 | 0 | 10.3 | t::x |" in text
    assert "| cbsw1 | `ok` | 1 of 2 | FLAKY |" in text
    assert not report.ok

