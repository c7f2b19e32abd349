"""The quick variant of each new experiment, on live targets: properties, never timings.

Resources, control time and latency run switches outside Mininet (a
namespace, veth pairs: root needed); the rate sweep runs Mininet.  Each
bmv2 variant skips with the reason where the toolchain is missing.
Interface and namespace names start with ``$TESTBED_VETH_PREFIX``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from testbed import ROOT
from testbed.emulation import procs
from testbed.emulation.network import mininet_missing
from testbed.experiments.base import Settings, load_experiment, redraw, run_experiment
from testbed.experiments.shipped import scenario
from testbed.rundir import ExperimentDir
from testbed.semantics.workload import stream_events
from testbed.targets.bmv2 import toolchain

MISSING_BMV2 = toolchain.toolchain_missing()
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switch namespaces and veth pairs need root")
TARGETS = [
    "model",
    pytest.param("bmv2", marks=[pytest.mark.bmv2, pytest.mark.skipif(MISSING_BMV2 is not None,
                                                                     reason=f"bmv2 toolchain: {MISSING_BMV2}")]),
]


def quick(name: str, tmp_path, target: str, **settings) -> tuple[bool, ExperimentDir, dict]:
    config = Settings(quick=True, target=target, **settings)
    spec, params = load_experiment(ROOT / "experiments" / f"{name}.yaml", config)
    ok, expdir = run_experiment(spec, params, config, tmp_path / name)
    return ok, expdir, expdir.read_record()


def assert_record_and_redraw(expdir: ExperimentDir, record: dict) -> None:
    """Ours beside the paper's, figures that can be drawn again from raw/ alone."""
    assert record["ours"] and record["paper"] and "error" not in record
    figures = [expdir.root / f for f in record["figures"]]
    assert figures and all(f.exists() for f in figures)
    for f in figures:
        f.unlink()
    assert sorted(redraw(expdir)) == sorted(figures) and all(f.exists() for f in figures)


@needs_root
@pytest.mark.parametrize("target", TARGETS)
def test_resources_read_back_equals_the_plan(tmp_path, target):
    ok, expdir, record = quick("s4resources", tmp_path, target)
    assert ok
    rows = pd.read_parquet(expdir.readback)
    assert set(rows["target"]) == {"model-in-process", target}
    assert rows["same"].all() and rows["cleared"].all() and (rows["planned"] == rows["read_back"]).all()
    assert_record_and_redraw(expdir, record)
    if target == "bmv2":
        pipes = record["ours"]["compiled"]["pipelines"]
        assert pipes["ingress"]["match_tables"] >= 4 and len(pipes["ingress"]["longest_match_chain"]) >= 3


@needs_root
@pytest.mark.parametrize("target", TARGETS)
def test_control_sliding_needs_more_calls_than_tumbling(tmp_path, target):
    ok, expdir, record = quick("s4control", tmp_path, target, params={"repeat": 2})
    rows = pd.read_parquet(expdir.control_times)
    params = record["params"]
    assert len(rows) == 2 * len(params["n_values"]) * len(params["semantics"])
    calls = rows.groupby(["semantic", "N"])["operations"].agg(["min", "max"])
    assert (calls["min"] == calls["max"]).all()            # every repetition installs the same plan
    for n in params["n_values"]:
        sliding, tumbling = calls.loc[("sliding", n), "min"], calls.loc[("tumbling", n), "min"]
        assert sliding > tumbling if n >= 2 else sliding == tumbling   # N = 1: nothing to replicate
    assert (rows["seconds"] > 0).all()
    assert_record_and_redraw(expdir, record)


@needs_root
@pytest.mark.parametrize("target", TARGETS)
def test_latency_forwarding_delivers_every_frame_and_splitter_follows_the_oracle(tmp_path, target):
    ok, expdir, record = quick("s4latency", tmp_path, target)
    checks = {c["mode"]: c for c in record["ours"]["checks"]}
    assert checks["forward"]["wrong_or_missing"] == 0 and checks["forward"]["events"] == record["params"]["events"]
    assert checks["splitter"]["wrong_or_missing"] == 0 and checks["splitter"]["no_ingress_stamp"] == 0
    assert ok
    samples = pd.read_parquet(expdir.latency_samples)
    assert (samples["latency_ns"] > 0).all()               # out after in, on one clock
    summary = {r["semantic"]: r for r in record["ours"]["summary_us"]}
    assert set(summary) == {"forward", *record["params"]["semantics"]}
    assert all("avg_over_forward" in r for s, r in summary.items() if s != "forward")
    assert_record_and_redraw(expdir, record)


@needs_root
@pytest.mark.parametrize("target", TARGETS)
def test_p4cep_complex_events_follow_the_oracle_at_both_rates(tmp_path, target):
    """P4CEP Fig. 4, quick: every point's complex events are the oracle's over the
    events the switch took, at 500 events/s and in a blast; latency is measured
    from the completing event in to its complex event out, on one clock."""
    ok, expdir, record = quick("p4cep", tmp_path, target)
    checks = record["ours"]["checks"]
    sizes = record["params"]["sizes"]
    assert {(c["n"], c["at"]) for c in checks} == {(n, at) for n in sizes for at in ("latency_rate", "blast")}
    assert all(c["missing"] == c["extra"] == c["twice"] == 0 and c["complex_events"] > 0 for c in checks)
    slow = [c for c in checks if c["at"] == "latency_rate"]
    assert all(c["events_taken"] == record["params"]["latency_events"] for c in slow)
    assert ok
    latency = pd.read_parquet(expdir.cep_latency)
    assert (latency["latency_us"] > 0).all()
    summary = {r["n"]: r for r in record["ours"]["summary"]}
    assert set(summary) == {-2, -1, *sizes} and all("relative_throughput" in summary[n] for n in [-2, *sizes])
    assert all("of_splitter_alone" in summary[n] for n in sizes)
    # Both baselines' capacity searches found a rate kept up with, every frame copied
    # there; every trial that lost a frame counts as not kept up with.
    trials = pd.read_parquet(expdir.cep_capacity)
    assert set(trials["n"]) == {-2, -1} and trials.groupby("n")["kept_up"].any().all()
    assert (trials.loc[trials["kept_up"], "copied"] == trials.loc[trials["kept_up"], "sent"]).all()
    assert not trials.loc[trials["copied"] < trials["sent"], "kept_up"].any()
    assert summary[-1]["capacity_per_s"] > 0 and summary[-2]["capacity_of_forward"] > 0
    assert "splitter_alone_at_least_half" in record["ours"]["targets"][target]
    # A rate held when two of its (up to) three trials kept up, and every
    # trial measured the switch's CPU time, which the summary sets side by side.
    for _, at_rate in trials.groupby(["n", "round", "asked"]):
        assert len(at_rate) <= 3 and at_rate["held"].nunique() == 1
        assert bool(at_rate["held"].iloc[0]) == (at_rate["kept_up"].sum() >= 2)
    assert (trials["switch_cpu_s"] > 0).all()
    assert summary[-1]["cpu_us_per_event"] > 0 and summary[-2]["per_cpu_of_forward"] > 0
    assert_record_and_redraw(expdir, record)


@needs_root
@pytest.mark.parametrize("target", TARGETS)
def test_cepadapt_rule_changes_mid_stream_keep_every_complex_event_the_oracles(tmp_path, target):
    """Install, replace, remove and install again while the stream flows: the
    sink's complex events are the oracle's with the same changes at the same
    events, every pattern of the schedule matched, every change recorded."""
    ok, expdir, record = quick("cepadapt", tmp_path, target)
    (check,) = record["ours"]["checks"]
    assert check["same"] and check["complex_events"] == check["expected"] > 0, check
    changes = record["ours"]["changes"]
    assert [c["boundary"] for c in changes] == [e["after"]["events"] for e in record["params"]["schedule"]]
    assert [(c["action"], c["slot"]) for c in changes] == [("add", 1), ("replace", 0), ("remove", 1), ("add", 1)]
    assert all(c["install_ms"] > 0 for c in changes)
    events = pd.read_parquet(expdir.cep_changes_events)
    switch = events[events["source"] == "switch"]
    assert set(switch["pattern"]) == {1, 2, 3}
    removed = changes[2]["boundary"]
    assert (switch.loc[switch["pattern"] == 2, "seq"] < removed).all()        # nothing after its removal
    assert (switch.loc[switch["pattern"] == 3, "seq"] >= changes[3]["boundary"]).all()
    assert ok
    # No paper has this figure: ours alone, drawn again from raw/.
    figures = [expdir.root / f for f in record["figures"]]
    assert figures and all(f.exists() for f in figures)
    for f in figures:
        f.unlink()
    assert sorted(redraw(expdir)) == sorted(figures) and all(f.exists() for f in figures)


@pytest.mark.mininet
@pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation: {mininet_missing()}")
def test_rates_output_is_input_times_the_oracles_copies(tmp_path):
    ok, expdir, record = quick("s4amp", tmp_path, "model", switch_name="e9")
    rows = pd.read_parquet(expdir.rate_points)
    assert ok and len(rows) == len(record["params"]["scenarios"]) * len(record["params"]["fractions"])
    for r in rows.itertuples():
        topo = scenario(r.scenario)[1]
        stream = topo.streams[0].model_copy(update={"events": r.events})
        ev = stream_events(stream, topo.seed)
        oracle = stream.oracle()
        copies = sum(len(oracle.step(seq, ts).operators) for seq, ts in zip(ev["seq"], ev["ts"]))
        assert r.lost == 0 and r.sent == r.events
        assert r.copies_received == r.copies_expected == copies
    assert {s["scenario"] for s in record["ours"]["saturation"]} == set(record["params"]["scenarios"])
    assert_record_and_redraw(expdir, record)


@pytest.mark.mininet
@pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation: {mininet_missing()}")
def test_cpu_policy_capacity_is_calibrated_once_per_policy(tmp_path):
    ok, expdir, record = quick("cpupolicy", tmp_path, "model", switch_name="e8")
    rows = pd.read_parquet(expdir.rate_points)
    assert ok and set(rows["policy"]) == {"none", "fifo"} and not rows["spark"].any()
    assert set(record["ours"]["capacity_events_per_s"]["model"]) == {"none", "fifo"}
    for r in rows.itertuples():
        run = json.loads((expdir.root / r.run_dir / "run.json").read_text())
        assert run["cpu_policy"]["switch"] == {"none": "SCHED_OTHER, nice 0 (the sources' and receivers' class)",
                                               "fifo": "SCHED_FIFO, priority 20"}[r.policy]
    (figure,) = [expdir.root / f for f in record["figures"]]      # not a paper figure: nothing to set beside
    figure.unlink()
    assert redraw(expdir) == [figure] and figure.exists()


@pytest.mark.mininet
@pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation: {mininet_missing()}")
def test_batching_measures_each_batch_size_with_its_frames_and_bytes(tmp_path):
    ok, expdir, record = quick("batching", tmp_path, "model", switch_name="e7")
    rows = pd.read_parquet(expdir.rate_points)
    assert ok and set(rows["batch"]) == set(record["params"]["sizes"]) == {0, 8}
    assert set(record["ours"]["capacity_events_per_s"]["model"]["cbtw1"]) == {"0", "8"}
    for r in rows.itertuples():
        assert r.lost == 0 and r.copies_received == r.copies_expected == r.sent     # cbtw1: one copy per event
        sources = pd.read_parquet(expdir.root / r.run_dir / "sources.parquet")
        assert r.frames == sources["frame"].nunique()
        if r.batch == 0:
            assert r.frames == r.sent and r.bytes_per_event == 74 + 106         # one frame in, one copy out
        else:
            # full frames of 8 while the rate lets 8 events come within 5 ms, and never more than 8
            assert r.sent / 8 <= r.frames < r.sent and sources.groupby("frame").size().max() <= 8
            assert r.bytes_per_event < 74 + 106
    assert_record_and_redraw(expdir, record)


@needs_root
def test_cli_redraws_an_experiment_directory(tmp_path):
    ok, expdir, record = quick("s4control", tmp_path, "model", params={"repeat": 1})
    for f in record["figures"]:
        (expdir.root / f).unlink()
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "plot", str(expdir.root)], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert all((expdir.root / f).exists() for f in record["figures"])


@pytest.mark.mininet
@pytest.mark.spark
@pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation: {mininet_missing()}")
def test_skew_splits_by_windows_evenly_and_by_key_by_the_keys(tmp_path):
    """The quick skew experiment (Zipf s = 1.5, N = 4): split by windows, every
    operator gets the same share; split by key, the copies follow the keys'
    owners exactly, so the hot key's operator carries more than its share,
    and holds fewer distinct keys per window.  Every window equals the reference."""
    from testbed.analysis.spark import spark_missing
    from testbed.semantics.splitting import key_owners

    if spark_missing() is not None:
        pytest.skip(f"Spark skipped: {spark_missing()}")
    ok, expdir, record = quick("skew", tmp_path, "model", switch_name="e7")
    table = record["ours"]["table"]
    assert ok and set(table) == {"windows-s1.5-model", "key-s1.5-model"}
    by_windows, by_key = table["windows-s1.5-model"], table["key-s1.5-model"]
    assert by_windows["load_max_over_mean"] == pytest.approx(1.0)
    assert by_key["load_max_over_mean"] > 1.3
    assert by_key["keys_per_operator_window"] < by_windows["keys_per_operator_window"]
    assert by_windows["windows_equal_reference"] and by_key["windows_equal_reference"]
    run = expdir.root / record["ours"]["runs"]["key-s1.5-model"]["run_dir"]
    deliveries = pd.read_parquet(run / "deliveries.parquet")
    operators = json.loads((run / "run.json").read_text())["streams"]["24"]["operators"]
    assert (deliveries["operator"].to_numpy() == key_owners(deliveries["key"].to_numpy(), operators)).all()
    assert_record_and_redraw(expdir, record)


@pytest.mark.spark
@pytest.mark.mininet
@pytest.mark.skipif(mininet_missing() is not None, reason=f"emulation: {mininet_missing()}")
def test_e2elatency_times_every_point_on_one_warm_spark(tmp_path):
    """The quick sweep (cbtw1 at two rates): every point a checked run whose
    windows left live, with its result latency and lag; one Spark
    application served them all, and it is gone afterwards."""
    from testbed.analysis.spark import spark_missing

    if spark_missing():
        pytest.skip(f"Spark: {spark_missing()}")
    ok, expdir, record = quick("e2elatency", tmp_path, "model", switch_name="e6")
    rows = pd.read_parquet(expdir.raw / "e2elatency.parquet")
    assert ok and len(rows) == 2 and rows["spark"].all()
    assert (rows["result_p50_s"] > 0).all() and (rows["result_p99_s"] >= rows["result_p50_s"]).all()
    assert (rows["micro_batches"] >= 1).all() and (rows["mismatched"] == 0).all()
    apps = {json.loads((expdir.root / r / "spark" / "analysis.json").read_text())["application_id"]
            for r in rows["run_dir"]}
    assert len(apps) == 1 and record["spark_application"]["runs_served"] == 2
    assert set(record["ours"]["sustainable"]) == {"model cbtw1"}
    assert not any(p.name.endswith("-spark.json") for p in procs.state_dir().glob("*.json"))
    assert_record_and_redraw(expdir, record)
