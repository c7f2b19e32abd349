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



def test_stress_repeats_the_experiments_it_is_given_after_the_scenarios(tmp_path, monkeypatch):
    """Scenarios first, then experiments, each into its own folder (an
    experiment apart from a scenario of the same name), and both in the
    stability file; a flaky experiment fails the whole."""
    import contextlib

    from testbed.experiments import stress as stress_module

    monkeypatch.setattr(stress_module, "CpuLoad", lambda workers, percent: contextlib.nullcontext())
    order = []

    def fake(kind, results):
        def repeat(name, times, folder):
            order.append((kind, name, folder.name))
            stability = Stability(name)
            for ok in results[:times]:
                stability.add({"ok": ok}, None, 1.0)
            return stability
        return repeat

    report = stress_module.stress(tmp_path, 0, 2, ["p4ss"], [], 50, fake("scenario", [True, True]), lambda _: None,
                                  setup={"quick": True}, experiments=["p4ss", "elastic"],
                                  repeat_experiment=fake("experiment", [True, False]))
    assert order == [("scenario", "p4ss", "p4ss"), ("experiment", "p4ss", "experiment-p4ss"),
                     ("experiment", "elastic", "experiment-elastic")]
    saved = json.loads((tmp_path / "stability.json").read_text())
    assert list(saved["experiments"]) == ["p4ss", "elastic"] and saved["scenarios"]["p4ss"]["ok"]
    assert not saved["experiments"]["elastic"]["ok"] and not report.ok
    assert "| elastic | `ok` | 1 of 2 | FLAKY |" in (tmp_path / "stability.md").read_text()


def test_stress_refuses_an_unknown_experiment_before_it_loads_the_machine(tmp_path):
    result = CliRunner().invoke(main, ["stress", "--suite-runs", "0", "--experiment", "nosuch",
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "--experiment nosuch: no experiments/nosuch.yaml" in result.stderr
    assert not (tmp_path / "out").exists()
