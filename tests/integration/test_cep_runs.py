"""CEP rules in a run, end to end on both targets: a stream split to
operators and matched by patterns in the same run, the sinks' complex events
recorded and held to the oracle by ``testbed check`` (root and Mininet
needed; bmv2 where present).  A tampered record fails the check."""
import pandas as pd
import pytest

from support import topologies
from support.records import written
from support.runs import finished_run, new_tag, nothing_left, run_cli
from testbed.analysis.spark import spark_missing
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir
from testbed.targets.bmv2.toolchain import toolchain_missing

pytestmark = pytest.mark.mininet
MISSING = mininet_missing()
OPERATORS = ["op1", "op2", "op3"]
#: The streams' values are drawn from 0 .. 999 (testbed.semantics.workload); the patterns match a few percent.


def cep_topology(tmp_path, switch: str):
    streams = [topologies.stream(5, {"kind": "count", "size": 4, "slide": 2}, OPERATORS, source="src",
                                 events=1500, rate=600, timestamps={"start": 0, "step": 1}),
               topologies.stream(6, {"kind": "count", "size": 3, "slide": 3}, OPERATORS[:2], source="src",
                                 events=900, rate=400)]
    data = topologies.topology_data(streams, ["src", *OPERATORS, "sk1", "sk2"], name="cr" + switch, switch=switch)
    data["cep"] = {
        "windows": [{"name": "recent", "stream": 5, "field": "value", "size": 6}],
        "complex_events": [
            {"name": "up", "id": 4, "stream": 5, "pattern": "[value > 900]; [sum(recent) > 3000 and value < 500]",
             "returns": "sum(recent)", "sinks": ["sk1"]},
            {"name": "pair", "id": 9, "stream": 6, "strategy": "strict", "sinks": ["sk1", "sk2"],
             "pattern": "([value < 100] || [value > 950]); [value >= 500]", "returns": "seq"}]}
    return topologies.write(tmp_path / "topo.yaml", data)


@pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")
@pytest.mark.parametrize("target", ["model", pytest.param("bmv2", marks=pytest.mark.skipif(
    toolchain_missing() is not None, reason=f"bmv2 toolchain: {toolchain_missing()}"))])
def test_a_run_with_cep_rules_records_the_oracles_complex_events_at_each_sink(tmp_path, target):
    out = tmp_path / "run"
    record = finished_run(cep_topology(tmp_path, "c" + target[0]), out, target)
    assert record["ok"] is True
    assert all(record["check"][s]["ok"] for s in ("5", "6"))          # the splitter's copies, beside the stage
    sinks = record["complex_events"]
    assert set(sinks) == {"sk1", "sk2"} and all(s["ok"] for s in sinks.values()), sinks
    assert sinks["sk1"]["received"] > sinks["sk2"]["received"] > 10   # sk1 also gets pattern 4's
    recorded = pd.read_parquet(RunDir(out).complex_events)
    assert set(recorded["pattern"]) == {4, 9} and set(recorded["sink"]) == {"sk1", "sk2"}
    assert RunDir(out).read_record().install.cep_rules_s > 0
    chk = run_cli("check", str(out))
    assert chk.returncode == 0 and "complex events at sk1: OK" in chk.stdout, chk.stdout
    # One complex event that never came: the check names the sink and fails.
    recorded.drop(index=recorded.index[recorded["sink"] == "sk2"][3]).to_parquet(RunDir(out).complex_events)
    chk = run_cli("check", str(out))
    assert chk.returncode == 1 and "complex events at sk2: FAILED" in chk.stdout and "missing=1" in chk.stdout


@pytest.mark.spark
@pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")
@pytest.mark.skipif(spark_missing() is not None, reason=f"Spark skipped: {spark_missing()}")
def test_with_spark_each_sink_is_held_to_sparks_complex_events_too(tmp_path):
    """The Spark job computes the complex events from the stream, beside the
    operators' windows; the run holds each sink to them as well as to the
    oracle, and reports where Spark's and a sink's differ."""
    out, tag = tmp_path / "run", new_tag()
    res = run_cli("run", str(cep_topology(tmp_path, "cs")), "--out", str(out), "--target", "model", tag=tag)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    nothing_left(tag)
    record = written(RunDir(out))
    spark, oracle = record["complex_events_spark"], record["complex_events"]
    assert set(spark) == set(oracle) == {"sk1", "sk2"}
    assert all(spark[s]["ok"] and spark[s]["expected"] == oracle[s]["expected"] > 10 for s in spark), spark
    assert "complex events at sk2 against Spark's reference: OK" in res.stdout + res.stderr
    # Spark's reference and sk1's record differ by one return value: the check says so, and fails.
    path = RunDir(out).complex_events_reference
    ref = pd.read_parquet(path)
    ref.loc[ref.index[ref["pattern"] == 4][0], "value"] += 1
    ref.to_parquet(path)
    chk = run_cli("check", str(out))
    assert chk.returncode == 1, chk.stdout
    assert "complex events at sk1 against Spark's reference: FAILED" in chk.stdout and "missing=1 extra=1" in chk.stdout
    assert "complex events at sk1: OK" in chk.stdout
    assert "complex events at sk2 against Spark's reference: OK" in chk.stdout
    # The reference run.json says Spark wrote is gone: the run is refused, not judged without it.
    path.unlink()
    chk = run_cli("check", str(out))
    assert chk.returncode == 2 and chk.stderr.count("\n") == 1, chk.stdout + chk.stderr
    assert "complex_events_reference.parquet: missing, though run.json says" in chk.stderr


@pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")
@pytest.mark.parametrize("target", ["model", pytest.param("bmv2", marks=pytest.mark.skipif(
    toolchain_missing() is not None, reason=f"bmv2 toolchain: {toolchain_missing()}"))])
def test_rules_changed_by_the_schedule_begin_at_their_points_and_pass_the_check(tmp_path, target):
    """topologies/cepchange.yaml (docs/cep.md, "Changing rules mid-stream"): a window and a
    pattern added, a pattern and a window replaced, both removed, another pattern added,
    each after a point of the stream; every sink holds the oracle's complex events under
    the rules in force at each event."""
    import yaml

    from testbed import ROOT
    data = yaml.safe_load((ROOT / "topologies" / "cepchange.yaml").read_text())
    data["switch"] = {"name": "cc" + target[0], "target": target}
    out = tmp_path / "run"
    record = finished_run(topologies.write(tmp_path / "topo.yaml", data), out, target)
    assert record["ok"] is True
    sinks = record["complex_events"]
    assert set(sinks) == {"sk1", "sk2"} and all(s["ok"] for s in sinks.values()), sinks
    changes = RunDir(out).read_record().adaptation["cep_changes"]
    assert [(c["action"], c["after"], c["slot"]) for c in changes] == [
        ("add_window", 600, 1), ("add", 800, 1), ("replace", 1400, 0), ("replace_window", 2000, 0),
        ("remove", 2200, 1), ("remove_window", 2400, 1), ("add", 2600, 1)]
    recorded = pd.read_parquet(RunDir(out).complex_events)
    seqs = {p: recorded[recorded["pattern"] == p]["seq"] for p in (2, 4, 7)}
    assert len(seqs[2]) and seqs[2].between(800, 2199).all()          # only while it was installed
    assert len(seqs[7]) and (seqs[7] >= 2600).all()
    four = recorded[(recorded["pattern"] == 4) & (recorded["sink"] == "sk1")].sort_values("seq")
    assert (four["seq"] < 1400).any() and (four["seq"] >= 1400).any()
    assert four[four["seq"] >= 1400]["match"].iloc[0] == 1            # the replace counts from 1 again
    chk = run_cli("check", str(out))
    assert chk.returncode == 0 and "complex events at sk2: OK" in chk.stdout, chk.stdout
