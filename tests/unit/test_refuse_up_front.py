"""Issue 46, item 4, "Refuse up front": input an adversarial review found accepted, hanging or
ending in a traceback.  Each is now one line on stderr naming the file (or option) and the
field, exit 2, nothing on stdout, and nothing started.

The commands that would start something (``run``, ``experiment``, ``api.run``) run here with
the parts that start things replaced by ones that fail the test, so a refusal that came too
late, or never, cannot pass for one.  Reads that would block forever (a named pipe) are
released after a while, so that the old behaviour fails the test instead of hanging the suite.
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from functools import partial

import pandas as pd
import pytest
import yaml
from test_inputs import GOOD, assert_refused, cli, finished_run, stream_with, with_, write

from support import topologies
from testbed.rundir import TABLE_COLUMNS, ExperimentDir, RunDir, RunDirError, write_json_atomic

pytestmark = pytest.mark.unit


@pytest.fixture
def nothing_starts(monkeypatch):
    """Every way a run or an experiment starts fails the test instead."""
    import testbed.experiments.base as base
    import testbed.experiments.launch as launch
    import testbed.runs.orchestrator as orchestrator

    def started(*args, **kwargs):
        raise AssertionError("a run was started")

    for module, name in ((launch, "launch"), (launch, "real_parts"), (orchestrator, "Run"),
                         (base, "run_experiment")):
        monkeypatch.setattr(module, name, started)


@contextmanager
def unblocked_after(seconds: float, *fifos):
    """Fail instead of hanging: a reader of a named pipe waits for a writer, in Python or
    inside pyarrow alike, so after ``seconds`` one comes (and goes, which the reader sees as
    the end of the file) and the test fails for having needed it."""
    done, needed = threading.Event(), []

    def release() -> None:
        if done.wait(seconds):
            return
        needed.append(True)
        while not done.is_set():
            for fifo in fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:            # no reader at this moment
                    pass
            time.sleep(0.05)

    helper = threading.Thread(target=release, daemon=True)
    helper.start()
    try:
        yield
    finally:
        done.set()
        helper.join()
    assert not needed, f"a read of {', '.join(map(str, fifos))} blocked for {seconds} s"


ELASTIC = {"stream": 1, "pool": ["h2", "h3"], "max": 2, "high": 100, "low": 10}


# -- 1. detect_timeout below the heartbeat interval ------------------------------------
def test_detect_timeout_shorter_than_a_heartbeat_is_refused(tmp_path):
    """Shorter than the interval between heartbeats, every operator would be declared
    failed between two of its heartbeats, and the run hung in failover."""
    from testbed.dataplane import liveness
    from testbed.semantics import limits

    assert liveness.HEARTBEAT_INTERVAL_S is limits.HEARTBEAT_INTERVAL_S      # one constant, declared once
    path = write(tmp_path, with_(("adapt",), {"failover": True, "detect_timeout": 0.001}))
    assert_refused(cli("validate", path), f"{path}: adapt.detect_timeout", "heartbeats")
    path = write(tmp_path, with_(("adapt",), {"failover": True, "detect_timeout": limits.HEARTBEAT_INTERVAL_S}))
    assert cli("validate", path).exit_code == 0


# -- 2. elastic periods beyond any run ---------------------------------------------------
@pytest.mark.parametrize("field", ["period", "cooldown"])
def test_elastic_period_beyond_a_week_is_refused(tmp_path, field):
    """``period: 1e300`` validated, then the policy thread's wait overflowed and the run exited 0."""
    path = write(tmp_path, with_(("adapt",), {"elastic": [{**ELASTIC, field: 1e300}]}))
    assert_refused(cli("validate", path), f"{path}: adapt.elastic[0].{field}", "604800")


# -- 3. CEP rules too large to walk -------------------------------------------------------
CEP = {"windows": [{"name": "recent", "stream": 1, "field": "value", "size": 8}],
       "complex_events": [{"name": "spike", "id": 1, "stream": 1, "pattern": "[value > 5]", "sinks": ["h3"]}]}


def with_pattern(pattern: str) -> dict:
    return with_(("cep",), {**CEP, "complex_events": [{**CEP["complex_events"][0], "pattern": pattern}]})


def conjunction(terms: int) -> str:
    return "[" + " and ".join(["value > 5"] * terms) + "]"


@pytest.mark.parametrize("command", ["validate", "plan"])
@pytest.mark.parametrize("terms", [65, 500, 5000])
def test_cep_predicate_of_too_many_terms_is_one_line(tmp_path, command, terms):
    """About 500 ``and`` terms ended in a RecursionError in validate, plan, run and check."""
    path = write(tmp_path, with_pattern(conjunction(terms)))
    assert_refused(cli(command, path), f"{path}: cep.complex_events[0].pattern", "a rule may have")


def test_cep_predicate_at_the_limit_is_accepted(tmp_path):
    from testbed.semantics.cep.language import MAX_TERMS

    path = write(tmp_path, with_pattern(conjunction(MAX_TERMS)))
    result = cli("validate", path)
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("text", [
    conjunction(100_000),
    "[" + " or (".join(["value > 5"] * 3000) + ")" * 2999 + "]",
    "[" + "(" * 4000 + "value > 5" + ")" * 4000 + "]",
    "; ".join(["[value > 5]"] * 3000),
    " && ".join(["[value > 5]"] * 3000),
])
def test_no_rule_text_ends_in_a_recursion_error(text):
    from testbed.semantics.cep.language import RuleSyntaxError, parse_pattern

    try:
        parse_pattern(text)
    except RuleSyntaxError as err:
        assert "\n" not in str(err)


# -- 4. named pipes among the files read --------------------------------------------------
@pytest.mark.parametrize("command", ["check", "plot", "compare"])
@pytest.mark.parametrize("name", ["run.json", "deliveries.parquet", "sources.parquet", "windows.parquet"])
def test_run_directory_file_that_is_a_named_pipe(tmp_path, command, name):
    """check and compare blocked forever on a run.json or deliveries.parquet that was a FIFO."""
    rundir = finished_run(tmp_path / "a")
    other = finished_run(tmp_path / "b")
    fifo = rundir.root / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    args = ("compare", str(other.root), str(rundir.root)) if command == "compare" else (command, str(rundir.root))
    with unblocked_after(20, fifo):
        result = cli(*args)
    assert_refused(result, fifo, "not a file (a pipe or a device)")


def test_api_load_of_a_run_with_a_named_pipe(tmp_path):
    from testbed import api

    rundir = finished_run(tmp_path)
    rundir.deliveries.unlink()
    os.mkfifo(rundir.deliveries)
    with unblocked_after(20, rundir.deliveries), \
            pytest.raises(RunDirError, match="deliveries.parquet: cannot read: not a file"):
        api.load(rundir.root).deliveries


def test_experiment_record_that_is_a_named_pipe(tmp_path):
    os.mkfifo(tmp_path / "experiment.json")
    with unblocked_after(20, tmp_path / "experiment.json"):
        result = cli("plot", str(tmp_path))
    assert_refused(result, tmp_path / "experiment.json", "not a file (a pipe or a device)")


def test_experiment_and_replay_files_that_are_named_pipes(tmp_path, nothing_starts):
    folder = tmp_path / "experiments"
    folder.mkdir()
    os.mkfifo(folder / "e.yaml")
    with unblocked_after(20, folder / "e.yaml"):
        result = cli("experiment", str(folder / "e.yaml"))
    assert_refused(result, folder / "e.yaml", "not a file")
    os.mkfifo(tmp_path / "events.csv")
    path = write(tmp_path, stream_with(replay={"path": "events.csv", "ts": "t", "value": "v"}))
    with unblocked_after(20, tmp_path / "events.csv"):
        result = cli("validate", path)
    assert_refused(result, f"{path}: streams[0].replay.path", "not a file")


def test_switch_cli_on_a_run_whose_switch_json_is_a_named_pipe(tmp_path, monkeypatch):
    """What is read while a run goes on (switch.json, status files) counts as not there yet."""
    import testbed.runs.attach as attach
    from testbed.emulation import procs

    rundir = RunDir(tmp_path / "run").create()
    os.mkfifo(rundir.switch_info)
    monkeypatch.setattr(procs, "running_runs", lambda: [{"run_dir": str(rundir.root)}])
    with unblocked_after(20, rundir.switch_info), pytest.raises(attach.AttachError, match="not up yet"):
        attach.running_switch(rundir.root)


# -- 5. --param and files nested too deeply -----------------------------------------------
@pytest.mark.parametrize("depth", [100, 5000])
def test_param_nested_too_deeply(nothing_starts, depth):
    """``--param`` 5,000 deep ended in a RecursionError."""
    result = cli("experiment", "s4load", "--param", "runs=" + "[" * depth + "]" * depth)
    assert_refused(result, "--param runs", "nested more than 64 deep")


def test_topology_nested_past_the_bound(tmp_path):
    """Deep enough to pass the parser, too deep for the bound; aliases count as they expand."""
    path = write(tmp_path, with_(("description",), json.loads("[" * 100 + "]" * 100)))
    assert_refused(cli("validate", path), path, "nested more than 64 deep")
    chain = "a0: &a0 " + "[" * 40 + "]" * 40 + "\n" + "".join(
        f"a{i}: &a{i} " + "[" * 40 + f"*a{i - 1}" + "]" * 40 + "\n" for i in range(1, 30))
    path = tmp_path / "chain.yaml"
    path.write_text(yaml.safe_dump(GOOD) + chain)
    assert_refused(cli("validate", str(path)), path, "nested more than 64 deep")


# -- 6. --param where nothing takes it ----------------------------------------------------
def test_param_on_a_scenario_is_refused(nothing_starts):
    """``testbed experiment cbsw1 --param bogus=1`` ran the scenario, the parameter ignored."""
    assert_refused(cli("experiment", "cbsw1", "--param", "bogus=1"), "--param", "cbsw1 is a scenario")


def test_param_an_experiment_kind_does_not_have_is_refused(nothing_starts):
    from testbed import ROOT

    result = cli("experiment", "s4load", "--param", "bogus=1")
    assert_refused(result, ROOT / "experiments" / "s4load.yaml", "params.bogus: unknown field")


# -- 7. report --only a section no document has --------------------------------------------
def test_report_only_a_name_no_document_has(tmp_path):
    """``testbed report --check --only nosuch`` said the docs agreed."""
    from testbed.experiments.report import section_names

    assert_refused(cli("report", "--check", "--only", "nosuch"), "--only nosuch", "no document")
    assert {"run-record", "s4load", "stress"} <= set(section_names())


# -- 8. the Python API's options ------------------------------------------------------------
@pytest.mark.parametrize("options, field", [
    ({"seed": -5}, "seed"),
    ({"seed": 2**63}, "seed"),
    ({"seed": True}, "seed"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": float("inf")}, "timeout"),
    ({"timeout": "soon"}, "timeout"),
    ({"window_timeout_s": 1e7}, "window_timeout_s"),
    ({"window_timeout_s": 5, "spark": False}, "window_timeout_s"),
    ({"target": "tofino"}, "target"),
    ({"cli": "during"}, "cli"),
    ({"switch_cpu": "rr"}, "switch_cpu"),
    ({"spark_cpu": "busy"}, "spark_cpu"),
])
def test_api_run_checks_its_options_before_anything_starts(nothing_starts, options, field):
    """``api.run(topology, seed=-5)`` built the network before it failed."""
    from testbed import api

    with pytest.raises(Exception) as err:          # a run started instead is the fixture's AssertionError
        api.run(GOOD, **options)
    assert type(err.value).__name__ == "RunOptionsError", repr(err.value)
    assert isinstance(err.value, ValueError) and err.value.field == field and "\n" not in str(err.value)


# -- 9. timestamps a stream does not use --------------------------------------------------
@pytest.mark.parametrize("source", [{"dataset": {"name": "nycflights13"}},
                                    {"replay": {"path": "events.csv", "ts": "t", "value": "v"}}])
def test_timestamps_of_a_replayed_stream_are_refused(tmp_path, source):
    """``timestamps:`` on a dataset stream was accepted and ignored."""
    (tmp_path / "events.csv").write_text("t,v\n" + "".join(f"{k},{k}\n" for k in range(10)))
    path = write(tmp_path, stream_with(timestamps={"start": 100, "step": 5}, **source))
    assert_refused(cli("validate", path), f"{path}: streams[0].timestamps", "come from its data")
    path = write(tmp_path, stream_with(**source))
    assert cli("validate", path).exit_code == 0


def test_a_replayed_streams_record_still_loads():
    """run.json and the Spark job keep a stream with its default timestamps spelt out."""
    from testbed.semantics.topology import Stream

    topo = topologies.build([topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2"], events=5,
                                               dataset={"name": "nycflights13"})], 3)
    assert Stream.from_record(topo.streams[0].record()) == topo.streams[0]


# -- 10. two elastic policies on one stream ------------------------------------------------
def test_two_elastic_policies_on_one_stream(tmp_path):
    path = write(tmp_path, with_(("adapt",), {"elastic": [ELASTIC, {**ELASTIC, "high": 200}]}))
    assert_refused(cli("validate", path), f"{path}: adapt.elastic[1].stream", "already has a policy (elastic[0])")


# -- 11. --window-timeout without Spark ----------------------------------------------------
def test_window_timeout_without_spark(tmp_path, nothing_starts):
    """Only the Spark operators' windows time out: with --no-spark the option was ignored."""
    path = write(tmp_path, GOOD)
    result = cli("run", path, "--no-spark", "--window-timeout", "5")
    assert_refused(result, "--window-timeout", "--no-spark")


# -- 12. free-form parts of a record with the wrong types ----------------------------------
RECORD_DAMAGE = {   # run.json key -> value, what the one line names
    "decisions-text": ("adaptation", {"decisions": "oops"}, "adaptation.decisions: expected a list of objects"),
    "decision-text": ("adaptation", {"decisions": ["x"]}, "adaptation.decisions[0]: expected an object"),
    "failures-number": ("adaptation", {"failures": 3}, "adaptation.failures: expected a list of objects"),
    "live-text": ("spark", {"live": "yes"}, "spark.live: expected an object, got text"),
    "live-list": ("spark", {"live": ["x"]}, "spark.live: expected an object, got a list"),
    "live-batches": ("spark", {"live": {"batches": "x"}}, "spark.live.batches: expected a list of objects"),
    "spark-error-number": ("spark", {"error": 5}, "spark.error: expected text"),
}


@pytest.mark.parametrize("command", ["check", "plot"])
@pytest.mark.parametrize("case", sorted(RECORD_DAMAGE))
def test_record_parts_of_the_wrong_type(tmp_path, command, case):
    """Damaged ``adaptation.decisions`` or ``spark.live`` gave AttributeErrors in check and plot."""
    key, value, says = RECORD_DAMAGE[case]
    rundir = finished_run(tmp_path)
    record = json.loads(rundir.record.read_text())
    write_json_atomic(rundir.record, {**record, key: value})
    assert_refused(cli(command, str(rundir.root)), rundir.record, says)


def damaged_experiment(folder, ours) -> ExperimentDir:
    expdir = ExperimentDir(folder)
    expdir.write_record({"kind": "scenarios", "experiment": {"name": "s4load"}, "started": 0, "ok": True,
                         "paper": {}, "ours": ours})
    return expdir


@pytest.mark.parametrize("ours, says", [
    ({"runs": ["cbsw1"]}, "ours.runs: expected an object of objects, got a list"),
    ({"runs": {"cbsw1": "results/x"}}, "ours.runs.cbsw1: expected an object, got text"),
    (["runs"], "ours: expected an object, got a list"),
])
def test_experiment_record_parts_of_the_wrong_type(tmp_path, monkeypatch, ours, says):
    """experiment.json's ``ours.runs`` of the wrong type gave AttributeErrors in plot and report."""
    import testbed.experiments.report as report

    expdir = damaged_experiment(tmp_path / "results" / "figures" / "s4load", ours)
    assert_refused(cli("plot", str(expdir.root)), expdir.record, says)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "evaluation.md").write_text("<!-- BEGIN generated: s4load -->\nold\n<!-- END generated: s4load -->\n")
    monkeypatch.setattr(report, "report", partial(report.report, docs=docs, results=tmp_path / "results"))
    assert_refused(cli("report", "--check", "--only", "s4load"), expdir.record, says)


def test_api_experiment_with_runs_of_the_wrong_type(tmp_path):
    from testbed import api

    expdir = damaged_experiment(tmp_path, {"runs": "cbsw1"})
    with pytest.raises(RunDirError, match="ours.runs: expected an object of objects"):
        api.experiment(expdir.root)


def test_a_record_the_run_writes_still_loads(tmp_path):
    """The shapes held to are the ones the run and the Spark job write."""
    rundir = finished_run(tmp_path)
    record = json.loads(rundir.record.read_text())
    record["adaptation"] = {"decisions": [{"policy": "schedule", "reason": "schedule[0]", "error": None}],
                            "failures": [], "recoveries": [], "detections": [], "heard_again": [],
                            "elastic_samples": [{"t": 0.1, "stream": 3, "N": 2, "load": {}}]}
    record["spark"] = {"computed": True, "result_latency_s": [], "live": {"streams": [], "batches": []}}
    write_json_atomic(rundir.record, record)
    # A record that says Spark finished promises its tables (check refuses a run without them).
    for table in ("windows", "windows_reference"):
        pd.DataFrame({c: pd.Series(dtype="int64") for c in TABLE_COLUMNS[table]}).to_parquet(getattr(rundir, table))
    assert RunDir(rundir.root).read_record().adaptation["decisions"][0]["reason"] == "schedule[0]"
    assert cli("check", str(rundir.root)).exit_code == 0
    pd.read_parquet(rundir.deliveries)     # untouched

