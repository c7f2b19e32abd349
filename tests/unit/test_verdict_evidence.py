"""A check fails unless it has evidence (issue 46).

Every verdict ``testbed check`` gives rests on a file of the run: the
deliveries per stream on deliveries.parquet (and sources.parquet), the
windows on windows.parquet and its reference, the complex events on each
sink's record and Spark's reference.  A run written here
(``support.evidence``) passes; damaging any one piece of its evidence must
make the verdict that rests on it fail, or, for a file the record says the
run wrote, make the check refuse the run in one line.
"""
from __future__ import annotations

import math
from typing import Callable

import pandas as pd
import pytest
from click.testing import CliRunner

from support.evidence import OPERATORS, SINK, STREAM, write_checked_run
from support.records import record_of, switch_saw
from testbed.analysis.check import check_frames, compare_windows
from testbed.cli import main
from testbed.rundir import RunDir


def check(rundir: RunDir):
    return CliRunner().invoke(main, ["check", str(rundir.root)])


def edit(table: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[RunDir], None]:
    """A damage: ``change`` applied to one of the run's tables."""
    def damage(rundir: RunDir) -> None:
        path = getattr(rundir, table)
        change(pd.read_parquet(path)).to_parquet(path)
    return damage


def remove(table: str) -> Callable[[RunDir], None]:
    return lambda rundir: getattr(rundir, table).unlink()


def set_cell(row: int, column: str, value) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[df.index[row], column] = value
        return df
    return change


def other_operator(df: pd.DataFrame) -> pd.DataFrame:
    first = df.index[0]
    df.loc[first, "operator"] = next(op for op in OPERATORS if op not in set(df[df["seq"] == df.loc[first, "seq"]]
                                                                              ["operator"]))
    return df


# ---------------------------------------------------------------------------
# delivered is what deliveries.parquet holds
# ---------------------------------------------------------------------------
def lone_operator_killed(recorded: int, events: int = 2000):
    """Stream 7, every event to its one operator h2, which a schedule killed;
    h2 recorded its first ``recorded`` copies."""
    from support import topologies

    topo = topologies.build([topologies.stream(7, {"kind": "count", "size": 10, "slide": 10}, ["h2"],
                                               events=events)], 2)
    sources = pd.DataFrame({"stream": 7, "seq": range(events), "ts": range(events), "send_ns": range(events)})
    deliveries = pd.DataFrame({"stream": 7, "seq": range(recorded), "operator": "h2"})
    record = record_of({"7": topo.streams[0].record()}, switch=switch_saw(7, events, out=events),
                       adaptation={"failures": [{"host": "h2", "how": "kill", "at": 100e-9}]})
    return check_frames(record, sources, deliveries)[7]


def test_delivered_counts_the_copies_recorded_not_the_ones_excused():
    r = lone_operator_killed(recorded=100)
    assert (r.expected, r.delivered, r.lost_at_failed, r.missing) == (2000, 100, 1900, 0)
    assert r.ok          # h2 recorded every copy up to its failure: the rest is the failure's
    assert r.as_json()["delivered"] == 100


def test_a_stream_that_delivered_nothing_fails_whatever_explains_it():
    r = lone_operator_killed(recorded=0)
    assert (r.delivered, r.lost_at_failed) == (0, 2000)
    assert not r.ok
    assert "nothing delivered: 2000 copies expected, none recorded" in r.examples


def test_delivered_and_what_was_extra_or_twice_add_up_to_the_recorded_rows(tmp_path):
    from testbed.analysis.verdicts import frame_check

    rundir = write_checked_run(tmp_path / "r")
    d = pd.read_parquet(rundir.deliveries)
    stray = d.iloc[[0]].assign(operator="h4")           # seq 0 is in window 0 alone, h2's
    recorded = pd.concat([d.drop(index=d.index[3]), d.iloc[[5]], stray])
    recorded.to_parquet(rundir.deliveries)
    r = frame_check(rundir.read_record(), rundir)[STREAM]
    assert (r.delivered, r.missing, r.extra, r.duplicates) == (22, 1, 1, 1)
    assert r.delivered + r.extra + r.duplicates == len(recorded)


def test_check_fails_a_run_whose_every_operator_was_killed_before_recording(tmp_path):
    """All three operators failed and deliveries.parquet has no row: exit 1, not 0."""
    rundir = write_checked_run(tmp_path / "r", spark={})
    deliveries = pd.read_parquet(rundir.deliveries)
    deliveries.iloc[:0].to_parquet(rundir.deliveries)
    record = rundir.read_record()
    record.adaptation = {"failures": [{"host": op, "how": "kill", "at": 0.0} for op in OPERATORS]}
    rundir.write_record(record)
    result = check(rundir)
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"stream {STREAM}: FAIL sent=12 expected=23 delivered=0 ")


# ---------------------------------------------------------------------------
# a file the record says the run wrote is never silently missing
# ---------------------------------------------------------------------------
#: Files run.json says the run wrote: gone, the check refuses the run in one line naming the file.
PROMISED = ["sources", "deliveries", "windows", "windows_reference", "complex_events_reference"]


@pytest.mark.parametrize("table", PROMISED)
def test_a_file_the_record_promises_is_never_silently_missing(tmp_path, table):
    rundir = write_checked_run(tmp_path / "r")
    path = getattr(rundir, table)
    path.unlink()
    result = check(rundir)
    assert result.exit_code == 2, result.output
    assert f"{path}: missing" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_run_whose_spark_failed_is_judged_without_windows_and_fails(tmp_path):
    """No windows, as the record says: not a missing file, and not a pass either."""
    rundir = write_checked_run(tmp_path / "r", spark={"spark": {"error": "executor lost", "computed": False},
                                                      "spark_master": "local[2]"})
    rundir.windows.unlink()
    rundir.windows_reference.unlink()
    rundir.complex_events_reference.unlink()
    result = check(rundir)
    assert result.exit_code == 1 and "windows: not computed (the Spark application failed: executor lost)" \
        in result.output


def test_a_run_that_ended_before_its_spark_finished_fails_without_windows(tmp_path):
    rundir = write_checked_run(tmp_path / "r", spark={"spark_master": "local[2]", "error": "interrupted (SIGINT)"})
    for table in ("windows", "windows_reference", "complex_events_reference"):
        getattr(rundir, table).unlink()
    result = check(rundir)
    assert result.exit_code == 1, result.output
    assert "windows: not computed (the run ended before its Spark application finished (interrupted (SIGINT)))" \
        in result.output


def test_a_run_without_spark_needs_no_windows(tmp_path):
    rundir = write_checked_run(tmp_path / "r", spark={})
    for table in ("windows", "windows_reference", "complex_events_reference"):
        getattr(rundir, table).unlink()
    result = check(rundir)
    assert result.exit_code == 0, result.output
    assert "windows" not in result.output and "against Spark's reference" not in result.output


def compare(a: RunDir, b: RunDir, *options: str):
    return CliRunner().invoke(main, ["compare", str(a.root), str(b.root), *options])


def test_compare_refuses_a_run_with_spark_whose_windows_are_gone(tmp_path):
    a, b = write_checked_run(tmp_path / "a"), write_checked_run(tmp_path / "b")
    b.windows.unlink()
    result = compare(a, b)
    assert result.exit_code == 2, result.output
    assert f"{b.windows}: missing, though run.json says the Spark application finished" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_compare_says_why_a_run_has_no_windows(tmp_path):
    a = write_checked_run(tmp_path / "a")
    b = write_checked_run(tmp_path / "b", spark={"spark": {"error": "executor lost"}, "spark_master": "local[2]"})
    b.windows.unlink()
    result = compare(a, b)
    assert "windows not compared: no windows in B (its Spark application failed)" in result.output


# ---------------------------------------------------------------------------
# NaN equals nothing
# ---------------------------------------------------------------------------
def windows_with(result: float) -> pd.DataFrame:
    return pd.DataFrame({"stream": 1, "window": [0, 1], "key": None, "operator": "a",
                         "result": [1.0, result], "n_events": 2})


@pytest.mark.parametrize("got, ref", [(math.nan, math.nan), (math.nan, 2.0), (2.0, math.nan),
                                      (math.inf, math.inf), (2.0, math.inf)])
def test_a_result_that_is_not_a_number_matches_nothing(got, ref):
    r = compare_windows(windows_with(got), windows_with(ref))[1]
    assert (r.matching, r.mismatched) == (1, 1) and not r.ok


def test_a_window_count_that_is_missing_matches_nothing():
    got = windows_with(2.0).astype({"n_events": "float64"})
    got.loc[1, "n_events"] = math.nan
    r = compare_windows(got, windows_with(2.0))[1]
    assert (r.matching, r.mismatched) == (1, 1) and not r.ok


def test_a_window_emitted_live_as_nan_never_agrees_with_its_final_row():
    from testbed.semantics.completion import live_differences

    windows = pd.DataFrame({"stream": 1, "window": [0, 1], "result": [3.0, math.nan], "n_events": [3, 3],
                            "emitted_by": "complete", "live_result": [3.0, math.nan], "live_n_events": [3, 3]})
    assert live_differences(windows) == {1: [1]}


@pytest.mark.parametrize("in_a, in_b", [(math.nan, math.nan), (math.nan, 1.0), (1.0, math.nan)])
def test_compare_finds_a_nan_result_different_from_anything(tmp_path, in_a, in_b):
    import json

    a, b = write_checked_run(tmp_path / "a"), write_checked_run(tmp_path / "b")
    edit("windows", set_cell(2, "result", in_a))(a)
    edit("windows", set_cell(2, "result", in_b))(b)
    result = compare(a, b, "--json")
    assert result.exit_code == 1, result.output
    diff = json.loads(result.output)["streams"][str(STREAM)]
    assert diff["same"] is False and diff["windows"]["mismatched"] == 1


def test_compare_finds_a_missing_value_different_from_anything(tmp_path):
    a, b = write_checked_run(tmp_path / "a"), write_checked_run(tmp_path / "b")
    for rundir in (a, b):
        edit("sources", lambda s: s.astype({"value": "float64"}).pipe(set_cell(3, "value", math.nan)))(rundir)
    result = compare(a, b)
    assert result.exit_code == 1 and f"stream {STREAM}: DIFFERS events 12 (0 only in A, 0 only in B, 1 with" \
        in result.output


# ---------------------------------------------------------------------------
# every verdict rests on evidence: damage it and the verdict fails
# ---------------------------------------------------------------------------
STREAM_LINE = f"stream {STREAM}: FAIL"
WINDOWS_LINE = f"stream {STREAM} windows: FAIL"
SINK_LINE = f"complex events at {SINK}: FAILED"
SPARK_SINK_LINE = f"complex events at {SINK} against Spark's reference: FAILED"


#: (what is damaged, how, the line of the verdict that must fail)
DAMAGES = [
    ("a copy never recorded", edit("deliveries", lambda d: d.drop(index=d.index[3])), STREAM_LINE),
    ("a copy recorded twice", edit("deliveries", lambda d: pd.concat([d, d.iloc[[3]]])), STREAM_LINE),
    ("a copy at an operator that does not own it", edit("deliveries", other_operator), STREAM_LINE),
    ("no copy recorded", edit("deliveries", lambda d: d.iloc[:0]), STREAM_LINE),
    ("an event the source never sent", edit("sources", lambda s: s.drop(index=s.index[5])), STREAM_LINE),
    ("a window's result changed", edit("windows", set_cell(2, "result", 99.0)), WINDOWS_LINE),
    ("a window's result NaN", edit("windows", set_cell(2, "result", math.nan)), WINDOWS_LINE),
    ("the reference's result NaN", edit("windows_reference", set_cell(2, "result", math.nan)), WINDOWS_LINE),
    ("both results NaN", lambda r: [edit(t, set_cell(2, "result", math.nan))(r) for t in ("windows",
                                                                                        "windows_reference")],
     WINDOWS_LINE),
    ("a window short of an event", edit("windows", set_cell(4, "n_events", 1)), WINDOWS_LINE),
    ("a window at another operator", edit("windows", set_cell(4, "operator", "h9")), WINDOWS_LINE),
    ("a window never produced", edit("windows", lambda w: w.drop(index=w.index[0])), WINDOWS_LINE),
    ("a window the reference lacks", edit("windows_reference", lambda w: w.drop(index=w.index[0])), WINDOWS_LINE),
    ("a complex event never received", edit("complex_events", lambda c: c.drop(index=c.index[1])), SINK_LINE),
    ("a complex event's value changed", edit("complex_events", set_cell(1, "value", 7)), SINK_LINE),
    ("no complex event recorded", remove("complex_events"), SINK_LINE),
    ("Spark's reference short of a complex event", edit("complex_events_reference", lambda c: c.iloc[1:]),
     SPARK_SINK_LINE),
]

def test_the_undamaged_run_passes_every_verdict(tmp_path):
    result = check(write_checked_run(tmp_path / "r"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"stream {STREAM}: OK") and lines[1].startswith(f"stream {STREAM} windows: OK")
    assert f"complex events at {SINK}: OK received=6 expected=6" in lines
    assert f"complex events at {SINK} against Spark's reference: OK received=6 expected=6" in lines


@pytest.mark.parametrize("what, damage, verdict", DAMAGES, ids=[d[0] for d in DAMAGES])
def test_damaged_evidence_fails_the_verdict_resting_on_it(tmp_path, what, damage, verdict):
    rundir = write_checked_run(tmp_path / "r")
    damage(rundir)
    result = check(rundir)
    assert result.exit_code == 1, result.output
    assert any(line.startswith(verdict) for line in result.output.splitlines()), result.output
    assert rundir.read_verdicts().ok is False
