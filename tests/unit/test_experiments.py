"""Experiments without root: files, parameters, and the pure computations behind the figures."""
from __future__ import annotations

import math
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed import ROOT
from testbed.dataplane.contract import HEADER_REGISTERS, RECONFIG_REGISTERS, REGISTERS, REGISTERS_USED, SCHEMA
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.experiments import KINDS, kind_class
from testbed.experiments.adaptation import Adaptation
from testbed.experiments.base import ExperimentError, Settings, all_experiments, figure_experiments, load_experiment
from testbed.experiments.latency import FORWARD, delivery_check, samples, summarize
from testbed.experiments.rates import saturation
from testbed.experiments.resources import (
    fits,
    largest_fitting,
    longest_chain,
    p4ss_growth,
    plan_row,
    program_stats,
    readback,
    readback_summary,
    register_bits,
    semantic_windows,
    sweep_n,
    sweep_streams,
    sweep_topology,
)
from testbed.experiments.shipped import scenario
from testbed.rundir import ExperimentDir
from testbed.semantics.instances import MAX_SHARED_INSTANCES
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import WindowSpec
from testbed.targets.embedded.client import ControlError


def multicast_formula(size: int, slide: int, n_ops: int) -> int:
    """docs/windows.md, "What a plan costs": N per steady-state count >= 2,
    plus the start-up counts that are not steady-state counts."""
    c = math.ceil(size / slide)
    steady = {min(size // slide, n_ops), min(c, n_ops)}
    return n_ops * sum(1 for m in steady if m >= 2) + len(set(range(2, min(c, n_ops))) - steady)


# -- files ---------------------------------------------------------------------
@pytest.mark.parametrize("quick", [False, True])
def test_every_experiment_file_loads(quick):
    names = {}
    for path in all_experiments():
        spec, params = load_experiment(path, Settings(quick=quick))
        assert spec.kind in KINDS
        names[spec.name] = spec.kind
    assert names == {"s4load": "scenarios", "p4ssexp": "scenarios", "s4amp": "rates",
                     "s4resources": "resources", "s4control": "control", "s4latency": "latency",
                     "disorder": "scenarios", "p4ssadapt": "adaptation", "failover": "adaptation",
                     "elastic": "adaptation", "bench": "bench", "soak": "soak", "cpupolicy": "cpupolicy",
                     "flights": "variants", "skew": "variants", "slash": "scenarios", "e2elatency": "e2elatency",
                     "batching": "batching", "p4cep": "cep", "cepadapt": "cepadapt", "s4scale": "scale",
                     "startrule": "startrule"}


def test_all_runs_the_paper_figures_and_not_the_bench_or_the_soak():
    chosen = {spec.name for spec, _params in figure_experiments(Settings(quick=True))}
    every = {load_experiment(path)[0].name for path in all_experiments()}
    assert every - chosen == {"bench", "soak", "cpupolicy"}
    for name in ("bench", "soak", "cpupolicy"):
        assert load_experiment(ROOT / "experiments" / f"{name}.yaml")[0].in_figures is False


def test_command_line_overrides_reach_only_kinds_that_take_them():
    spec, params = load_experiment(ROOT / "experiments" / "s4control.yaml",
                                   Settings(quick=True, target="model", params={"repeat": 7}))
    assert params.repeat == 7 and params.targets == ["model"]
    spec, params = load_experiment(ROOT / "experiments" / "s4resources.yaml", Settings(target="bmv2"))
    assert params.targets == ["bmv2"] and not hasattr(params, "repeat")


@pytest.mark.parametrize("text, where", [
    ("name: x\nkind: nosuch\n", "kind: unknown kind 'nosuch'"),
    ("name: x\nkind: control\nparams: {repeats: 3}\n", "params.repeats: unknown field"),
    ("name: x\nkind: control\nparams: {n_values: [1, 65100]}\n", "params.n_values: N must be 1..65024"),
    ("name: x\nkind: scenarios\nparams: {runs: [cbsw1, nosuch]}\n", r"params.runs: [1]: nosuch: no such topology"),
    ("name: x\nkind: rates\nparams: {targets: [tofino]}\n", "params.targets: unknown target 'tofino'"),
    ("name: x\nkind: latency\nextra: 1\n", "extra: unknown field"),
    ("name: x\nkind: adaptation\nparams: {topology: elastic, pace: {bmv2: 2}}\n", "params.pace.bmv2:"),
    ("name: x\nkind: adaptation\nparams: {topology: elastic, pace: {tofino: 0.5}}\n", "params.pace.tofino:"),
])
def test_bad_experiment_file_names_file_and_field(tmp_path, text, where):
    folder = tmp_path / "experiments"
    folder.mkdir()
    path = folder / "x.yaml"
    path.write_text(text)
    with pytest.raises(ExperimentError) as err:
        load_experiment(path)
    assert str(err.value).startswith(f"{path}: ") and where in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_refuses_a_bad_file_before_starting_anything(tmp_path):
    folder = tmp_path / "experiments"
    folder.mkdir()
    (folder / "x.yaml").write_text("name: x\nkind: control\nparams: {repeat: 0}\n")
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "experiment", str(folder / "x.yaml"), "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "params.repeat" in res.stderr
    assert not out.exists()


def test_every_figure_names_the_papers_numbers_it_is_compared_with():
    for spec, _params in figure_experiments():
        cls = kind_class(spec.kind)
        assert cls.paper and all("source" in entry for entry in cls.paper.values()), spec.name


# -- resources: the plan ---------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 60), slide=st.integers(1, 60), n_ops=st.integers(1, 24),
       kind=st.sampled_from(["count", "time"]))
def test_entries_are_the_formula_of_docs_windows(size, slide, n_ops, kind):
    row = plan_row(SplitterPlan(sweep_topology(WindowSpec(kind=kind, size=size, slide=slide), n_ops)))
    assert (row["window_spec"], row["operator_count"], row["unicast"]) == (1, 1, n_ops)
    assert row["egress_rewrite"] == n_ops
    assert row["multicast"] == multicast_formula(size, slide, n_ops)
    assert row["multicast_groups"] <= row["multicast"]
    assert row["control_calls"] == row["entries"] + row["windows_header_entries"] + 3 * row["multicast_groups"]


def test_sweep_over_n_grows_as_the_formula_says():
    windows = semantic_windows({"cbtw": "cbtw1", "cbsw": "cbsw1", "tbsw": "tbsw1"})
    rows = sweep_n(windows, [1, 2, 4, 8, 64, 256])
    for r in rows.itertuples():
        w = windows[r.semantic]
        assert r.entries == 2 + 2 * r.N + multicast_formula(w.size, w.slide, r.N)
        assert r.register_bytes == register_bits(w.kind) / 8       # one stream, whatever N
    tumbling = rows[rows["semantic"] == "cbtw"]
    assert (tumbling["multicast"] == 0).all() and (tumbling["multicast_groups"] == 0).all()


def test_sweep_over_streams_costs_two_entries_a_stream_and_one_operator_set():
    windows = semantic_windows({"cbsw": "cbsw1", "tbtw": "tbtw1"})
    rows = sweep_streams(windows, [1, 3, 10], n_ops=6)
    for semantic, part in rows.groupby("semantic"):
        one = part[part["streams"] == 1].iloc[0]
        for r in part.itertuples():
            # window_spec and operator_count each; the streams share one operator set's entries
            assert r.entries == one["entries"] + 2 * (r.streams - 1)
            assert r.unicast == one["unicast"] == 6 and r.window_spec == r.operator_count == r.streams
            assert r.multicast_groups == one["multicast_groups"]    # same ports, same groups
            assert r.register_bytes == r.streams * one["register_bytes"]


def test_p4ss_growth_follows_p4ss_for_tumbling_streams():
    growth = p4ss_growth(scenario("p4ss")[1], [1, 2, 5])
    for r in growth[growth["stream"].isin(["A", "B"])].itertuples():
        assert r.entries == r.N + 2                     # P4SS §4.2: one per operator, N, the window spec
        assert r.multicast_groups == 0
    sliding = growth[growth["stream"] == "C"].set_index("N")["entries"]
    assert sliding[5] > 5 + 2                           # C (n=3, slide 1) adds multicast entries


def test_registers_used_are_the_ones_the_model_writes():
    """REGISTERS_USED (the memory a stream costs) against what the pipeline actually touches."""
    for kind, size, slide in (("count", 5, 2), ("time", 30, 10)):
        pipe = SplitterPipeline()
        topo = sweep_topology(WindowSpec(kind=kind, size=size, slide=slide), 3)
        Controller(pipe).install(SplitterPlan(topo))
        for k in range(1, 200):
            pipe.ingress(0, 7 * k)
        written = {name for name in REGISTERS if pipe.register_read(name, 0)}
        assert written <= set(REGISTERS_USED[kind]) | set(RECONFIG_REGISTERS) | set(HEADER_REGISTERS)
        assert len(written) >= 4
    assert register_bits("count") == register_bits("time") == 193


# -- resources: read-back, and the compiled program ------------------------------
def test_in_process_readback_equals_the_plan_and_clears():
    rows = pd.DataFrame(readback("in-process", SplitterPipeline(), semantic_windows({"cbsw": "cbsw1"}), [3, 7, 600],
                                 [40], 5))
    assert set(rows["what"]) == set(SCHEMA) | {"multicast_groups", "multicast_ports"}
    assert rows["same"].all() and rows["cleared"].all()
    assert (rows["planned"] == rows["read_back"]).all()
    # past bmv2's ports N = 600 are instances of shared hosts; 40 streams share one operator set
    points = rows[rows["what"] == "unicast"].set_index(["N", "streams"])["read_back"]
    assert points.to_dict() == {(3, 1): 3, (7, 1): 7, (600, 1): 600, (5, 40): 5}
    specs = rows[rows["what"] == "window_spec"].set_index(["N", "streams"])["read_back"]
    assert specs[(5, 40)] == 40


def test_readback_notices_a_missing_entry():
    class Forgetful(SplitterPipeline):
        def table_add(self, table, action, match_keys, action_params=()):
            if table == "unicast" and str(match_keys[1]) == "1":
                return -1
            return super().table_add(table, action, match_keys, action_params)

    rows = pd.DataFrame(readback("forgetful", Forgetful(), semantic_windows({"cbtw": "cbtw1"}), [3]))
    unicast = rows[rows["what"] == "unicast"].iloc[0]
    assert not unicast["same"] and unicast["read_back"] == unicast["planned"] - 1


def test_readback_records_what_the_switch_refuses_and_goes_on():
    """bmv2's replication engine holds a fixed number of nodes: a point past it
    is the readback's answer there, the switch is emptied, and smaller ones still read back."""
    class Small(SplitterPipeline):
        def mc_node_create(self, rid, ports):
            if len(self.mc_nodes) >= 20:
                raise ControlError("mc_node_create: TABLE_FULL")
            return super().mc_node_create(rid, ports)

    api = Small()
    rows = pd.DataFrame(readback("small", api, semantic_windows({"cbsw": "cbsw1"}), [3, 40, 4]))
    refused = rows[rows["what"] == "refused"]
    assert refused[["N", "refused"]].values.tolist() == [[40, "mc_node_create: TABLE_FULL"]]
    taken = rows[rows["what"] != "refused"]
    assert sorted(set(taken["N"])) == [3, 4] and taken["same"].all() and taken["cleared"].all()
    assert not api.mc_dump() and not any(api.table_entries(t) for t in SCHEMA)
    summary = readback_summary(rows)
    assert summary["targets"][0]["largest_n"] == 4 and summary["refused"][0]["N"] == 40


PIPELINE = {
    "name": "ingress", "init_table": "t1",
    "tables": [
        {"name": "t1", "key": [{"match_type": "exact"}], "next_tables": {"a": "c1"}, "base_default_next": "c1"},
        {"name": "tbl_act", "key": [], "next_tables": {"b": "t3"}, "base_default_next": "t3"},
        {"name": "t3", "key": [{"match_type": "exact"}], "next_tables": {"c": None}, "base_default_next": None},
        {"name": "t4", "key": [{"match_type": "exact"}], "next_tables": {"d": None}, "base_default_next": None},
        {"name": "unreachable", "key": [{}], "next_tables": {}, "base_default_next": None},
    ],
    "conditionals": [{"name": "c1", "true_next": "tbl_act", "false_next": "t4"}],
}


def test_longest_chain_follows_control_flow_through_conditionals():
    assert longest_chain(PIPELINE, lambda t: True) == ["t1", "tbl_act", "t3"]
    assert len(longest_chain(PIPELINE, lambda t: bool(t["key"]))) == 2


def test_program_stats_counts_tables_registers_and_chains():
    config = {"pipelines": [PIPELINE], "actions": [{}, {}, {}],
              "register_arrays": [{"name": "r", "bitwidth": 64, "size": 4}], "counter_arrays": []}
    stats = program_stats(config)
    assert stats["pipelines"]["ingress"]["tables"] == 5 and stats["pipelines"]["ingress"]["match_tables"] == 4
    assert stats["register_bytes"] == 32 and stats["actions"] == 3


# -- latency and rates: what the figures are computed from -----------------------
def tap_rows(latency_ns: dict[tuple[int, int], dict[int, int]]) -> list[tuple]:
    rows = []
    for (stream, seq), outs in latency_ns.items():
        rows.append(("in", 1, stream, seq, 1_000_000 * seq))
        rows += [("out", port, stream, seq, 1_000_000 * seq + ns) for port, ns in outs.items()]
    return rows


def test_latency_samples_ratio_and_delivery_check():
    names = {1: "cbtw", 2: "cbsw"}
    fwd = samples(tap_rows({(1, 0): {2: 10_000}, (1, 1): {2: 30_000}}), "model", FORWARD, 0, names)
    split = samples(tap_rows({(1, 0): {3: 50_000}, (2, 0): {2: 60_000, 3: 80_000}}), "model", "splitter", 0, names)
    rows = {(r["target"], r["semantic"]): r for r in summarize(pd.concat([fwd, split]))}
    assert rows[("model", FORWARD)]["avg"] == 20.0
    assert rows[("model", "cbsw")]["avg"] == 70.0 and rows[("model", "cbsw")]["first_copy_avg"] == 60.0
    assert rows[("model", "cbtw")]["avg_over_forward"] == 2.5
    assert delivery_check(split, {(1, 0): [3], (2, 0): [2, 3]})["wrong_or_missing"] == 0
    assert delivery_check(split, {(1, 0): [3], (2, 0): [2, 3], (2, 1): [4]})["wrong_or_missing"] == 1
    assert delivery_check(split, {(1, 0): [2], (2, 0): [2, 3]})["wrong_or_missing"] == 1


def test_saturation_marks_the_first_lossy_point():
    rows = pd.DataFrame([
        {"target": "model", "scenario": "cbsw1", "phase": "sweep", "fraction": f, "offered": 1000 * f,
         "input_rate": 1000 * f, "output_rate": 5000 * f - lost, "sent": 100, "copies_expected": 500, "lost": lost,
         "sustained": kept}
        for f, lost, kept in ((0.5, 0, True), (1.0, 0, False), (1.5, 40, False), (2.0, 200, False))])
    (sat,) = saturation(rows)
    assert sat["max_lossless_input"] == 1000 and sat["first_loss_fraction"] == 1.5
    assert sat["max_sustained_input"] == 500 and sat["first_behind_fraction"] == 1.0
    assert sat["copies_per_event"] == 5 and sat["first_loss_share"] == 0.08


def test_largest_fitting_respects_every_table_and_the_port_space():
    rows = sweep_n(semantic_windows({"cbsw": "cbsw1"}), [8, 16, 32, 600])
    sizes = {t: 10_000 for t in SCHEMA} | {"multicast": 30}      # cbsw: N + 3 entries
    assert largest_fitting(rows, "N", sizes)["cbsw"] == {"largest_fitting": 16, "first_not_fitting": 32}
    roomy = {t: 10_000 for t in SCHEMA}
    # past bmv2's 511 ports the operators are instances on shared hosts, as a live run places them
    assert largest_fitting(rows, "N", roomy)["cbsw"] == {"largest_fitting": 600, "first_not_fitting": None}
    empty = {t: 0 for t in SCHEMA}
    assert fits({"N": MAX_SHARED_INSTANCES} | empty, roomy)
    assert not fits({"N": MAX_SHARED_INSTANCES + 1} | empty, roomy)     # instance ids are 16 bits


def test_a_paced_adaptation_keeps_its_timeline_and_scales_every_rate(tmp_path):
    """elastic on bmv2 runs at a slower pace: rates, events and the policy's
    thresholds scale by the factor; the schedule's times and N's bounds stay."""
    spec, params = load_experiment(ROOT / "experiments" / "elastic.yaml", Settings())
    assert set(params.pace) == {"bmv2"} and 0 < params.pace["bmv2"] < 1
    f = params.pace["bmv2"]
    kind = Adaptation(spec, params, Settings(), ExperimentDir(tmp_path / "e"))
    path, topo = kind.topology("model")
    assert path == ROOT / "topologies" / "elastic.yaml"
    paced_path, slow = kind.topology("bmv2")
    assert paced_path.parent == tmp_path / "e" / "raw" and paced_path.exists()
    (fast_stream,), (slow_stream,) = topo.streams, slow.streams
    assert slow_stream.rate == pytest.approx(fast_stream.rate * f) and slow_stream.rate < fast_stream.rate
    assert slow_stream.events == round(fast_stream.events * f)
    assert [e.at for e in slow.schedule] == [e.at for e in topo.schedule]
    assert [e.rate.rate for e in slow.schedule] == pytest.approx([e.rate.rate * f for e in topo.schedule])
    (fast_policy,), (slow_policy,) = topo.adapt.elastic, slow.adapt.elastic
    assert (slow_policy.high, slow_policy.low) == pytest.approx((fast_policy.high * f, fast_policy.low * f))
    assert (slow_policy.min, slow_policy.max, slow_policy.pool) == (fast_policy.min, fast_policy.max,
                                                                     fast_policy.pool)
    # the ramp with the operators' lag as the signal runs beside it, paced alike, in a file of its own
    assert params.compare == ["elasticlag"]
    lag_path, lag_slow = kind.topology("bmv2", "elasticlag")
    assert lag_path != paced_path and lag_path.parent == paced_path.parent
    (lag_policy,) = lag_slow.adapt.elastic
    assert lag_policy.signal == "lag" and lag_slow.streams[0].rate == pytest.approx(slow_stream.rate)


def test_an_adaptation_to_compare_must_adapt(tmp_path):
    bad = tmp_path / "experiments" / "x.yaml"
    bad.parent.mkdir()
    bad.write_text("name: x\nkind: adaptation\nparams: {topology: elastic, compare: [cbsw1]}\n")
    with pytest.raises(ExperimentError, match=r"params.compare: .*\[0\]: cbsw1 has neither a schedule"):
        load_experiment(bad)


def rate_point(target="model", **check) -> dict:
    """A rate point's row as ``point_row`` builds it, from one stream's check."""
    from testbed.experiments.capacity import classify

    full = {"missing": 0, "extra": 0, "duplicates": 0, "lost_before_switch": 0, "lost_on_link": 0} | check
    # A point's "lost" is every loss: copies missing after the switch and events lost before it.
    return {"target": target, "scenario": "cbtw1", "phase": "sweep", "fraction": 1.5, "offered": 9000.0,
            "lost": full["missing"] + full["lost_before_switch"], "copies_expected": 100,
            "copies_received": 100 - full["lost_before_switch"] - full["missing"],
            **classify({"1": full})}


@pytest.mark.parametrize("check, ok", [
    ({}, True),
    ({"lost_before_switch": 7}, True),               # overload: a measured point
    ({"missing": 5}, True),                          # overload after the switch
    ({"lost_before_switch": 3, "missing": 2}, True),
    ({"extra": 1}, False),                           # a copy at the wrong operator
    ({"duplicates": 1}, False),
    ({"lost_before_switch": 3, "extra": 1}, False),
])
def test_rate_point_overload_is_data_and_wrong_copies_fail(check, ok):
    from testbed.experiments.rates import overload_losses, points_ok

    rows = pd.DataFrame([rate_point(), rate_point(**check)])
    assert points_ok(rows) is ok
    where = overload_losses(rows)
    lost = check.get("lost_before_switch", 0) + check.get("missing", 0)
    assert len(where) == (1 if lost else 0)
    if where:
        assert where[0]["lost_before_switch_checked"] == check.get("lost_before_switch", 0)
        assert where[0]["missing_after_switch"] == check.get("missing", 0)


@pytest.mark.parametrize("check, ok", [
    ({"extra": 1}, False),                            # nothing lost: a wrong copy is a fault
    ({"lost_before_switch": 3, "missing": 2, "extra": 1}, True),   # numbering unknowable
])
def test_a_bmv2_point_that_lost_events_before_the_switch_is_not_judged_by_its_copies(check, ok):
    """bmv2 says how many events it saw, not which, and drops copies in its
    egress queues unseen: past its capacity the check's numbering is a guess."""
    from testbed.experiments.rates import points_ok

    assert points_ok(pd.DataFrame([rate_point(target="bmv2"), rate_point(target="bmv2", **check)])) is ok
    assert points_ok(pd.DataFrame([rate_point(), rate_point(**check)])) is False


def test_rate_point_lossless_but_short_fails():
    """No loss reported, yet copies short of the oracle's: wrong."""
    from testbed.experiments.rates import points_ok

    row = rate_point() | {"copies_received": 99}
    assert points_ok(pd.DataFrame([row])) is False


def test_a_calibrated_scenario_runs_at_a_rate_the_machine_carries():
    """cbsw1 sends each event to 5 operators: 6 packets at the switch per event.
    A capacity of 4,000 events/s of cbtw1 (2 packets each) at half is 4,000
    packets/s, so 667 events/s; a fast machine keeps the topology's own rate."""
    from testbed.experiments.capacity import calibrated

    topo = scenario("cbsw1")[1]
    slow, entry = calibrated(topo, 4000, 0.5)
    assert slow.streams[0].rate == pytest.approx(4000 / 6) and slow.streams[0].events == topo.streams[0].events
    assert entry["topology_rates"] == {"291": 2000} and entry["rates"] == {"291": 666.7}
    fast, entry = calibrated(topo, 100_000, 0.5)
    assert fast.streams[0].rate == 2000 and entry["rate_scale"] == 1.0
    three = scenario("p4ss")[1]
    shared, _ = calibrated(three, 1000, 0.5)
    scales = {s.rate / t.rate for s, t in zip(shared.streams, three.streams)}
    assert len({round(x, 9) for x in scales}) == 1          # every stream slowed alike
    demand = sum(s.rate * (1 + s.copies() / s.events) for s in shared.streams)
    assert demand == pytest.approx(1000)


# -- variants: one topology, a patch per run -------------------------------------
def test_variant_patches_merge_into_every_stream_and_are_validated():
    from testbed.experiments.variants import merged, variant

    assert merged({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": 5}, "d": [2]}) == {"a": {"b": 5, "c": 2}, "d": [2]}
    _path, topo = scenario("skew")
    keyed = variant(topo, "k", {"split": "key", "keys": {"s": 1.5}}, "skew.yaml")
    assert keyed.streams[0].split == "key" and keyed.streams[0].keys.s == 1.5
    assert keyed.streams[0].keys.n == topo.streams[0].keys.n          # the rest of the mapping stays
    with pytest.raises(Exception, match=r"^skew\.yaml \(variant bad\): streams\[0\]\.keys\.s: .*greater than 0$"):
        variant(topo, "bad", {"keys": {"s": -1}}, "skew.yaml")


def test_flights_fails_when_its_widest_lateness_leaves_a_window_differing(tmp_path):
    from testbed.experiments.variants import Variants

    spec, params = load_experiment(ROOT / "experiments" / "flights.yaml", Settings(quick=True))
    kind = Variants(spec, params, Settings(quick=True), ExperimentDir(tmp_path))
    runs = {"L0h-model": {"ok": True, "target": "model", "variant": "L0h"},
            "L12h-model": {"ok": True, "target": "model", "variant": "L12h"}}
    exact = {"too_late": 0, "windows_differing": 0}
    assert kind.ok({"runs": runs, "table": {"L0h-model": {"too_late": 9, "windows_differing": 9},
                                            "L12h-model": exact}})
    assert not kind.ok({"runs": runs, "table": {"L0h-model": exact,
                                                "L12h-model": {"too_late": 0, "windows_differing": 1}}})
    assert not kind.ok({"runs": runs, "table": {}})                    # no numbers: nothing shown exact
    with pytest.raises(Exception, match=r"params\.exact: 'L6h' is not one of the variants"):
        load_experiment(ROOT / "experiments" / "flights.yaml", Settings(params={"exact": ["L6h"]}))


def test_key_skew_reads_the_exponent_of_a_stream_record():
    from testbed.experiments.variants import key_skew

    assert key_skew({"keys": {"distribution": "zipf", "s": 1.5, "n": 3}}) == 1.5
    assert key_skew({"keys": {"distribution": "uniform", "n": 3, "s": None}}) == 0.0
    assert key_skew({}) == 0.0


# -- startrule: the grid against windows that start at events ---------------------
def test_startrule_parts_the_rules_only_where_a_grid_start_has_no_event(tmp_path):
    """tbsw1's timestamps put an event on every grid start: the rules agree on
    every event.  The flights leave nights without one: the rules part, and
    the event rule opens fewer windows (none over the empty nights)."""
    import json

    from click.testing import CliRunner

    from testbed.cli import main

    out = tmp_path / "startrule"
    res = CliRunner().invoke(main, ["experiment", "startrule", "--quick", "--param", "events=4000",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    record = json.loads((out / "experiment.json").read_text())
    assert record["ok"] is True
    tbsw1, flights = record["ours"]["streams"]["tbsw1/291"], record["ours"]["streams"]["flightsdep/13"]
    assert tbsw1["events_to_other_operators"] == 0 and tbsw1["grid"] == tbsw1["event"]
    assert flights["events_to_other_operators"] > 0
    assert flights["event"]["windows"] < flights["grid"]["windows"]
    load = pd.read_parquet(out / "raw" / "start_load.parquet")
    assert set(load["rule"]) == {"grid", "event"}
    assert (out / "startrule.png").stat().st_size > 0
