"""The bench and the soak as experiment kinds, without root: parameters, the in-process parts, files, figures."""
from __future__ import annotations

import random
import subprocess
import sys

import pandas as pd
import pytest

from testbed import ROOT
from testbed.experiments.base import ExperimentError, Settings, load_experiment, parse_params, redraw, run_experiment
from testbed.experiments.bench import kind as bench_kind
from testbed.experiments.bench.costs import PLAN_N, PLAN_SPECS
from testbed.experiments.bench.files import BenchFiles
from testbed.experiments.bench.kind import Bench, cannot_run
from testbed.experiments.bench.late import late_stream
from testbed.experiments.soak import PHASES, SIGNALS, Soak, SoakFiles, plan_cycles, reached
from testbed.experiments.stamps import copy_times
from testbed.rundir import ExperimentDir

BENCH = ROOT / "experiments" / "bench.yaml"
SOAK = ROOT / "experiments" / "soak.yaml"
IN_PROCESS = ["oracle", "pipeline", "lateness", "plan"]


def test_quick_bench_keeps_to_parts_without_mininet_and_small_sizes():
    _spec, full = load_experiment(BENCH)
    _spec, quick = load_experiment(BENCH, Settings(quick=True))
    assert full.parts == bench_kind.PARTS and full.scale == ["streams1000", "operators64", "events1m"]
    assert "emulation" not in quick.parts and "scale" not in quick.parts
    assert quick.costs.oracle_events < full.costs.oracle_events
    assert quick.reconfiguration.changes < full.reconfiguration.changes


def test_param_pairs_select_the_scale_runs_only():
    settings = Settings(params=parse_params(["parts=[scale]", "scale=[events1m]"]))
    _spec, params = load_experiment(BENCH, settings)
    assert params.parts == ["scale"] and params.scale == ["events1m"]
    _spec, params = load_experiment(SOAK, Settings(quick=True, params=parse_params(["cycles=5"])))
    assert params.cycles == 5 and params.targets == ["model"]


@pytest.mark.parametrize("pairs, where", [
    (["parts=[nosuch]"], "params.parts"),
    (["parts=[plan, plan]"], "'plan' is named twice"),
    (["scale=[events2m]"], "params.scale"),
    (["costs={pipeline_events: 1}"], "params.costs.pipeline_events"),
    (["late={events: 100, speed: 3}"], "params.late.speed"),
    (["parts=[]"], "params.parts"),
])
def test_bad_bench_params_name_the_field(pairs, where):
    with pytest.raises(ExperimentError, match=r"bench\.yaml") as err:
        load_experiment(BENCH, Settings(quick=True, params=parse_params(pairs)))
    assert where in str(err.value)


@pytest.mark.parametrize("pair", ["parts", "=3", "cycles=[1"])
def test_bad_param_pair_is_one_line(pair):
    with pytest.raises(ExperimentError, match="--param") as err:
        parse_params([pair])
    assert "\n" not in str(err.value)


def test_in_process_parts_write_raw_tables_record_and_figures(tmp_path):
    settings = Settings(quick=True, params={"parts": IN_PROCESS})
    spec, params = load_experiment(BENCH, settings)
    ok, expdir = run_experiment(spec, params, settings, tmp_path / "bench")
    record = expdir.read_record()
    assert ok and record["kind"] == "bench" and not record["skipped"]
    assert set(record["ours"]) == set(IN_PROCESS)
    files = BenchFiles(expdir)
    pipeline = pd.read_parquet(files.table("pipeline")).set_index("spec")
    # a tumbling window sends each event to one operator; a sliding one (n=5, slide=1) to up to five
    assert pipeline.loc["tumbling n=100 slide=100", "copies_per_frame"] == 1.0
    assert 1 < pipeline.loc["sliding n=5 slide=1", "copies_per_frame"] <= 5
    assert len(pd.read_parquet(files.table("lateness"))) == 6
    assert len(pd.read_parquet(files.table("plan"))) == len(PLAN_N) * len(PLAN_SPECS)
    assert record["ours"]["oracle"]["events"] == params.costs.oracle_events
    figures = {p.rsplit("/", 1)[-1] for p in record["figures"]}
    assert figures == {"pipeline.png", "lateness.png", "plan.png"}
    for path in expdir.root.glob("*.png"):
        path.unlink()
    assert sorted(p.name for p in redraw(expdir)) == sorted(figures)


def test_parts_needing_root_are_skipped_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_kind.os, "geteuid", lambda: 1000)
    assert cannot_run("late_in_switch") == cannot_run("scale") == "needs root"
    assert cannot_run("plan") is None
    settings = Settings(params={"parts": ["plan", "reconfiguration", "emulation"]})
    spec, params = load_experiment(BENCH, settings)
    ok, expdir = run_experiment(spec, params, settings, tmp_path / "bench")
    record = expdir.read_record()
    assert ok and set(record["ours"]) == {"plan"}
    assert record["skipped"] == {"reconfiguration": "needs root", "emulation": "needs root"}


def test_bench_fails_on_wrong_copies_or_a_failed_check_never_on_time():
    ok = Bench.ok.__get__(object.__new__(Bench))
    clean = {"reconfiguration": [{"events_with_wrong_copies": 0}], "scale": [{"check_passes": True}],
             "lateness": [{"ns_per_event": 1e9}]}
    assert ok(clean)
    assert not ok(clean | {"reconfiguration": [{"events_with_wrong_copies": 0}, {"events_with_wrong_copies": 2}]})
    assert not ok(clean | {"scale": [{"check_passes": True}, {"check_passes": False}]})


def test_late_stream_sends_every_fifth_event_late_within_the_lateness():
    plan, frames, kind = late_stream(200, slide=100)
    assert len(frames) == 200 == len(kind)
    late = [seq for seq, k in kind.items() if k != "in order"]
    assert late and all(seq % 5 == 4 for seq in late)
    assert {kind[seq] for seq in late} == {f"late, {b} slides back" for b in (1, 2, 3, 4)}
    assert plan.topology.streams[0].window.lateness == 400


def test_copy_times_pairs_each_copy_with_its_event_in():
    rows = [("in", 1, 1, 0, 1000), ("out", 2, 1, 0, 4000), ("out", 3, 1, 0, 2500), ("out", 2, 1, 1, 9000)]
    copies = copy_times(rows).set_index(["seq", "port"])
    assert copies.loc[(0, 3), "latency_ns"] == 1500 and copies.loc[(0, 3), "copy"] == 0
    assert copies.loc[(0, 2), "copy"] == 1
    assert pd.isna(copies.loc[(1, 2), "in_ns"])          # seen leaving, never seen arriving


def test_soak_cycles_cover_every_phase_and_signal():
    cycles = plan_cycles(len(PHASES) * len(SIGNALS), random.Random(4))
    assert {p for p, _s in cycles} == set(PHASES) and {s for _p, s in cycles} == set(SIGNALS)
    assert plan_cycles(5, random.Random(4)) == plan_cycles(5, random.Random(4))
    assert reached("stream", "plan") and not reached("plan", "stream") and not reached(None, "starting")


def test_soak_passes_only_without_leaks_and_redraws_from_its_cycles(tmp_path):
    ok = Soak.ok.__get__(object.__new__(Soak))
    assert ok({"leaks": {"processes": 0, "interfaces": 0}})
    assert not ok({"leaks": {"processes": 0, "interfaces": 1}})
    expdir = ExperimentDir(tmp_path / "soak").create()
    files = SoakFiles(expdir).create()
    assert files.topology.is_file() and files.tmp.is_dir() and files.state.is_dir()
    assert files.ours(f"{files.tmp}/x") and not files.ours("eth0")
    pd.DataFrame([{"cycle": 1, "aimed": "plan", "signal": "SIGINT", "hit": "plan", "processes_left": 0},
                  {"cycle": 2, "aimed": "stream", "signal": "SIGKILL", "hit": "finished", "processes_left": 2}]
                 ).to_parquet(files.cycles)
    expdir.write_record({"kind": "soak", "ours": {"leaks": {"processes": 2}}})
    assert [p.name for p in redraw(expdir)] == ["soak.png"]


@pytest.mark.parametrize("pair, message", [("parts", "--param 'parts': expected KEY=VALUE"),
                                           ("parts=[nosuch]", "bench.yaml: params.parts")])
def test_cli_refuses_a_bad_param_before_starting_anything(tmp_path, pair, message):
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "experiment", "bench", "--quick", "--param", pair,
                          "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 2 and message in res.stderr and res.stderr.strip().count("\n") == 0
    assert not out.exists()


def test_a_bench_holds_its_rates_against_the_previous_one(tmp_path):
    """The pipeline got 40 % slower since the last bench on this machine: named, with that bench's commit."""
    from testbed.experiments.bench.baseline import against_baseline
    from testbed.rundir import ExperimentDir

    def ours(frames_per_s, bmv2_us=100.0):
        return {"pipeline": [{"spec": "sliding n=5 slide=1", "decisions_per_s": 90_000.0,
                              "frames_per_s": frames_per_s}, {"spec": "memory", "peak_bytes": 5}],
                "oracle": {"spec": "count n=5 slide=1 N=6", "events_per_s": 1000.0},
                "late_in_switch": [{"target": "bmv2", "event": "in order", "copies": 9, "us_p50": bmv2_us}]}

    first = ExperimentDir(tmp_path / "bench" / "20260101-000000").create()
    assert against_baseline(ours(50_000.0), first) is None                 # nothing before it
    first.write_record({"kind": "bench", "git_revision": "abc1234", "ours": ours(50_000.0)})
    unrelated = ExperimentDir(tmp_path / "bench" / "20260102-000000").create()
    unrelated.write_record({"kind": "bench", "git_revision": "def5678", "ours": {"scale": []}})
    now = ExperimentDir(tmp_path / "bench" / "20260103-000000").create()
    compared = against_baseline(ours(30_000.0, bmv2_us=200.0), now)
    assert compared["baseline_revision"] == "abc1234"          # the newest bench that measured these rates
    ratios = {r["rate"]: r["ratio"] for r in compared["rates"]}
    assert ratios == {"pipeline: sliding n=5 slide=1: decisions_per_s": 1.0,
                      "pipeline: sliding n=5 slide=1: frames_per_s": 0.6,
                      "oracle: count n=5 slide=1 N=6: events_per_s": 1.0,
                      "late_in_switch: bmv2, in order: copies_per_s": 0.5}     # twice the time per copy
    assert compared["slower"] == ["pipeline: sliding n=5 slide=1: frames_per_s",
                                  "late_in_switch: bmv2, in order: copies_per_s"]


def test_instruction_counts_are_held_to_a_close_tolerance(tmp_path):
    """bmv2's instructions per event hardly move with the machine's load, so 5 %
    more of them is named slower while timings are allowed 20 %; 1 % more is not."""
    from testbed.experiments.bench.baseline import INSTRUCTION_TOLERANCE, TOLERANCE, against_baseline
    from testbed.rundir import ExperimentDir

    def ours(tumbling, sliding, bmv2_us=100.0):
        return {"instructions": [
                    {"target": "bmv2", "program": "splitter", "workload": "count tumbling 100/100",
                     "instructions_per_event": tumbling},
                    {"target": "bmv2", "program": "splitter", "workload": "count sliding 100/50",
                     "instructions_per_event": sliding}],
                "late_in_switch": [{"target": "bmv2", "event": "in order", "copies": 9, "us_p50": bmv2_us}]}

    assert INSTRUCTION_TOLERANCE < TOLERANCE
    first = ExperimentDir(tmp_path / "bench" / "20260101-000000").create()
    first.write_record({"kind": "bench", "git_revision": "abc1234", "ours": ours(200_000, 300_000)})
    now = ExperimentDir(tmp_path / "bench" / "20260102-000000").create()
    compared = against_baseline(ours(210_000, 303_000, bmv2_us=110.0), now)
    ratios = {r["rate"]: r["ratio"] for r in compared["rates"]}
    tumbling = "instructions: bmv2 splitter, count tumbling 100/100: events_per_ginstr"
    sliding = "instructions: bmv2 splitter, count sliding 100/50: events_per_ginstr"
    assert ratios[tumbling] == round(200_000 / 210_000, 3) and ratios[sliding] == round(300_000 / 303_000, 3)
    # 10 % more time per copy is within the timings' tolerance; 5 % more instructions is not
    assert compared["slower"] == [tumbling]


def test_a_callgrind_dump_gives_its_instruction_total_less_header_vector_allocations():
    """bmv2 makes a header vector only when more frames queue than ever
    before, which a busy machine decides: those calls' inclusive cost (every
    call site, the callee named once) is taken off the total."""
    from testbed.experiments.bench.instructions import dumped_instructions

    dump = "\n".join([
        "version: 1", "creator: callgrind-3.19.0", "events: Ir", "summary: 30330337", "",
        "fn=(1) bm::PHVSourceIface::get(unsigned int)", "12 40",
        "cfn=(2) bm::PHVFactory::create() const", "calls=3 0", "14 120000",
        "cfn=(3) malloc", "calls=1 0", "15 700",
        "fn=(4) SimpleSwitch::receive_(unsigned int, char const*, int)", "20 500",
        "cfn=(2)", "calls=1 0", "21 40000",
        "fn=(2)", "30 160000", ""])
    assert dumped_instructions(dump) == 30330337 - 120000 - 40000
    assert dumped_instructions(dump.replace("summary", "totals")) == 30330337 - 160000
    with pytest.raises(ValueError, match="no summary or totals"):
        dumped_instructions("version: 1\nevents: Ir\n")


def test_a_dump_of_each_thread_is_told_by_the_bmv2_function_the_thread_runs():
    """callgrind writes one file per thread (``callgrind.out.N-TT``): each is
    named by the step of bmv2 it runs, the egress threads by rank, busiest
    first, whatever order the files are listed in or valgrind numbered them;
    threads that run no step are summed as one, and each total is less its
    header vectors' allocations."""
    from testbed.experiments.bench.instructions import OTHER_THREADS, by_thread, thread_of

    def dump(total, *functions):
        lines = ["version: 1", "events: Ir", f"summary: {total}"]
        for ident, function in enumerate(functions, 1):
            lines += [f"fn=({ident}) {function}", "1 5"]
        return "\n".join(lines + [""])

    receive = dump(900, "bm::PHV::reset_metadata()", "SimpleSwitch::receive_(unsigned int, char const*, int)")
    ingress = dump(5000, "SimpleSwitch::ingress_thread()", "bm::Parser::parse(bm::Packet*) const")
    egress = dump(700, "SimpleSwitch::egress_thread(unsigned long)")
    assert thread_of(receive) == "receive" and thread_of(ingress) == "ingress" and thread_of(egress) == "egress"
    assert thread_of(dump(3, "std::thread::_State_impl::_M_run()")) == OTHER_THREADS
    # a function only called from a thread names it too (cfn=)
    assert thread_of("fn=(1) main\ncfn=(2) SimpleSwitch::transmit_thread()\ncalls=1 0\n1 9\n") == "transmit"
    allocating = receive.replace("1 5\n", "1 5\ncfn=(9) bm::PHVFactory::create() const\ncalls=1 0\n2 400\n", 1)
    files = [("callgrind.out.2-08", dump(0, "SimpleSwitch::egress_thread(unsigned long)")),
             ("callgrind.out.2-06", allocating), ("callgrind.out.2-10", egress), ("callgrind.out.2-07", ingress),
             ("callgrind.out.2-01", dump(30, "main")), ("callgrind.out.2-02", dump(12, "bm::PortMonitor")),
             ("callgrind.out.2-09", dump(80, "SimpleSwitch::egress_thread(unsigned long)"))]
    assert by_thread(files) == {OTHER_THREADS: 42, "receive": 500, "ingress": 5000,
                                "egress 1": 700, "egress 2": 80, "egress 3": 0}
    # Another start numbered the busy thread first: the same names.
    renumbered = [("callgrind.out.3-08", egress), ("callgrind.out.3-10", dump(0, "SimpleSwitch::egress_thread()"))]
    assert by_thread(renumbered) == {"egress 1": 700, "egress 2": 0}


def test_the_batches_builds_workloads_send_batches_and_lone_events_as_a_source_does():
    """``make bench`` counts the batches build on frames of 8 events, count
    and time, and on frames of one, which go plain (docs/wire.md, "Batches");
    each workload's copies are what the embedded target sends for it."""
    from testbed.dataplane.wire import BATCH_LEN, EVENT_OFFSET, batch_count, is_batch_port, parse_event
    from testbed.experiments.bench.instructions import (
        BATCH_EVENTS,
        LONE_WORKLOAD,
        TIME_BATCH_WORKLOAD,
        batch_workload,
        expected_copies,
    )

    install, frames = batch_workload()
    batched = frames(20)
    assert [batch_count(f) for f in batched] == [BATCH_EVENTS, BATCH_EVENTS, 20 - 2 * BATCH_EVENTS]
    assert expected_copies(install, batched) == 3                    # tumbling windows: one copy a batch
    install, frames = batch_workload(TIME_BATCH_WORKLOAD)
    timed = frames(100)
    assert [batch_count(f) for f in timed[:2]] == [BATCH_EVENTS, BATCH_EVENTS] and len(timed) == 13
    assert [parse_event(f[EVENT_OFFSET + BATCH_LEN:])[2] for f in timed[:2]] == [0, 10 * BATCH_EVENTS]
    # time 1000/500, a timestamp every 10: slides of 50 events; a batch inside the first slide
    # goes to its one window's operator, one across a slide's start to two
    assert 13 < expected_copies(install, timed) < 2 * 13
    install, frames = batch_workload(LONE_WORKLOAD)
    lone = frames(20)
    assert len(lone) == 20 and not any(is_batch_port(f) for f in lone)
    assert expected_copies(install, lone) == 20
    assert batch_count(batch_workload()[1](17)[-1]) == 0   # a last frame of one event goes plain


def test_the_cep_floors_transitions_find_the_oracles_matches():
    """cep_floor.p4 steps the p4cep pattern through ``FLOOR_TRANSITIONS`` with
    symbol bit 0 for ``value >= 90`` and bit 1 for ``max(w) >= 0``, a miss
    keeping the state: on the bench's events that completes exactly the
    events the oracle completes, and its copies count them."""
    from testbed.experiments.bench.instructions import CEP_SEED, CEP_WINDOW, FLOOR_TRANSITIONS, floor_workload
    from testbed.experiments.cep import cep_topology, completing, event_frames

    topo = cep_topology(CEP_WINDOW, 1)
    events = event_frames(topo, 2000, CEP_SEED)[1]
    state, window, completed = 0, [], set()
    for event in events:
        window = (window + [event.value])[-CEP_WINDOW:]
        symbol = (event.value >= 90) | (max(window) >= 0) << 1
        state, completes = FLOOR_TRANSITIONS.get((state, symbol), (state, 0))
        if completes:
            completed.add(event.seq)
    assert completed == completing(topo.cep, events) and len(completed) > 100
    assert floor_workload().copies(2000) == 2000 + len(completed)


def floor_sends(config, events):
    """``(seq, port)`` of what splitter_floor.p4 sends with ``config``: its
    ingress step by step (count the event, look the state up, move to the
    next state when the slide is full), a group standing for its ports."""
    table = {state: (action, params) for state, action, params in config.entries}
    fill, state, sent = 0, 0, set()
    for seq in range(events):
        fill += 1
        action, (target, following, slide) = table[state]
        ports = [target] if action == "to_operator" else config.groups[target]
        sent |= {(seq, port) for port in ports}
        if fill == slide:
            fill, state = 0, following
    return sent


@pytest.mark.parametrize("size, slide, n", [(100, 100, 6), (100, 50, 6), (5, 1, 3), (12, 3, 2), (7, 7, 1), (6, 2, 6)])
def test_the_splitter_floors_entries_send_every_event_where_the_oracle_does(size, slide, n):
    """splitter_floor.p4's table, as floor_config fills it, walks the lead-in
    of a sliding stream (fewer windows per slide) into the ring of N states,
    and sends each event to the operators of exactly the windows the oracle
    puts it in, over several turns of the ring."""
    from testbed.experiments.bench.splitter_floor import floor_config, oracle_deliveries

    ports = list(range(2, 2 + n))
    config = floor_config(size, slide, ports)
    events = size + 3 * n * slide + slide // 2          # the lead-in, three turns, half a slide
    assert floor_sends(config, events) == oracle_deliveries(size, slide, ports, events)
    assert len(config.entries) == n + size // slide - 1 == len({state for state, _a, _p in config.entries})
    if size == slide:                                     # tumbling: no replication at all
        assert not config.groups and {action for _s, action, _p in config.entries} == {"to_operator"}


def test_the_splitter_floor_refuses_windows_it_cannot_hold():
    from testbed.experiments.bench.splitter_floor import floor_config

    with pytest.raises(ValueError, match="multiple of the slide"):
        floor_config(100, 30, [2, 3])
    with pytest.raises(ValueError, match="256 states"):
        floor_config(300, 1, [2, 3])


def test_the_blast_workload_is_the_stream_p4ceps_blast_sends_split_without_division(monkeypatch):
    """The bench counts what an event of p4cep's blast costs: the same window
    and operators as the experiment's stream, each event in a window of its
    own on the one operator.  The embedded target sends every event once, and
    moves newest_op on by one lap of N = 1 with a subtraction, as slides.p4
    does: the 64-step division for a mod N is for a >= 2N only."""
    from testbed.dataplane.model import slides

    divisions = []

    def counted(dividend, divisor):
        divisions.append((dividend, divisor))
        return divmod(dividend, divisor)

    monkeypatch.setattr(slides, "shift_subtract_divmod", counted)
    from testbed.dataplane.model import SplitterPipeline
    from testbed.dataplane.wire import EVENT_OFFSET, parse_event
    from testbed.experiments.bench.instructions import BLAST_WORKLOAD, SOURCE_PORT, WORKLOADS, splitter_workload
    from testbed.experiments.cep import cep_topology

    stream = cep_topology(0, 1).streams[0]
    blast = WORKLOADS[BLAST_WORKLOAD]
    assert (blast.window["kind"], blast.window["size"], blast.window["slide"]) == \
        (stream.window.kind, stream.window.size, stream.window.slide)
    assert blast.operators == len(stream.operators) == 1
    install, frames = splitter_workload(BLAST_WORKLOAD)
    pipe = SplitterPipeline()
    install(pipe)
    copies = [pipe.process(frame, SOURCE_PORT) for frame in frames(50)]
    assert [len(c) for c in copies] == [1] * 50
    bench_stream = parse_event(frames(1)[0][EVENT_OFFSET:])[0]
    registers = {name: pipe.registers[name][bench_stream] for name in ("begun", "newest_window", "newest_op")}
    assert registers == {"begun": 1, "newest_window": 49, "newest_op": 0}
    assert divisions == []


def test_the_bench_refuses_a_splitter_floor_whose_copies_are_not_the_oracles():
    """The bench reads each copy's event back from its frame and holds the
    (event, port) pairs to the oracle's: a copy to the wrong operator, a
    missing one or one sent twice stops the count, so the floor is never
    counted doing less than splitting."""
    from testbed.experiments.bench.instructions import (
        SPLITTER_FLOOR,
        WORKLOADS,
        delivered,
        frames_of,
        refuse_wrong_copies,
        splitter_floor_workload,
        workload,
    )

    label = "count sliding 100/50"
    floor = workload(SPLITTER_FLOOR, label)
    due = floor.deliveries(200)
    assert floor.copies(200) == len(due) == 50 + 150 * 2          # the first slide is held by one window
    frames = {seq: frame for seq, frame in enumerate(frames_of(WORKLOADS[label][1], 200))}
    sent = [(port, frames[seq]) for seq, port in sorted(due)]
    assert set(delivered(sent)) == due
    refuse_wrong_copies(SPLITTER_FLOOR, label, delivered(sent), due)
    wrong = delivered(sent[:-1] + [(sent[-1][0] + 1, sent[-1][1])])
    with pytest.raises(RuntimeError, match="2 copies differ from the oracle's"):
        refuse_wrong_copies(SPLITTER_FLOOR, label, wrong, due)
    with pytest.raises(RuntimeError, match="0 copies differ .* 1 sent twice"):
        refuse_wrong_copies(SPLITTER_FLOOR, label, delivered(sent + sent[:1]), due)
    with pytest.raises(ValueError, match="count windows only"):
        splitter_floor_workload("time sliding 1000/500")


def test_the_breakdown_reads_calls_and_their_cost_by_caller_from_a_callgrind_dump():
    """A part of the breakdown is every call into its bmv2 function from
    outside it, with what the call cost, callees included; a function met
    twice in one part (an expression evaluating its operands) is counted at
    its entry only, and a caller can tell two uses of one function apart."""
    from testbed.experiments.bench.breakdown import Calls, call_graph, per_event, role_calls

    def dump(packets):
        return "\n".join([
            "version: 1", "events: Ir", f"summary: {1000 * packets}",
            "fn=(1) SimpleSwitch::ingress_thread()", "5 10",
            "cfn=(2) bm::Pipeline::apply(bm::Packet*)", f"calls={packets} 0", f"6 {700 * packets}",
            "fn=(3) SimpleSwitch::egress_thread(unsigned long)",
            "cfn=(2)", f"calls={2 * packets} 0", f"7 {200 * packets}",
            "fn=(2)", "cfn=(4) bm::Expression::eval_(bm::PHV const&) const", f"calls={3 * packets} 0",
            f"8 {90 * packets}",
            "fn=(4)", "cfn=(4)", f"calls={packets} 0", f"9 {20 * packets}", ""])

    graph = call_graph(dump(10))
    assert graph["SimpleSwitch::ingress_thread()", "bm::Pipeline::apply(bm::Packet*)"] == Calls(10, 7000)
    assert role_calls(graph, "bm::Pipeline::apply(") == Calls(30, 9000)
    assert role_calls(graph, "bm::Pipeline::apply(", "SimpleSwitch::egress_thread(") == Calls(20, 2000)
    assert role_calls(graph, "bm::Expression::eval_(") == Calls(30, 900)      # the inner call is inside
    parts = per_event(dump(10), dump(50), 40)
    assert parts["ingress control"] == (1.0, 700.0) and parts["egress control"] == (2.0, 200.0)
    assert parts["expressions"] == (3.0, 90.0) and parts["parser"] == (0.0, 0.0)


def test_the_breakdown_reads_a_dump_of_every_thread_and_the_last_attempt_at_each_count(tmp_path, capsys):
    """A dump counted thread by thread is its files read as one, each naming
    its functions afresh: the ingress thread's parser and the egress
    thread's pipeline both count.  Of a count's attempts, the last one's
    dump is the row's; a bench before threads were counted apart (one file
    per dump) reads as before; and the row's threads are printed too."""
    import json

    from testbed.experiments.bench.breakdown import bench_dumps, main, per_event

    def thread(packets, function, callee, cost):
        return "\n".join(["version: 1", "events: Ir", f"summary: {cost * packets}", f"fn=(1) {function}", "1 1",
                          f"cfn=(2) {callee}", f"calls={packets} 0", f"2 {cost * packets}", ""])

    def threads(packets):
        return {"07": thread(packets, "SimpleSwitch::ingress_thread()", "bm::Parser::parse(bm::Packet*) const", 300),
                "10": thread(packets, "SimpleSwitch::egress_thread(unsigned long)",
                             "bm::Pipeline::apply(bm::Packet*)", 50)}

    bench = tmp_path / "bench"
    rows = [{"program": "forward", "workload": "any", "threads_per_event": {"ingress": 300, "egress 1": 50}},
            {"program": "splitter", "workload": "w"}]
    bench.mkdir()
    (bench / "experiment.json").write_text(json.dumps({"ours": {"instructions": rows}}))
    for folder, packets in (("forward-0-100-0", 100), ("forward-0-400-0", 1), ("forward-0-400-1", 400)):
        (bench / "callgrind" / folder).mkdir(parents=True)
        for suffix, text in threads(packets).items():
            (bench / "callgrind" / folder / f"callgrind.out.1-{suffix}").write_text(text)
            (bench / "callgrind" / folder / f"callgrind.out-{suffix}").write_text(threads(10_000)[suffix])
    for folder, packets in (("splitter-1-100-0", 100), ("splitter-1-400-0", 400)):
        (bench / "callgrind" / folder).mkdir(parents=True)
        (bench / "callgrind" / folder / "callgrind.out.1").write_text(threads(7)["07"])  # dumped, then superseded
        (bench / "callgrind" / folder / "callgrind.out.2").write_text(threads(packets)["07"])
    dumps = bench_dumps(bench)
    few, many, events = dumps["forward", "any"]
    assert events == 300
    parts = per_event(few, many, events)
    assert parts["parser"] == (1.0, 300.0) and parts["egress control"] == (1.0, 50.0)
    few, many, events = dumps["splitter", "w"]
    assert per_event(few, many, events)["parser"] == (1.0, 300.0)
    assert main([str(bench)]) == 0
    out = capsys.readouterr().out
    assert "| ingress | 300 |" in out and "| egress 1 | 50 |" in out and out.count("bmv2's thread") == 1


def test_the_breakdown_leaves_out_header_vectors_allocated_for_copies():
    """A copy made by replication goes through the packet constructor as a
    received frame does; the allocations the pool's state put under the
    copies are what their constructor calls cost beyond the per-call cost
    both paths share."""
    from testbed.experiments.bench.breakdown import Calls, allocations_in_copies

    graph = {("bm::SwitchWContexts::new_packet_ptr(unsigned int)", "bm::Packet::Packet(unsigned int)"): Calls(4, 1400),
             ("bm::Packet::clone_with_phv() const", "bm::Packet::Packet(unsigned int)"): Calls(2, 700),
             ("bm::PHVSourceIface::get(unsigned int)", "bm::PHVFactory::create() const"): Calls(3, 1500)}
    assert allocations_in_copies(graph) == 500           # 700 less two calls at (1400 + 700 - 1500) / 6
    del graph["bm::Packet::clone_with_phv() const", "bm::Packet::Packet(unsigned int)"]
    assert allocations_in_copies(graph) == 0


def test_the_probe_counts_every_action_and_files_it_under_the_source_most_of_it_comes_from():
    """The probed program counts each action, by id, in a counter array of
    its own ahead of the action's own primitives; the original is left as
    it was.  Actions are filed under the source most of their primitives
    come from, a macro's file counting only when there is no other."""
    from testbed.experiments.bench.breakdown import PROBE, action_home, by_source, probed

    def primitive(file):
        return {"op": "assign", "parameters": [], "source_info": {"filename": f"/x/p4/{file}"}}

    program = {"counter_arrays": [{"name": "MyIngress.stream_in", "id": 4, "size": 8, "is_direct": False}],
               "actions": [{"name": "a", "id": 0, "primitives": [primitive("slides.p4"), primitive("constants.p4"),
                                                                  primitive("forwarding.p4"),
                                                                  primitive("slides.p4")]},
                           {"name": "b", "id": 1, "primitives": [primitive("constants.p4")]},
                           {"name": "NoAction", "id": 2, "primitives": []}]}
    out = probed(program)
    assert out["counter_arrays"][-1] == {"name": PROBE, "id": 5, "size": 3, "is_direct": False}
    assert [a["primitives"][0]["parameters"][1]["value"] for a in out["actions"]] == ["0x0", "0x1", "0x2"]
    assert len(program["actions"][0]["primitives"]) == 4 and len(out["actions"][0]["primitives"]) == 5
    assert [action_home(a) for a in program["actions"]] == ["slides.p4", "constants.p4", "-"]
    assert by_source(program, {0: 20, 1: 10, 2: 10}, 10) == {"-": (1.0, 0.0), "constants.p4": (1.0, 1.0),
                                                            "slides.p4": (2.0, 8.0)}


def test_the_instructions_figure_cuts_each_bar_by_thread_and_outlines_the_busiest(tmp_path, monkeypatch):
    """Read back from the part's parquet table, as ``testbed plot`` reads it:
    a row counted thread by thread is one segment per thread, summing to its
    instructions per event, with its busiest thread outlined; a row of an
    older bench, or of a thread missing from a row, is drawn whole."""
    import matplotlib.colors as mcolors
    import pandas as pd

    from testbed.experiments.bench import figures

    rows = [{"program": "splitter_fixed", "workload": "w", "instructions_per_event": 121_000,
             "threads_per_event": {"receive": 26_000, "ingress": 70_000, "egress 1": 0, "egress 3": 17_000,
                                   "transmit": 7_000, "other": 1_000}},
            {"program": "forward", "workload": "any", "instructions_per_event": 46_000,
             "threads_per_event": {"receive": 20_000, "ingress": 13_000, "egress 1": 10_000, "transmit": 3_000}},
            {"program": "splitter", "workload": "w", "instructions_per_event": 140_000, "threads_per_event": None}]
    pd.DataFrame(rows).to_parquet(tmp_path / "instructions.parquet", index=False)
    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda fig, out: drawn.setdefault("fig", fig) and out)
    figures.FIGURES["instructions"](pd.read_parquet(tmp_path / "instructions.parquet"), tmp_path / "out.png")
    bars = [patch for patch in drawn["fig"].axes[0].patches if patch.get_width() > 0]
    per_row = {y: [bar for bar in bars if abs(bar.get_y() + bar.get_height() / 2 - y) < 0.01] for y in range(3)}
    assert [round(sum(bar.get_width() for bar in per_row[y])) for y in range(3)] == [121_000, 46_000, 140_000]
    outlined = [(y, bar.get_width()) for y, row in per_row.items() for bar in row
                if mcolors.to_rgba(bar.get_edgecolor()) == mcolors.to_rgba("black")]
    assert outlined == [(0, 70_000), (1, 20_000)]
    assert len(per_row[2]) == 1 and [len(per_row[0]), len(per_row[1])] == [5, 4]
