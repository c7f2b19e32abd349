"""``testbed compare`` and ``testbed.api`` on run directories written here (no emulation)."""
import json

import pandas as pd
import pytest

from support import topologies
from support.records import record_of
from testbed import api
from testbed.analysis.compare import compare_runs, diff_lines
from testbed.analysis.verdicts import evaluate
from testbed.rundir import RunDir

OPS = ["h2", "h3", "h4"]


def write_run(root, windows=True, **stream_changes) -> RunDir:
    """A finished run of one count stream (size 2, slide 1, 3 operators, 6 events), as a run writes it."""
    topo = topologies.build([topologies.stream(4, {"kind": "count", "size": 2, "slide": 1}, OPS, events=6)], 4)
    rundir = RunDir(root).create()
    stream = {**topo.streams[0].record(), **stream_changes}
    sources = pd.DataFrame({"stream": 4, "seq": range(6), "ts": range(6), "key": 0, "value": [3, -1, 4, 1, -5, 9],
                            "send_ns": range(100, 106)})
    # event k is in windows k-1 and k (the last, window 5, is partial); window j goes to OPS[j % 3]
    copies = [(k, OPS[j % 3]) for k in range(6) for j in (k - 1, k) if 0 <= j <= 5]
    deliveries = pd.DataFrame({"stream": 4, "seq": [k for k, _ in copies], "operator": [op for _, op in copies],
                               "recv_ns": 1000}).merge(sources.drop(columns="send_ns"), on=["stream", "seq"])
    record = record_of({"4": stream}, name="t")
    sources.to_parquet(rundir.sources)
    deliveries.to_parquet(rundir.deliveries)
    rundir.write_record(record)
    if windows:
        values = sources["value"].tolist()
        produced = pd.DataFrame({"stream": 4, "window": range(5), "operator": [OPS[j % 3] for j in range(5)],
                                 "key": None, "result": [float(values[j] + values[j + 1]) for j in range(5)],
                                 "n_events": 2, "completed_ns": 2000})
        produced.to_parquet(rundir.windows)
        produced.to_parquet(rundir.windows_reference)     # judged against itself, for the verdicts
    evaluate(record, rundir, with_windows=windows)
    rundir.windows_reference.unlink(missing_ok=True)
    return rundir


def test_identical_runs_do_not_differ(tmp_path):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    diff = compare_runs(a, b)[4]
    assert diff.same and diff.events == 6 and diff.copies == (11, 11) and diff.windows.matching == 5
    assert diff_lines({4: diff})[0].startswith("stream 4: same    events 6 (0 only in A, 0 only in B, 0 with other")


def test_each_kind_of_difference_is_found(tmp_path):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", operators=["h2", "h4", "h3"])
    s = pd.read_parquet(b.sources)
    s.loc[2, "value"] = 40
    s.drop(index=5).to_parquet(b.sources)
    d = pd.read_parquet(b.deliveries)
    d.loc[d["seq"] == 1, "operator"] = "h4"                 # seq 1: h2, h3 -> h4, h4
    pd.concat([d, d[d["seq"] == 0]]).to_parquet(b.deliveries)   # seq 0 twice at h2
    w = pd.read_parquet(b.windows)
    w.loc[3, "result"] += 0.5
    w.drop(index=4).to_parquet(b.windows)

    diff = compare_runs(a, b)[4]
    assert not diff.same
    assert diff.definition == ["operators: A ['h2', 'h3', 'h4'] B ['h2', 'h4', 'h3']"]
    assert (diff.events, diff.only_a, diff.only_b, diff.content) == (5, 1, 0, 1)
    assert diff.copies == (11, 12) and diff.operator_sets == 2
    assert (diff.windows.mismatched, diff.windows.missing, diff.windows.extra) == (1, 1, 0)
    assert "seq 5: sent only in A" in diff.examples
    assert "seq 2: A (ts 2, key 0, value 4) B (ts 2, key 0, value 40)" in diff.examples
    assert "seq 0: A h2  B h2, h2" in diff.examples and "seq 1: A h2, h3  B h4, h4" in diff.examples
    assert "window 3 key -1: B -3.5 from 2 events at h2, A -4.0 from 2 at h2" in diff.examples
    assert "window 4 key -1: only in A" in diff.examples


def test_windows_of_a_run_without_spark_are_not_compared(tmp_path):
    diff = compare_runs(write_run(tmp_path / "a"), write_run(tmp_path / "b", windows=False))[4]
    assert diff.same and diff.windows is None and "no windows in B" in diff.windows_note


def test_a_stream_only_one_run_has_differs(tmp_path):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    record = b.read_record()
    record.streams = {**record.streams, "9": record.streams["4"]}
    b.write_record(record)
    diffs = compare_runs(a, b)
    assert diffs[4].same and not diffs[9].same and diffs[9].definition


# ----------------------------------------------------------------------
# testbed.api on the same directories
# ----------------------------------------------------------------------
def test_a_loaded_run_has_its_record_frames_and_verdicts(tmp_path):
    run = api.load(write_run(tmp_path / "a").root)
    assert run.ok and run.name == "t" and run.target == "model"
    assert len(run.sources) == 6 and len(run.deliveries) == 11 and len(run.windows) == 5
    assert run.reference is None                     # this run has no reference windows
    assert run.checks.loc[4, "expected_deliveries"] == 11 and run.window_checks.loc[4, "reference_windows"] == 5
    assert run.load().to_dict() == {"4": {"h2": 4, "h3": 4, "h4": 3}}
    assert all(d.same for d in run.compare(api.load(write_run(tmp_path / "b").root)).values())
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        api.load(tmp_path)


def test_experiment_returns_the_newest_results_runs(tmp_path):
    for stamp, runs in (("20240101-000000", ["x"]), ("20240102-000000", ["x", "y"])):
        for name in runs:
            write_run(tmp_path / "e" / stamp / "runs" / name)
        listed = {n: {"run_dir": f"runs/{n}"} for n in runs}
        (tmp_path / "e" / stamp / "experiment.json").write_text(
            json.dumps({"kind": "scenarios", "ours": {"runs": listed}}))
    runs = api.experiment("e", results=tmp_path)
    assert list(runs) == ["x", "y"] and runs["y"].path.parent.parent.name == "20240102-000000"
    assert list(api.experiment(tmp_path / "e" / "20240101-000000")) == ["x"]
    with pytest.raises(FileNotFoundError, match="make experiment NAME=none"):
        api.experiment("none", results=tmp_path)


def test_compare_refuses_a_run_without_its_events_in_one_line(tmp_path):
    from click.testing import CliRunner

    from testbed.cli import main

    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b")
    b.sources.unlink()
    result = CliRunner().invoke(main, ["compare", str(a.root), str(b.root)])
    assert result.exit_code == 2 and "sources.parquet: missing" in result.output
    assert len(result.output.strip().splitlines()) == 1
