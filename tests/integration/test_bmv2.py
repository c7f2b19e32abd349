"""The P4 program on bmv2, held to the pipeline model and the window oracle.

No Mininet: the switch runs on veth pairs (``tests/support/veth.py``).
Every event goes through bmv2 and through ``SplitterPipeline`` holding the
same plan; the frames each port emits must be byte-for-byte the same, and
the operator sets must equal the oracle's (``Stream.oracle``).

Skipped when p4c, simple_switch or bmv2's Thrift modules are missing
(``testbed.targets.bmv2.toolchain.toolchain_missing``), and the data-plane
tests when not root (veth pairs need it).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional

import pytest

from support.changes import next_timestamp, random_change
from support.s4cases import load_cases
from support.topologies import build, topology_data
from support.topologies import stream as stream_data
from support.veth import Capture, VethRig, by_event, event_key, running, send_frames, send_in_steps
from testbed import ROOT
from testbed.dataplane.contract import (
    COUNT_STATE,
    COUNTERS,
    DROP_CODES,
    FIXED_ONLY,
    FIXED_REGISTERS,
    N_INSTANCES,
    N_STREAMS,
    NOT_FIXED,
    REGISTERS,
    SCHEMA,
    TABLE_SIZES,
    UNKNOWN_STREAM,
    build_registers,
    build_tables,
    drop_counter_index,
    to_int,
)
from testbed.dataplane.control import ChangeRefused, Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.model.batches import Batches
from testbed.dataplane.model.counts import CountCell
from testbed.dataplane.wire import (
    EVENT_OFFSET,
    FrameTemplate,
    batch_events,
    event_frame,
    heartbeat_frame,
    is_batch_port,
)
from testbed.semantics.limits import MAX_BATCH
from testbed.semantics.plan import TRANSITION, SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, WindowSpec, parse_topology
from testbed.semantics.windows import MAX_LATE_SLIDES
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.client import Bmv2Error

MISSING = toolchain.toolchain_missing()
pytestmark = [pytest.mark.bmv2, pytest.mark.skipif(MISSING is not None, reason=f"bmv2 toolchain: {MISSING}")]

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs need root")

VETH_PORTS = 8              # h1 sends; h2..h8 are operator hosts on ports 2..8
#: No Mininet, and nothing another test uses: each worker's rig is veth pairs named by its pid, the switch
#: in a network namespace of the rig's own (its Thrift port inside it), the model in process, and a build
#: of p4/ compiled under a lock and put in place whole (toolchain.compile_program).  So ``make test`` runs
#: these beside the other integration tests (tests/conftest.py), on the unit tests' worker: eight minutes
#: that the integration tests' worker would otherwise spend after the others.
BESIDE_THE_OTHERS = True
STALL_BURST = 1000          # frames sent to a stopped switch: below the ~1,300 its ring holds


@pytest.fixture(scope="module")
def program() -> Path:
    return toolchain.compile_program()


@pytest.fixture(scope="module")
def rig(veth_rig):
    return veth_rig


#: Packets each egress queue holds.  bmv2's default, 64, drops the copies a
#: queue has no room for, and under valgrind or beside the Mininet tests an
#: egress thread falls that far behind: a run of one port's copies went
#: missing while bmv2 had counted their events in.  The tests compare
#: bytes, not bmv2's buffering, so the rig's queues are deep, as p4cep's are.
QUEUE_DEPTH = 100_000


def fresh_switch(rig, program: Path, tmp_path):
    """A fresh simple_switch running ``program`` on the rig's switch ends (empty tables and registers)."""
    from testbed.targets.bmv2.process import Bmv2Process
    proc = Bmv2Process(rig.switch_ends, tmp_path, json_path=program, namespace=rig.namespace)
    with running(proc) as api:
        api.set_queue_depth(QUEUE_DEPTH)
        yield proc, api


@pytest.fixture
def switch(rig, program, tmp_path):
    """The plain build (p4/splitter.p4)."""
    yield from fresh_switch(rig, program, tmp_path)


@pytest.fixture(scope="module")
def fixed_program() -> Path:
    return toolchain.compile_program(program=toolchain.FIXED_PROGRAM)


@pytest.fixture(params=["plain", "fixed"])
def either_switch(request, rig, tmp_path):
    """The plain build, then the build without changes mid-stream
    (p4/splitter_fixed.p4): on events of streams that do not change, each
    must send the model's bytes."""
    program = request.getfixturevalue("program" if request.param == "plain" else "fixed_program")
    yield from fresh_switch(rig, program, tmp_path)


@pytest.fixture(scope="module")
def batch_program() -> Path:
    return toolchain.compile_program(program=toolchain.BATCH_PROGRAM)


@pytest.fixture
def batch_switch(rig, batch_program, tmp_path):
    """The build that takes batches (p4/splitter_batches.p4)."""
    yield from fresh_switch(rig, batch_program, tmp_path)


@pytest.fixture(scope="module")
def splitter_floor_program() -> Path:
    return toolchain.compile_program(program=toolchain.SPLITTER_FLOOR_PROGRAM)


@needs_root
@pytest.mark.parametrize("size, slide, n", [(4, 4, 3), (6, 2, 4), (5, 1, 7)])
def test_the_splitter_floor_sends_each_event_where_the_oracle_does(rig, splitter_floor_program, tmp_path,
                                                                   size, slide, n):
    """p4/baseline/splitter_floor.p4 with the bench's entries: every event of a
    count stream to exactly the operators of the windows the oracle puts it
    in, through the lead-in of a sliding stream and round the ring of N more
    than once (the bench counts it only on such copies)."""
    from testbed.experiments.bench.instructions import delivered
    from testbed.experiments.bench.splitter_floor import floor_config, install_floor, oracle_deliveries

    ports = list(range(2, 2 + n))
    events = size + 2 * n * slide + 1
    template = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", SPLITTER_IP, 1)
    for _proc, api in fresh_switch(rig, splitter_floor_program, tmp_path):
        install_floor(api, floor_config(size, slide, ports))
        due = oracle_deliveries(size, slide, ports, events)
        cap = Capture(rig, range(2, VETH_PORTS + 1))
        try:
            send_frames(rig.host_ends[1], [template.frame(seq, seq) for seq in range(events)])
            sent = delivered(cap.drain(expect=len(due)))
        finally:
            cap.close()
        assert sorted(sent) == sorted(due) and len(set(sent)) == len(sent)


def topology(streams: list[dict]):
    return build(streams, VETH_PORTS, name="bmv2test")


def stream(sid: int, window: dict, operators: list[str], **extra) -> dict:
    return stream_data(sid, window, operators, **extra)


def assert_same_registers(proc, api, model, topo) -> None:
    """bmv2's window state as the model's, register by register, for every
    stream of ``topo``: each register that bmv2's build writes for the
    stream's kind of window.  The build without changes writes no other
    for a count stream, and leaves them 0."""
    program = proc.json_path.name
    for s in topo.streams:
        written = build_registers(program, s.window.kind)
        for name in written:
            assert api.register_read(name, s.id) == model.register_read(name, s.id), (name, s.id)
        for name in set(REGISTERS) - set(written):
            assert api.register_read(name, s.id) == 0, (name, s.id)


class Run:
    """One event sequence through bmv2 and through the model, with the oracle's verdicts."""

    def __init__(self, topo, events: list[tuple[int, int, int]], extra_frames: list[bytes] = ()):
        self.topo = topo
        self.plan = SplitterPlan(topo)
        self.events = events
        ip, mac = self.plan.addresses["h1"]
        self.frames = [event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, sid, seq, ts, key=seq, value=-seq)
                       for sid, seq, ts in events]
        self.extra_frames = list(extra_frames)
        self.model = SplitterPipeline()
        Controller(self.model).install(self.plan)
        self._model_out: Optional[dict] = None

    def oracle(self) -> tuple[dict[tuple[int, int], list[int]], Counter]:
        """Expected ports per event, and drops per (stream, reason)."""
        oracles = {s.id: s.oracle() for s in self.topo.streams}
        ports, drops = {}, Counter()
        self.oracle_operators: dict[tuple[int, int], list[str]] = {}
        for sid, seq, ts in self.events:
            if sid not in oracles:
                ports[(sid, seq)] = []
                drops[(sid, UNKNOWN_STREAM)] += 1
                continue
            v = oracles[sid].step(seq, ts, seq)       # every frame's key is its seq
            ports[(sid, seq)] = sorted(self.plan.instances[op].port for op in v.operators)
            self.oracle_operators[(sid, seq)] = sorted(v.operators)
            if v.dropped:
                drops[(sid, v.dropped)] += 1
        return ports, drops

    def model_output(self) -> dict[tuple[int, int], list[tuple[int, bytes]]]:
        """What the model emits for all frames (computed once: processing changes its state)."""
        if self._model_out is None:
            out = []
            self._copies = []
            for frame in self.frames + self.extra_frames:
                emitted = self.model.process(frame)
                self._copies.append(len(emitted))
                out.extend(emitted)
            self._model_out = by_event(out)
        return self._model_out

    def copies_per_frame(self) -> list[int]:
        """How many frames the model emits for each frame sent, in sending order."""
        self.model_output()
        return self._copies

    def through_bmv2(self, rig: VethRig, api) -> dict[tuple[int, int], list[tuple[int, bytes]]]:
        Controller(api).install(self.plan)
        operator_ports = sorted({self.plan.ports[h] for h in self.topo.operator_hosts()})
        cap = Capture(rig, operator_ports)
        try:
            frames = send_in_steps(cap, rig.host_ends[self.plan.ports["h1"]], self.frames + self.extra_frames,
                                   self.copies_per_frame())
            assert cap.kernel_drops == 0, f"capture sockets dropped {cap.kernel_drops} frames"
        finally:
            cap.close()
        # What bmv2's pipeline counted in, so that a shortfall says whether the
        # events reached the switch at all.
        self.bmv2_stream_in = sum(api.counter_read("stream_in", s.id)[1] for s in self.topo.streams)
        return by_event(frames)


def assert_same(run: Run, got: dict, want: dict) -> None:
    """Per event: same ports (and no duplicate copies), same bytes."""
    oracle_ports, _ = run.oracle()
    got_ports = {k: [p for p, _ in v] for k, v in got.items()}
    want_ports = {k: [p for p, _ in v] for k, v in want.items()}
    # The model against the oracle (sanity), then bmv2 against both.
    assert {k: v for k, v in oracle_ports.items() if v} == want_ports
    mismatched = sorted(k for k in set(got_ports) | set(want_ports) if got_ports.get(k) != want_ports.get(k))
    model_in = sum(run.model.counter_read("stream_in", s.id)[1] for s in run.topo.streams)
    assert not mismatched, (f"{len(mismatched)} events differ (given windows: bmv2's stream_in "
                            f"{run.bmv2_stream_in}, the model's {model_in}), first: "
                            + "; ".join(f"{k}: bmv2 {got_ports.get(k)} model {want_ports.get(k)}"
                                        for k in mismatched[:5]))
    assert got == want, "bmv2 and the model emitted different bytes"


# ----------------------------------------------------------------------
# the compiled program
# ----------------------------------------------------------------------
@pytest.mark.parametrize("build", ["plain", "batches", "fixed"])
def test_program_compiles_with_the_pipeline_schema(build, request):
    """The builds (p4/splitter.p4, p4/splitter_batches.p4 and
    p4/splitter_fixed.p4) serve one control API: each of the contract's
    tables they hold as it says."""
    from testbed.targets.bmv2.program import ProgramInfo, short_name
    program = request.getfixturevalue({"plain": "program", "batches": "batch_program",
                                       "fixed": "fixed_program"}[build])
    info = ProgramInfo.from_file(program)
    config = json.loads(program.read_text())
    held = {short_name(name) for name in info.tables}
    lacks = set(TRANSITION) | set(NOT_FIXED) if build == "fixed" else set(FIXED_ONLY)
    assert held & set(SCHEMA) == set(SCHEMA) - lacks == build_tables(program.name)
    for table, spec in SCHEMA.items():
        if table in lacks:
            continue
        t = info.table(table)
        assert list(t.key_names) == [k.name for k in spec.keys], table
        assert list(t.key_widths) == [k.width for k in spec.keys], table
        assert t.name == spec.qualified(table)
        assert t.max_size == TABLE_SIZES[table], table
        assert set(t.match_types) == {"exact"}
        for action, aspec in spec.actions.items():
            a = info.action(t, action)
            assert a.name == spec.qualified(action)
            assert list(a.param_names) == [p.name for p in aspec.params], action
            assert list(a.param_widths) == [p.width for p in aspec.params], action
        assert {short_name(a) for a in t.actions} - {"NoAction"} == set(spec.actions)
    for name, width in (REGISTERS | (FIXED_REGISTERS if build == "fixed" else {})).items():
        r = info.register(name)
        assert (r.bitwidth, r.size) == (width, N_STREAMS), name
    assert (COUNT_STATE in {short_name(r["name"]) for r in config["register_arrays"]}) == (build == "fixed")
    for name, size in COUNTERS.items():
        assert info.counter(name).size == size, name
    assert N_INSTANCES == COUNTERS["operator_out"]      # per operator instance, a whole host's id its port
    # The compiled output is reused while it was built from the sources as they are.
    source = {"plain": toolchain.PROGRAM, "batches": toolchain.BATCH_PROGRAM,
              "fixed": toolchain.FIXED_PROGRAM}[build]
    assert toolchain.up_to_date(program=source)
    assert toolchain.compile_program(program=source) == program
    assert config["program"].endswith(source.name)
    # Only the batches build parses batches (its headers are what bmv2 would reset on every frame).
    assert ("events_windows[0]" in {h["name"] for h in config["headers"]}) == (build == "batches")


def test_p4build_cli_prints_outputs(tmp_path, monkeypatch, capsys):
    """``python -m testbed.targets.bmv2.toolchain`` (``make p4``) compiles the
    programs it is given into ``--out-dir`` and prints each one's outputs; given
    none, every program the testbed runs.  The compiles are of two small
    baselines into a folder of the test's own: the splitter's builds, which
    take a minute or two each, are compiled into build/ by the tests that run
    them (tests/unit/test_p4_contract.py the plain and CEP builds), and those of
    the bench's baselines by the bench's test."""
    programs = [toolchain.FORWARD_PROGRAM, toolchain.SPLITTER_FLOOR_PROGRAM]
    res = subprocess.run([sys.executable, "-m", "testbed.targets.bmv2.toolchain", "--out-dir", str(tmp_path),
                          *(str(p.relative_to(ROOT)) for p in programs)], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    expected = [path for program in programs for path in toolchain.outputs(tmp_path, program)]
    assert res.stdout.split() == [str(p) for p in expected]
    assert all(json.loads(p.read_text())["pipelines"] for p in expected[::2])
    assert all(p.stat().st_size > 0 for p in expected[1::2])
    # Given no program: every one, in this order, into build/ (the compiles stood in for here).
    compiled = []
    monkeypatch.setattr(toolchain, "compile_program", lambda out_dir, force, program: compiled.append(program))
    assert toolchain.main([]) == 0
    everything = [toolchain.PROGRAM, toolchain.FIXED_PROGRAM, toolchain.BATCH_PROGRAM, toolchain.CEP_PROGRAM,
                  toolchain.FORWARD_PROGRAM, *toolchain.BENCH_BASELINES]
    assert compiled == everything
    assert capsys.readouterr().out.split() == [str(path) for program in everything
                                               for path in toolchain.outputs(program=program)]


# ----------------------------------------------------------------------
# one test per window semantic
# ----------------------------------------------------------------------
SEMANTICS = {
    "count_tumbling": ({"kind": "count", "size": 3, "slide": 3}, ["h2", "h3", "h4"], 1),
    "count_sliding": ({"kind": "count", "size": 5, "slide": 2}, ["h2", "h3", "h4", "h5"], 1),
    "time_tumbling": ({"kind": "time", "size": 6, "slide": 10}, ["h2", "h3", "h4"], 3),   # with gaps
    "time_sliding": ({"kind": "time", "size": 10, "slide": 4}, ["h2", "h3", "h4"], 3),
    # windows that start at events, on steps that do not divide the slide (off the grid)
    "time_tumbling_event": ({"kind": "time", "size": 5, "slide": 5, "starts": "event"}, ["h2", "h3", "h4"], 3),
    "time_sliding_event": ({"kind": "time", "size": 9, "slide": 3, "starts": "event"}, ["h2", "h3", "h4"], 4),
}


@needs_root
@pytest.mark.parametrize("semantic", sorted(SEMANTICS))
def test_semantic_matches_model_and_oracle(semantic, rig, either_switch):
    _proc, api = either_switch
    window, operators, ts_step = SEMANTICS[semantic]
    topo = topology([stream(5, window, operators)])
    events = [(5, seq, 100 + seq * ts_step) for seq in range(60)]
    run = Run(topo, events)
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)
    # At least one copy per operator: the round robin went all the way round.
    assert {p for copies in got.values() for p, _ in copies} == {run.plan.ports[h] for h in operators}


@needs_root
@pytest.mark.parametrize("semantic", sorted(SEMANTICS))
def test_key_split_matches_model_and_oracle(semantic, rig, either_switch):
    """Split by key, each semantic: every event reaches crc32(key) mod N alone,
    with all of its windows in one Windows header, the same bytes as the model."""
    _proc, api = either_switch
    window, operators, ts_step = SEMANTICS[semantic]
    topo = topology([stream(5, window, operators, split="key", query={"kind": "count_by_key"})])
    events = [(5, seq, 100 + seq * ts_step) for seq in range(60)]
    run = Run(topo, events)
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)
    assert all(len(copies) == 1 for copies in got.values())
    assert {p for copies in got.values() for p, _ in copies} == {run.plan.ports[h] for h in operators}


# ----------------------------------------------------------------------
# differential: random specs, awkward inputs
# ----------------------------------------------------------------------
def random_streams(rng: random.Random, ops: Optional[list[str]] = None) -> list[dict]:
    """Five streams covering what the division-free algorithm must get right."""
    ops = ops or [f"h{i}" for i in range(2, VETH_PORTS + 1)]
    out = []
    # count, slide does not divide size, N smaller than the overlap
    slide = rng.randint(2, 5)
    size = slide * rng.randint(2, 4) + rng.randint(1, slide - 1)
    cap = -(-size // slide)
    out.append(stream(1, {"kind": "count", "size": size, "slide": slide}, rng.sample(ops, rng.randint(1, cap - 1))))
    # count, random (tumbling with gaps possible)
    out.append(stream(2, {"kind": "count", "size": rng.randint(1, 9), "slide": rng.randint(1, 9)},
                      rng.sample(ops, rng.randint(1, len(ops)))))
    # time, slide does not divide size, fixed origin (events before it are sent)
    slide = rng.randint(3, 12)
    size = slide * rng.randint(1, 3) + rng.randint(1, slide - 1)
    out.append(stream(3, {"kind": "time", "size": size, "slide": slide, "origin": 1000},
                      rng.sample(ops, rng.randint(2, 5))))
    # time, origin = first event, random spec, no lateness: every step back is too late
    out.append(stream(4, {"kind": "time", "size": rng.randint(1, 30), "slide": rng.randint(1, 30)},
                      rng.sample(ops, rng.randint(1, len(ops)))))
    # time with lateness up to the supported 4 slides: late events step back to their own slide
    slide = rng.randint(2, 8)
    out.append(stream(5, {"kind": "time", "size": slide * rng.randint(1, 3) + rng.randint(0, slide - 1),
                          "slide": slide, "lateness": rng.randint(slide, MAX_LATE_SLIDES * slide)},
                      rng.sample(ops, rng.randint(1, len(ops)))))
    return out


def random_events(rng: random.Random, topo, n: int) -> list[tuple[int, int, int]]:
    """Interleaved events; time streams get small steps, gaps of several
    slides, and steps back in time; stream 3 starts before its origin;
    stream 5's steps back reach up to five slides, within its lateness and
    beyond.  A few events of an unconfigured stream (99) are mixed in."""
    slides = {s.id: s.window.slide for s in topo.streams}
    ts = {1: 0, 2: 0, 3: 1000 - 5 * slides[3], 4: 50, 5: 100}
    newest = dict(ts)
    seq = defaultdict(int)
    events = []
    for i in range(n):
        sid = 99 if i % 500 == 250 else rng.choice([1, 2, 3, 4, 5])
        t = ts.get(sid, 0)
        if sid in (3, 4, 5):
            r = rng.random()
            if r < 0.85:
                ts[sid] = newest[sid] = newest[sid] + rng.randint(0, 3)
            elif r < 0.92:                                              # gap of several slides
                ts[sid] = newest[sid] = newest[sid] + rng.randint(2, 8) * slides[sid] + rng.randint(0, slides[sid])
            else:                                                       # behind the newest timestamp
                back = rng.randint(1, 5 * slides[sid]) if sid == 5 else rng.randint(1, 4)
                ts[sid] = max(0, newest[sid] - back)
            t = ts[sid]
        events.append((sid, seq[sid], t))
        seq[sid] += 1
    return events


@needs_root
@pytest.mark.parametrize("seed", [1, 2])
def test_differential_random_specs(seed, rig, either_switch):
    _proc, api = either_switch
    rng = random.Random(seed)
    topo = topology(random_streams(rng))
    events = random_events(rng, topo, 3000)
    non_event = event_frame("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", SPLITTER_IP, 1, 0, 0,
                            sport=1234)[:-1]   # one byte short of an event
    run = Run(topo, events, extra_frames=[non_event])
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)

    # Drop counters: bmv2 = model = oracle, per stream and reason.
    oracle_ports, oracle_drops = run.oracle()
    # The awkward cases are there whatever the draw.
    newest, late_delivered = -1, 0
    for sid, seq, ts in events:
        if sid == 5:
            late_delivered += ts < newest and bool(oracle_ports[(5, seq)])
            newest = max(newest, ts)
    assert oracle_drops[(3, "before_origin")] > 0 and oracle_drops[(4, "too_late")] > 0
    assert oracle_drops[(5, "too_late")] > 0 and late_delivered > 0
    for sid in (1, 2, 3, 4, 5, 99):
        for reason, code in DROP_CODES.items():
            index = drop_counter_index(sid, reason)
            assert api.counter_read("stream_drops", index)[1] == oracle_drops[(sid, reason)], (sid, reason)
            assert api.counter_read("stream_drops", index) == run.model.counter_read("stream_drops", index)
        for name in ("stream_in", "stream_out"):
            assert api.counter_read(name, sid) == run.model.counter_read(name, sid), (name, sid)
    for port in range(1, VETH_PORTS + 1):
        assert api.counter_read("operator_out", port) == run.model.counter_read("operator_out", port)
    assert api.counter_read("non_event", 0)[1] >= 1
    # The window state itself, register by register.
    assert_same_registers(_proc, api, run.model, topo)


# ----------------------------------------------------------------------
# starts: event (S4's window-start rule, docs/windows.md "Where windows start")
# ----------------------------------------------------------------------
EVENT_STARTS = {
    "tumbling": {"kind": "time", "size": 5, "slide": 5},     # S4's time-window cases' specs
    "sliding": {"kind": "time", "size": 9, "slide": 3},
}
S4_CASES = {case.name: case for case in load_cases()}


@needs_root
@pytest.mark.parametrize("name", sorted(EVENT_STARTS))
def test_event_starts_match_model_and_oracle(name, rig, either_switch):
    """The same timestamps through three streams: the spec with starts: event,
    on the grid, and with starts: event and a fixed origin the stream begins
    before.  Irregular steps, gaps of several slides and steps back (too
    late: such streams have no lateness).  bmv2 sends the model's bytes, counts
    its drops and ends with its registers; both follow the oracle; and the
    two rules do part on these timestamps."""
    _proc, api = either_switch
    rng = random.Random(name)
    spec = EVENT_STARTS[name]
    ops = ["h2", "h3", "h4", "h5", "h6", "h7"]
    topo = topology([stream(1, {**spec, "starts": "event"}, ops), stream(2, {**spec, "starts": "grid"}, ops),
                     stream(3, {**spec, "starts": "event", "origin": 60}, ops[:4])])
    newest, stamps = 50, []
    for _ in range(250):
        r = rng.random()
        if r < 0.8:
            newest += rng.randint(0, 4)
        elif r < 0.93:                                    # a gap of several slides
            newest += rng.randint(2, 6) * spec["slide"] + rng.randint(0, spec["slide"])
        else:                                             # behind the newest timestamp
            stamps.append(newest - rng.randint(1, 4))
            continue
        stamps.append(newest)
    stamps = [40, 45] + stamps              # stream 3 begins before its origin
    events = [(sid, seq, ts) for seq, ts in enumerate(stamps) for sid in (1, 2, 3)]
    run = Run(topo, events)
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)

    oracle_ports, oracle_drops = run.oracle()
    assert oracle_drops[(1, "too_late")] > 0 and oracle_drops[(3, "before_origin")] > 0
    assert sum(oracle_ports[(1, seq)] != oracle_ports[(2, seq)] for seq in range(len(stamps))) > 10
    for sid in (1, 2, 3):
        for reason in DROP_CODES:
            index = drop_counter_index(sid, reason)
            assert api.counter_read("stream_drops", index)[1] == oracle_drops[(sid, reason)], (sid, reason)
    assert_same_registers(_proc, api, run.model, topo)


@needs_root
@pytest.mark.parametrize("name", sorted(S4_CASES))
def test_s4_cases_reach_s4s_ports_on_bmv2(name, rig, either_switch):
    """S4's PTF cases (tests/data/s4_ptf_cases.yaml) under starts: event:
    every packet leaves bmv2 on the ports S4's tests expect, as the model's."""
    _proc, api = either_switch
    case = S4_CASES[name]
    run = Run(case.topology("event"), case.events())
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)
    host_of = {port: host for host, port in run.plan.ports.items()}
    sent = [case.s4_ports([host_of[port] for port, _ in got.get((sid, seq), [])])
            for sid, seq, _ts in case.events()]
    assert sent == case.expected()


#: Hosts of the rig that run several operator instances (testbed.semantics.instances).
SHARED = {"h2": 6, "h3": 3}


@needs_root
@pytest.mark.parametrize("seed", [7, 8])
def test_instances_on_shared_hosts_match_the_model_and_the_oracle(seed, rig, either_switch):
    """Instances on shared hosts are reached through nodes named by their rid, and
    egress keys on the instance: bmv2 = model = oracle, every copy addressed to the
    oracle's instance, and operator_out counted per instance alike."""
    _proc, api = either_switch
    rng = random.Random(seed)
    ops = [f"{h}.{i}" for h, k in SHARED.items() for i in range(k)] + [f"h{i}" for i in range(4, VETH_PORTS + 1)]
    data = topology_data(random_streams(rng, ops), VETH_PORTS, name="bmv2shared")
    data["hosts"].update({h: {"instances": k} for h, k in SHARED.items()})
    topo = parse_topology(data)
    assert any(inst.shared for inst in SplitterPlan(topo).instances.values())
    run = Run(topo, random_events(rng, topo, 3000))
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)
    _by_ip, addressed = assert_addressed_as_the_oracle(run, got)
    assert {name.split(".")[0] for names in addressed.values() for name in names if "." in name} == set(SHARED)
    for inst in run.plan.instances.values():
        assert api.counter_read("operator_out", inst.id) == run.model.counter_read("operator_out", inst.id)


def assert_addressed_as_the_oracle(run, got) -> tuple[dict, dict]:
    """Each copy bmv2 sent carries the IP of the instance the oracle sends it to;
    returns ``ip -> instance`` and, per event, the instances its copies are addressed to."""
    by_ip = {inst.ip: name for name, inst in run.plan.instances.items()}
    addressed = {key: sorted(by_ip[socket.inet_ntoa(frame[30:34])] for _port, frame in copies)
                 for key, copies in got.items()}
    assert addressed == {key: ops for key, ops in run.oracle_operators.items() if ops}
    return by_ip, addressed


@needs_root
@pytest.mark.parametrize("seed", [7, 8])
def test_racked_hosts_match_the_model_and_the_oracle(seed, rig, either_switch):
    """Hosts in a rack share its one port and are reached as shared instances are:
    bmv2 = model = oracle, and every copy leaves on the rack's port with the MAC
    of the host it is for, the one thing the rack's bridge delivers by."""
    _proc, api = either_switch
    rng = random.Random(seed)
    racked = ["h2", "h3", "h4", "h5"]
    hosts = VETH_PORTS + len(racked) - 1          # one port for the rack, the rig's 8 in all
    ops = ["h2", "h3.0", "h3.1", "h4", "h5"] + [f"h{i}" for i in range(6, hosts + 1)]
    data = topology_data(random_streams(rng, ops), hosts, name="bmv2racks", racks={"r1": {"hosts": racked}})
    data["hosts"]["h3"] = {"instances": 2}
    topo = parse_topology(data)
    assert topo.port_count() == VETH_PORTS
    run = Run(topo, random_events(rng, topo, 3000))
    want = run.model_output()
    got = run.through_bmv2(rig, api)
    assert_same(run, got, want)
    by_ip, addressed = assert_addressed_as_the_oracle(run, got)
    rack_port = topo.switch_ports()["h2"]
    seen = set()
    for copies in got.values():
        for port, frame in copies:
            inst = run.plan.instances[by_ip[socket.inet_ntoa(frame[30:34])]]
            assert port == inst.port and frame[0:6] == bytes.fromhex(inst.mac.replace(":", ""))
            if port == rack_port:
                seen.add(inst.host)
    # random_streams picks each stream's operators: at least two racked hosts must be among them.
    planned = {run.plan.instances[op].host for ops in addressed.values() for op in ops} & set(racked)
    assert seen == planned and len(planned) >= 2


# ----------------------------------------------------------------------
# control plane
# ----------------------------------------------------------------------
def planned_entries(plan: SplitterPlan, table: str) -> list[dict]:
    """The plan's entries of one table in ``table_entries`` form (MACs and IPs as ints)."""
    out = []
    for e in plan.entries():
        if e.table == table:
            kinds = [p.kind for p in SCHEMA[table].actions[e.action].params]
            out.append({"match": [int(v) for v in e.match], "action": e.action,
                        "params": [to_int(v, k) for k, v in zip(kinds, e.params)]})
    return sorted(out, key=lambda e: e["match"])


@needs_root
def test_control_plane_state_reads_back_as_planned(either_switch):
    """Each build's tables hold the plan's entries of them, as the model's do."""
    _proc, api = either_switch
    topo = topology([
        stream(1, {"kind": "count", "size": 5, "slide": 1}, ["h2", "h3", "h4", "h5", "h6", "h7"]),
        stream(2, {"kind": "count", "size": 7, "slide": 3}, ["h3", "h5"]),
        stream(3, {"kind": "time", "size": 25, "slide": 10, "origin": 1000}, ["h2", "h4", "h8"]),
        stream(4, {"kind": "time", "size": 1000, "slide": 1000}, ["h6", "h7"]),
    ])
    plan = SplitterPlan(topo)
    model = SplitterPipeline()
    Controller(model).install(plan)
    ours = Controller(api)
    ours.install(plan)

    held = api.held_tables()
    assert "operator_back" in held or "operator_position" in held
    for table in (t for t in SCHEMA if t in held):
        entries = api.table_entries(table)
        assert entries == model.table_entries(table), table
        assert [{k: v for k, v in e.items() if k != "handle"} for e in entries] == planned_entries(plan, table)
        assert sorted(e["handle"] for e in entries) == list(range(len(entries)))
    planned_groups = {g.mgid: [(rid, list(ports)) for rid, ports in g.nodes] for g in plan.groups}
    for dump in (api.mc_dump(), model.mc_dump()):
        assert {mgid: [(n["rid"], n["ports"]) for n in nodes] for mgid, nodes in dump.items()} == planned_groups
    assert api.mc_dump() == model.mc_dump()
    # The groups went in three pipelined steps; each node's handle is still its own group's.
    assert {mgid: [n["handle"] for n in nodes] for mgid, nodes in api.mc_dump().items()} == ours.nodes

    # A refusal inside a pipelined chunk raises bmv2's own code, and every
    # reply of the chunk was read: the connection stays in step.
    first = plan.entries()[0]
    twice = [(first.table, first.action, list(first.match), list(first.params))] * 2
    with pytest.raises(Bmv2Error, match="DUPLICATE_ENTRY"):
        api.table_add_many(twice)
    assert api.table_entries(first.table) == model.table_entries(first.table)

    api.register_write("slide_start", 3, 12345)
    api.register_write("last_ts", 7, 2**63 - 1)
    assert api.register_read("slide_start", 3) == 12345
    assert api.register_read("last_ts", 7) == 2**63 - 1
    assert len(api.register_read("newest_op")) == N_STREAMS
    Controller(api).reset_window_state()
    assert api.register_read("slide_start", 3) == 0 and api.register_read("last_ts", 7) == 0

    api.table_clear("unicast")
    assert api.table_entries("unicast") == []
    with pytest.raises(Exception, match="does not fit"):
        api.table_add("operator_count", "set_operator_count", ["70000", "0"], ["1", "1"])   # stream id > 16 bits


def install_but(run: Run, api, left_out) -> None:
    """The plan's groups and entries on both targets (a fresh model for the
    run), but for the entries ``left_out`` picks, and for tables the
    switch's build does not hold."""
    run.model = SplitterPipeline()
    for target in (run.model, api):
        for g in run.plan.groups:
            target.mc_mgrp_create(g.mgid)
            for rid, ports in g.nodes:
                target.mc_node_associate(g.mgid, target.mc_node_create(rid, list(ports)))
        held = target.held_tables()
        for e in run.plan.entries():
            if e.table in held and not left_out(e):
                target.table_add(e.table, e.action, [str(v) for v in e.match], [str(v) for v in e.params])


@needs_root
def test_unknown_stream_and_missing_rewrite_are_dropped(rig, either_switch):
    """Events of a stream without entries are counted as unknown_stream; a
    copy for a port without an egress_rewrite entry never leaves."""
    _proc, api = either_switch
    topo = topology([stream(1, {"kind": "count", "size": 1, "slide": 1}, ["h2", "h3"])])
    run = Run(topo, [(1, s, s) for s in range(4)] + [(9, 0, 0), (9, 1, 1)])
    # Install everything but h3's rewrite, on both targets: its egress_rewrite
    # entry, and in the build without changes its operator_back entries
    # (keyed on the port second to last, as egress_rewrite's is).
    install_but(run, api, lambda e: e.table in ("egress_rewrite", "operator_back")
                and e.match[-2] == run.plan.ports["h3"])
    cap = Capture(rig, [run.plan.ports["h2"], run.plan.ports["h3"]])
    try:
        send_frames(rig.host_ends[1], run.frames)
        got = by_event(cap.drain(expect=sum(len(v) for v in run.model_output().values())))
    finally:
        cap.close()
    assert got == run.model_output()
    assert sorted(got) == [(1, 0), (1, 2)]
    assert api.counter_read("stream_drops", drop_counter_index(9, UNKNOWN_STREAM))[1] == 2
    assert api.counter_read("stream_in", 1)[1] == 4
    assert api.counter_read("stream_out", 1)[1] == 2


@needs_root
def test_an_event_no_destination_routes_is_counted_once_as_dropped(rig, either_switch):
    """Windows found for every event, but no unicast or multicast entry: both
    targets send nothing, and count each event once, as dropped
    (unknown_stream), none in stream_in, which counts the events sent on
    (forwarding.p4, COUNT_SENT_ON)."""
    _proc, api = either_switch
    topo = topology([stream(1, {"kind": "count", "size": 2, "slide": 1}, ["h2", "h3"])])
    run = Run(topo, [(1, s, s) for s in range(5)])
    install_but(run, api, lambda e: e.table in ("unicast", "multicast"))
    cap = Capture(rig, [run.plan.ports["h2"], run.plan.ports["h3"]])
    try:
        send_frames(rig.host_ends[1], run.frames)
        unknown = drop_counter_index(1, UNKNOWN_STREAM)
        wait_until(lambda: api.counter_read("stream_drops", unknown)[1] == len(run.frames), 10,
                   "bmv2 to drop every event")
        got = by_event(cap.drain(expect=0))
    finally:
        cap.close()
    assert run.model_output() == {} and got == {}
    for target in (api, run.model):
        assert target.counter_read("stream_drops", unknown)[1] == 5
        assert target.counter_read("stream_in", 1)[1] == 0
        assert target.counter_read("stream_out", 1)[1] == 0
    assert api.register_read("newest_window", 1) == run.model.register_read("newest_window", 1) > 0


@needs_root
def test_a_stalled_switch_keeps_a_burst_of_frames_in_its_input_ring(rig, switch):
    """bmv2 stopped (SIGSTOP) while 1,000 frames arrive takes every one of them
    once it runs again: its ports' libpcap rings are sized by the MTU
    (``frame_sized_rings``).  With a veth's default offloads they held 32."""
    proc, api = switch
    topo = topology([stream(1, {"kind": "count", "size": 1, "slide": 1}, ["h2"])])
    run = Run(topo, [(1, s, s) for s in range(STALL_BURST)])
    Controller(api).install(run.plan)
    # The burst leaves at once when the switch runs again: a queue of bmv2's
    # default depth (64) would drop most of it on the way out.
    api.set_queue_depth(STALL_BURST)
    cap = Capture(rig, [run.plan.ports["h2"]])
    try:
        proc.proc.send_signal(signal.SIGSTOP)
        try:
            send_frames(rig.host_ends[run.plan.ports["h1"]], run.frames, rate=20_000)
        finally:
            proc.proc.send_signal(signal.SIGCONT)
        got = cap.drain(expect=STALL_BURST)
    finally:
        cap.close()
    assert api.counter_read("stream_in", 1)[1] == STALL_BURST
    assert sorted(event_key(frame) for _port, frame in got) == [(1, s) for s in range(STALL_BURST)]


# ----------------------------------------------------------------------
# reconfiguration at run time
# ----------------------------------------------------------------------
class HitCounter(dict):
    """The model's handover table, counting the lookups that hit it."""

    def __init__(self):
        super().__init__()
        self.hits = Counter()

    def get(self, key, default=None):
        value = super().get(key, default)
        if value is not None:
            self.hits["old only" if key[-1] == 0 else "union"] += 1
        return value


def changed(rng: random.Random, s, hosts: list[str]):
    """A new operator list and, for count streams or keeping the lateness, a new spec."""
    w = s.window.model_dump(exclude_none=True)
    if rng.random() < 0.6:
        w["size"], w["slide"] = rng.randint(1, 12), rng.randint(1, 8)
        if w["kind"] == "time":
            w["lateness"] = rng.randint(0, min(s.window.lateness, MAX_LATE_SLIDES * w["slide"]))
    ops = rng.sample(hosts, rng.randint(1, len(hosts)))
    return s.model_copy(update={"window": type(s.window).model_validate(w), "operators": ops})


def arm_changes(rng: random.Random, plan: SplitterPlan, controllers, current: dict, chance: float,
                new_config, skip=()) -> list[int]:
    """Between two phases: each stream that the model and bmv2 both see
    settled gets, with probability ``chance``, ``new_config(stream)`` armed on
    both.  ``current`` follows; returns the streams changed."""
    armed = []
    for sid, s in list(current.items()):
        if sid in skip:
            continue
        settled = [ctl.settled(sid) for ctl in controllers]
        assert settled[0] == settled[1], f"stream {sid}: model and bmv2 disagree on settled"
        if settled[0] and rng.random() < chance:
            current[sid] = new_config(s)
            for ctl in controllers:
                ctl.change(plan, current[sid], timeout=0)
            armed.append(sid)
    return armed


@needs_root
def test_the_build_without_changes_splits_as_the_model_and_refuses_a_change(rig, fixed_program, tmp_path):
    """bmv2's build without changes mid-stream (a topology that changes no
    stream runs on it) says so to the control plane, which refuses a change
    before it writes a thing."""
    topo = topology([stream(5, {"kind": "count", "size": 4, "slide": 2}, ["h2", "h3", "h4"])])
    run = Run(topo, [(5, seq, 100 + seq) for seq in range(24)])
    for _proc, api in fresh_switch(rig, fixed_program, tmp_path):
        assert not api.takes_changes()
        assert_same(run, run.through_bmv2(rig, api), run.model_output())
        # 24 events in slides of 2 on 3 operators: the twelfth slide is full,
        # window 11's, on operator 11 mod 3 (p4/counts.p4); nothing else written.
        assert CountCell.unpack(api.register_read(COUNT_STATE, 5)) == (2, 2)
        assert api.register_read("newest_window", 5) == 11
        assert api.register_read(COUNT_STATE, 5) == run.model.register_read(COUNT_STATE, 5)
        assert api.register_read("event_count", 5) == api.register_read("begun", 5) == 0
        ctl = Controller(api)
        ctl.streams = {s.id: s for s in topo.streams}
        new = topo.streams[0].model_copy(update={"operators": ["h5"]})
        with pytest.raises(ChangeRefused, match="stream 5: the switch runs the build without changes"):
            ctl.change(run.plan, new, timeout=0)
        assert api.register_read("armed", 5) == 0 and api.register_read("epoch", 5) == 0
        assert [e["match"] for e in api.table_entries("window_spec")] == [[5, 0]]


@needs_root
@pytest.mark.parametrize("seed", [3, 4])
def test_differential_changes_while_events_flow(seed, rig, switch):
    """The same changes, armed between the same events, on bmv2 and on the
    model: the same frames, drop counters and registers, and the same
    boundaries.  Frames go in phases; a change is armed between two."""
    _proc, api = switch
    assert api.takes_changes()
    rng = random.Random(seed)
    hosts = [f"h{i}" for i in range(2, VETH_PORTS + 1)]
    topo = topology([stream(1, {"kind": "count", "size": 4, "slide": 1}, ["h2", "h3", "h4", "h5"]),
                     stream(2, {"kind": "time", "size": 10, "slide": 4, "origin": 0, "lateness": 12},
                            ["h6", "h7", "h8"]),
                     stream(3, {"kind": "count", "size": 2, "slide": 3}, ["h2", "h8"])])
    plan = SplitterPlan(topo)
    model = SplitterPipeline()
    model.tables["handover"] = handover = HitCounter()
    controllers = (Controller(model), Controller(api))
    for ctl in controllers:
        ctl.install(plan)
    current = {s.id: s for s in topo.streams}
    ip, mac = plan.addresses["h1"]
    operator_ports = sorted({plan.ports[h] for h in hosts})
    seq, newest, applied = Counter(), {2: 0}, Counter()
    want, got = [], []
    cap = Capture(rig, operator_ports)
    try:
        for phase in range(12):
            if phase:
                applied.update(arm_changes(rng, plan, controllers, current, 0.8, lambda s: changed(rng, s, hosts)))
            frames = []
            for _ in range(120):
                sid = rng.choice([1, 2, 3])
                ts = 0
                if sid == 2:
                    if rng.random() < 0.2:
                        ts = max(0, newest[2] - rng.randint(0, current[2].window.lateness + 3))
                    else:
                        newest[2] += rng.choice([0, 1, 2, 3, 9])
                        ts = newest[2]
                frames.append(event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, sid, seq[sid], ts,
                                          key=seq[sid], value=phase))
                seq[sid] += 1
            frames.append(heartbeat_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, phase))
            phase_out = []
            for frame in frames:
                phase_out.extend(model.process(frame, plan.ports["h1"]))
            want.extend(phase_out)
            send_frames(rig.host_ends[plan.ports["h1"]], frames)
            got = cap.drain(expect=len(want))      # every frame so far
        assert cap.kernel_drops == 0
    finally:
        cap.close()
    assert sum(applied.values()) >= 8
    # Events in old and new windows at once (the union) and, before a
    # boundary or in a gap of the new spec, in old windows alone.
    assert handover.hits["union"] >= 20 and handover.hits["old only"] >= 1, handover.hits
    got_by, want_by = by_event(got), by_event(want)
    mismatched = sorted(k for k in set(got_by) | set(want_by) if got_by.get(k) != want_by.get(k))
    assert not mismatched, (f"{len(mismatched)} events differ, first: "
                            + "; ".join(f"{k}: bmv2 {[p for p, _ in got_by.get(k, [])]} "
                                        f"model {[p for p, _ in want_by.get(k, [])]}" for k in mismatched[:5]))
    assert api.counter_read("heartbeats", plan.ports["h1"]) == model.counter_read("heartbeats", plan.ports["h1"])
    assert api.counter_read("heartbeats", plan.ports["h1"])[1] == 12
    assert api.counter_read("non_event", 0) == model.counter_read("non_event", 0) == (0, 0)
    for sid in (1, 2, 3):
        assert api.register_read("epoch", sid) == model.register_read("epoch", sid) > 0
        for reason in DROP_CODES:
            index = drop_counter_index(sid, reason)
            assert api.counter_read("stream_drops", index) == model.counter_read("stream_drops", index), (sid, reason)
        assert model.counter_read("stream_drops", drop_counter_index(sid, UNKNOWN_STREAM))[1] == 0
        for name in REGISTERS:
            assert api.register_read(name, sid) == model.register_read(name, sid), (name, sid)


# ----------------------------------------------------------------------
# failure detection
# ----------------------------------------------------------------------
@needs_root
def test_a_silent_operator_is_detected_from_bmv2s_heartbeat_counters(rig, switch):
    """Operator hosts beat through bmv2; one stops; the monitor, reading only
    the switch's counters, declares that one failed and no other."""
    from testbed.dataplane.liveness import HeartbeatMonitor, detection_bound
    from testbed.emulation.heartbeat import HeartbeatSender
    _proc, api = switch
    senders = {port: HeartbeatSender(rig.host_ends[port], (f"02:00:00:00:00:{port:02x}", f"10.0.0.{port}"),
                                     ("02:00:00:00:00:fe", SPLITTER_IP)).start()
               for port in (2, 3, 4)}
    failures = []
    monitor = HeartbeatMonitor(api, senders, on_failure=failures.append).start()
    try:
        wait_until(lambda: all(s.count > 0 for s in monitor.ports.values()), 5, "heartbeats through bmv2")
        senders[3].stop()
        stopped = time.monotonic()
        wait_until(lambda: failures, 5 + detection_bound(), "the failure to be detected")
        time.sleep(detection_bound())           # long enough for a wrong second detection to show
    finally:
        monitor.stop()
        for port, sender in senders.items():
            if port != 3:
                sender.stop()
    assert [d.port for d in failures] == [3] and monitor.failed() == [3]
    assert failures[0].detected > stopped
    for port in (2, 4):
        assert api.counter_read("heartbeats", port)[1] >= senders[port].sent - 1 > 0
    assert api.counter_read("non_event", 0)[1] == 0


def wait_until(done, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


# ----------------------------------------------------------------------
# batches (docs/wire.md, "Batches")
# ----------------------------------------------------------------------
BATCH_HOSTS = [f"h{i}" for i in range(2, VETH_PORTS + 1)]
#: The four semantics, with and without lateness, and a stream split by key.
BATCHED_STREAMS = {
    11: {"kind": "count", "size": 6, "slide": 6},
    12: {"kind": "count", "size": 5, "slide": 1},
    13: {"kind": "time", "size": 10, "slide": 10},
    14: {"kind": "time", "size": 10, "slide": 3, "lateness": 12},
    15: {"kind": "time", "size": 7, "slide": 7, "lateness": 7},
    # Slides far longer than a batch, so that most batches lie in one slide
    # (p4/batches.p4, BATCH_WHOLE_SLIDE); their changes keep them long.
    17: {"kind": "count", "size": 100, "slide": 100},
    18: {"kind": "count", "size": 40, "slide": 13},
    19: {"kind": "time", "size": 400, "slide": 400},
    20: {"kind": "time", "size": 300, "slide": 100, "lateness": 30},
}
LONG_SLIDES = (17, 18, 19, 20)
KEYED = 16


def batch_change(rng: random.Random, s):
    """A random change of ``s``; the long-slide streams stay long."""
    if s.id not in LONG_SLIDES:
        return random_change(rng, s, BATCH_HOSTS)
    if s.window.kind == "time":
        window = WindowSpec(kind="time", size=rng.randint(200, 600), slide=rng.randint(100, 400),
                            lateness=s.window.lateness)
    else:
        window = WindowSpec(kind="count", size=rng.randint(20, 120), slide=rng.randint(5, 120))
    return s.model_copy(update={"window": window,
                                "operators": rng.sample(BATCH_HOSTS, rng.randint(1, len(BATCH_HOSTS)))})


def batched_topology(rng: random.Random):
    streams = [{**stream(sid, dict(w), rng.sample(BATCH_HOSTS, rng.randint(1, len(BATCH_HOSTS)))),
                "batch": {"events": MAX_BATCH, "max_delay": 0.01}}
               for sid, w in BATCHED_STREAMS.items()]
    streams.append({**stream(KEYED, {"kind": "count", "size": 4, "slide": 2}, BATCH_HOSTS[:5]),
                    "batch": {"events": MAX_BATCH, "max_delay": 0.01},
                    "split": "key", "query": {"kind": "count_by_key"}})
    return topology(streams)


def batch_copies(out) -> Counter:
    """``(port, frame)`` pairs of batch copies, as a multiset."""
    return Counter((port, frame) for port, frame in out if is_batch_port(frame))


@needs_root
@pytest.mark.parametrize("seed", [5, 6])
def test_batches_match_the_model_with_changes_inside_them(seed, rig, batch_switch, monkeypatch):
    """Batches of 1 .. 16 events of the four semantics (late events among
    them) and of a stream split by key, with changes armed between batches
    so that boundaries fall inside them, and count and time batches that
    lie in one slide, which take one pass: bmv2 and the model emit the same copies,
    byte for byte, and end with the same registers and counters.
    (tests/unit/test_batches.py holds the model's batches to its single
    events, and those to the oracle.)"""
    whole, whole_time = [], []
    take = Batches._whole_slide
    _proc, api = batch_switch
    rng = random.Random(seed)
    topo = batched_topology(rng)

    def spy(self, stream, *args):
        whole.append(take(self, stream, *args))
        if topo.stream(stream).window.kind == "time":
            whole_time.append(whole[-1])
        return whole[-1]

    monkeypatch.setattr(Batches, "_whole_slide", spy)
    plan = SplitterPlan(topo)
    model = SplitterPipeline()
    controllers = (Controller(model), Controller(api))
    for ctl in controllers:
        ctl.install(plan)
    current = {s.id: s for s in topo.streams}
    ip, mac = plan.addresses["h1"]
    templates = {sid: FrameTemplate(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, sid) for sid in current}
    seq, newest = Counter(), Counter()
    changes, inside = 0, 0
    want: list = []
    cap = Capture(rig, sorted({plan.ports[h] for h in BATCH_HOSTS}), events_only=False)
    try:
        for phase in range(10):
            if phase:
                changes += len(arm_changes(rng, plan, controllers, current, 0.7,
                                           lambda s: batch_change(rng, s), skip=(KEYED,)))
            frames = []
            for _ in range(30):
                sid = rng.choice(sorted(current))
                window = current[sid].window
                events = []
                for _ in range(rng.randint(1, MAX_BATCH)):
                    ts, newest[sid] = next_timestamp(rng, window.kind, window.lateness, newest[sid])
                    events.append((seq[sid], ts, rng.randint(0, 40), rng.randint(-9, 9)))
                    seq[sid] += 1
                epoch = model.registers["epoch"][sid]
                want.extend(model.process(templates[sid].batch(events), plan.ports["h1"]))
                inside += len(events) > 1 and model.registers["epoch"][sid] != epoch
                frames.append(templates[sid].batch(events))
            send_frames(rig.host_ends[plan.ports["h1"]], frames, rate=300)
            got = cap.drain(expect=len(want))
        assert cap.kernel_drops == 0
    finally:
        cap.close()
    assert changes >= 10 and inside >= 3, (changes, inside)
    assert sum(whole) >= 30 and whole.count(False) >= 30, (sum(whole), len(whole))
    assert sum(whole_time) >= 10 and whole_time.count(False) >= 10, (sum(whole_time), len(whole_time))
    got_copies, want_copies = batch_copies(got), batch_copies(want)
    assert sum(want_copies.values()) == len(want) > 100
    missing, extra = want_copies - got_copies, got_copies - want_copies
    assert not missing and not extra, (f"{sum(missing.values())} copies only from the model, "
                                       f"{sum(extra.values())} only from bmv2")
    for sid in current:
        for name in REGISTERS:
            assert api.register_read(name, sid) == model.register_read(name, sid), (name, sid)
        for reason in DROP_CODES:
            index = drop_counter_index(sid, reason)
            assert api.counter_read("stream_drops", index) == model.counter_read("stream_drops", index), (sid, reason)
        for counter in ("stream_in", "stream_out"):
            assert api.counter_read(counter, sid) == model.counter_read(counter, sid), (counter, sid)
    for port in sorted({plan.ports[h] for h in BATCH_HOSTS}):
        assert api.counter_read("operator_out", port) == model.counter_read("operator_out", port), port
    assert api.counter_read("non_event", 0) == model.counter_read("non_event", 0) == (0, 0)
    late = sum(model.counter_read("stream_drops", drop_counter_index(sid, "too_late"))[1] for sid in current)
    assert late > 0, "some events should have come too late"


@needs_root
def test_batches_reach_the_oracles_operators(rig, batch_switch):
    """Without changes, each batched event reaches on bmv2 exactly the
    operators the window oracle gives it, in one frame per operator and batch."""
    _proc, api = batch_switch
    rng = random.Random(8)
    topo = batched_topology(rng)
    plan = SplitterPlan(topo)
    Controller(api).install(plan)
    ip, mac = plan.addresses["h1"]
    oracles = {s.id: s.oracle() for s in topo.streams}
    seq, newest = Counter(), Counter()
    frames, want = [], {}
    for _ in range(120):
        sid = rng.choice(sorted(oracles))
        window = topo.stream(sid).window
        events = []
        for _ in range(rng.randint(1, MAX_BATCH)):
            ts, newest[sid] = next_timestamp(rng, window.kind, window.lateness, newest[sid])
            key = rng.randint(0, 40)
            verdict = oracles[sid].step(seq[sid], ts, key)
            want[(sid, seq[sid])] = sorted(plan.ports[h] for h in verdict.operators)
            events.append((seq[sid], ts, key, 0))
            seq[sid] += 1
        frames.append(FrameTemplate(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, sid).batch(events))
    cap = Capture(rig, sorted({plan.ports[h] for h in BATCH_HOSTS}), events_only=False)
    try:
        send_frames(rig.host_ends[plan.ports["h1"]], frames, rate=300)
        got_frames = [(port, frame) for port, frame in cap.drain() if is_batch_port(frame)]
        assert cap.kernel_drops == 0
    finally:
        cap.close()
    got: dict = defaultdict(list)
    for port, frame in got_frames:
        for fields, _windows in batch_events(frame[EVENT_OFFSET:]):
            got[(fields[0], fields[2])].append(port)
    assert {k: sorted(v) for k, v in got.items()} == {k: v for k, v in want.items() if v}
    # one frame per operator and input batch: no event reaches a port twice
    assert all(len(v) == len(set(v)) for v in got.values())


@needs_root
def test_a_batch_the_switch_cannot_route_counts_each_event(rig, batch_switch):
    """A batch of a stream without any configuration: every event is dropped
    as an unknown stream, counted once per event on both targets."""
    _proc, api = batch_switch
    topo = batched_topology(random.Random(1))
    plan = SplitterPlan(topo)
    model = SplitterPipeline()
    for target in (model, api):
        Controller(target).install(plan)
    ip, mac = plan.addresses["h1"]
    frame = FrameTemplate(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, 99).batch([(i, i, 0, 0) for i in range(5)])
    assert model.process(frame) == []
    send_frames(rig.host_ends[plan.ports["h1"]], [frame])
    index = drop_counter_index(99, UNKNOWN_STREAM)
    wait_until(lambda: api.counter_read("stream_drops", index)[1] == 5, 5, "bmv2 to count the batch's drops")
    assert api.counter_read("stream_drops", index) == model.counter_read("stream_drops", index) == (5 * len(frame), 5)


# ----------------------------------------------------------------------
# the CEP stage (p4/cep.p4): complex events to the sinks
# ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def cep_program() -> Path:
    return toolchain.compile_program(program=toolchain.CEP_PROGRAM)


@pytest.fixture
def cep_switch(rig, cep_program, tmp_path):
    """The build with the CEP stage (p4/splitter_cep.p4)."""
    yield from fresh_switch(rig, cep_program, tmp_path)


#: Sinks of the CEP tests: hosts that are no stream's operators.
CEP_SINKS = {"h6": 6, "h7": 7}
#: Patterns over every kind of operand, both strategies, all three step kinds, signed extremes.
CEP_RULES = {
    "windows": [{"name": "recent", "stream": 3, "field": "value", "size": 4},
                {"name": "keys", "stream": 3, "field": "key", "size": 2},
                {"name": "long", "stream": 4, "field": "value", "size": 32},
                {"name": "seqs", "stream": 4, "field": "seq", "size": 5}],
    "complex_events": [
        {"name": "rise", "id": 11, "stream": 3, "strategy": "skip-till-next-match", "sinks": ["h6"],
         "pattern": "[value > 2]; ([sum(recent) > 5] && [count(recent < 0) >= 1])", "returns": "sum(recent)"},
        {"name": "dip", "id": 7, "stream": 3, "strategy": "strict", "sinks": ["h6", "h7"],
         "pattern": "([value < 0] || [max(keys) == 3]); [min(recent) < -1 and key != 2]", "returns": "min(recent)"},
        {"name": "swing", "id": 3, "stream": 4, "strategy": "skip-till-next-match", "sinks": ["h7"],
         "pattern": "[max(long) >= 9223372036854775806]; [min(long) <= -9223372036854775807]",
         "returns": "max(long)"},
        {"name": "tick", "id": 40000, "stream": 4, "strategy": "strict", "sinks": ["h6"],
         "pattern": "[count(long) > 3 and ts < 500] && [sum(seqs) >= 10 or seq == 2]", "returns": "ts"}]}


def cep_events(rng: random.Random, n: int) -> list[tuple[int, int, int, int, int]]:
    """``(stream, seq, ts, key, value)`` of two streams, small values and the signed extremes."""
    seqs = {3: 0, 4: 0}
    out = []
    for _ in range(n):
        sid = rng.choice([3, 4])
        value = rng.choice([-2, -1, 0, 1, 2, 3, 4, 5, -(2**63), 2**63 - 1, 2**63 - 2])
        out.append((sid, seqs[sid], rng.randrange(1000), rng.randrange(4), value))
        seqs[sid] += 1
    return out


def cep_install(api, plan: SplitterPlan, rules) -> None:
    from testbed.dataplane.cep import CepControl
    Controller(api).install(plan)
    for host, port in CEP_SINKS.items():
        ip, mac = plan.addresses[host]
        api.table_add("egress_rewrite", "rewrite_dst", [port, 0], [mac, ip, port])
    CepControl(api, CEP_SINKS).install(rules)


def complex_frames(out) -> dict[int, list[bytes]]:
    """The complex-event frames among ``(port, frame)`` pairs, per sink port, in order."""
    from testbed.dataplane.wire import CEP_UDP_PORT

    per_port = defaultdict(list)
    for port, frame in out:
        if len(frame) > EVENT_OFFSET and int.from_bytes(frame[36:38], "big") == CEP_UDP_PORT:
            per_port[port].append(frame)
    return dict(per_port)


@needs_root
@pytest.mark.parametrize("seed", [31, 32])
def test_cep_stage_matches_the_model_and_the_oracle(seed, rig, cep_switch):
    """Random events of two streams through bmv2's CEP build and the model, both
    split to operators and matched by four patterns: the same copies to the
    operators, the same complex event frames to each sink, in order, byte for
    byte; the oracle's complex events; and the same CEP registers and counters."""
    from testbed.dataplane.contract import CEP_COUNTERS, CEP_REGISTERS
    from testbed.dataplane.wire import is_event_frame, parse_complex_events
    from testbed.semantics.cep.oracle import BasicEvent, CepOracle
    from testbed.semantics.cep.rules import CepRules

    _proc, api = cep_switch
    rng = random.Random(seed)
    rules = CepRules.model_validate(CEP_RULES)
    topo = topology([stream(3, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3"]),
                     stream(4, {"kind": "count", "size": 4, "slide": 4}, ["h4", "h5"])])
    plan = SplitterPlan(topo)
    ip, mac = plan.addresses["h1"]
    events = cep_events(rng, 400)
    frames = [event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, sid, seq, ts, key=key, value=value)
              for sid, seq, ts, key, value in events]
    model = SplitterPipeline()
    cep_install(model, plan, rules)
    want = [out for frame in frames for out in model.process(frame, 1)]
    cep_install(api, plan, rules)
    cap = Capture(rig, range(2, VETH_PORTS + 1), events_only=False)
    try:
        # Half the tests' usual rate: the CEP build does more per event, and a frame
        # lost on its way in would change every later match.
        send_frames(rig.host_ends[plan.ports["h1"]], frames, rate=750)
        got = cap.drain(expect=len(want))
        assert cap.kernel_drops == 0, f"capture sockets dropped {cap.kernel_drops} frames"
    finally:
        cap.close()

    # The sinks: the same frames, in the same order, and what the oracle finds.
    assert complex_frames(got) == complex_frames(want)
    oracle = CepOracle(rules.window_specs(), rules.pattern_specs())
    found = [c for sid, seq, ts, key, value in events for c in oracle.step(BasicEvent(sid, seq, ts, key, value))]
    sent = {port: [c for f in frames_ for c in parse_complex_events(f[EVENT_OFFSET:])]
            for port, frames_ in complex_frames(want).items()}
    signed = lambda v: v - (1 << 64) if v >= 1 << 63 else v        # noqa: E731
    for host, port in CEP_SINKS.items():
        mine = {r.id for r in rules.complex_events if host in r.sinks}
        assert sorted(sent.get(port, [])) == sorted((c.pattern, c.match, c.stream, c.seq, c.ts, signed(c.value))
                                                    for c in found if c.pattern in mine)
    assert {c.pattern for c in found} == {11, 7, 3, 40000}, "every pattern matched at least once"
    # The operators: the splitter's copies are untouched by the stage beside it.
    copies = lambda out: by_event((p, f) for p, f in out if is_event_frame(f))   # noqa: E731
    assert copies(got) == copies(want) and copies(want)
    # The stage's state, cell by cell, and its counters.  bmv2's Thrift
    # register read saturates a cell at 2^63 - 1 (its int64), and an
    # order-encoded value that is not negative lies above that: compared as
    # bmv2 can report it.
    saturated = lambda cells: [min(v, 2**63 - 1) for v in cells]      # noqa: E731
    for name in CEP_REGISTERS:
        assert api.register_read(name) == saturated(model.register_read(name)), name
    for name, size in CEP_COUNTERS.items():
        assert [api.counter_read(name, i)[1] for i in range(size)] == \
               [model.counter_read(name, i)[1] for i in range(size)], name


@needs_root
def test_cep_complex_events_of_one_event_come_in_declaration_order(rig, cep_switch):
    """Four patterns declared with ids 40, 7, 300 and 1, each met by every event:
    bmv2's frames to the sink are the model's byte for byte, and each holds
    40, 7, 300, 1 in that order (docs/cep.md, "The order of complex events";
    the oracle, Spark's reference and check: tests/unit/test_cep_order.py)."""
    from testbed.dataplane.wire import CEP_UDP_PORT, parse_complex_events
    from testbed.semantics.cep.rules import CepRules

    _proc, api = cep_switch
    ids = [40, 7, 300, 1]
    rules = CepRules.model_validate({"complex_events": [
        {"name": f"p{i}", "id": i, "stream": 3, "pattern": "[value >= 0]", "returns": "seq", "sinks": ["h6"]}
        for i in ids]})
    topo = topology([stream(3, {"kind": "count", "size": 2, "slide": 2}, ["h2", "h3"])])
    plan = SplitterPlan(topo)
    ip, mac = plan.addresses["h1"]
    frames = [event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, 3, seq, seq, key=0, value=seq)
              for seq in range(5)]
    model = SplitterPipeline()
    cep_install(model, plan, rules)
    want = [out for frame in frames for out in model.process(frame, 1)]
    cep_install(api, plan, rules)
    cap = Capture(rig, range(2, VETH_PORTS + 1), events_only=False)
    try:
        send_frames(rig.host_ends[plan.ports["h1"]], frames, rate=200)
        got = cap.drain(expect=len(want))
    finally:
        cap.close()

    def sink_frames(out):
        return [f for port, f in out if port == CEP_SINKS["h6"] and len(f) > EVENT_OFFSET
                and int.from_bytes(f[36:38], "big") == CEP_UDP_PORT]

    assert sink_frames(got) == sink_frames(want)
    assert [[c[0] for c in parse_complex_events(f[EVENT_OFFSET:])] for f in sink_frames(got)] == [ids] * 5


#: Every kind of change of the rules mid-stream (docs/cep.md, "Changing rules mid-stream").
CEP_CHANGES = [
    (60, {"add_window": {"name": "v", "stream": 3, "field": "value", "size": 2}}),
    (90, {"add": {"name": "both", "id": 12, "stream": 3, "sinks": ["h6"],
                  "pattern": "[max(v) >= 8] && [value < 2]", "returns": "max(v)"}}),
    (120, {"replace": {"name": "rise", "id": 30, "stream": 3, "strategy": "strict", "sinks": ["h6"],
                       "pattern": "[value == 9]; [value <= 1]", "returns": "seq"}}),
    (150, {"remove": 5}),
    (180, {"replace_window": {"name": "w", "stream": 3, "field": "value", "size": 8}}),
    (210, {"add": {"name": "big", "id": 77, "stream": 3, "sinks": ["h6", "h7"], "pattern": "[sum(w) > 40]",
                   "returns": "sum(w)"}}),
    (240, {"remove": 12}),
    (250, {"remove_window": "v"}),
]


@needs_root
def test_cep_rules_changed_mid_stream_match_the_model_and_the_oracle(rig, cep_switch):
    """A schedule of every kind of change, applied between parts of one stream on
    bmv2 and on the model at the same events: the same complex event frames at
    each sink, byte for byte, and the oracle's under the rules in force."""
    import pandas as pd

    from testbed.dataplane.cep import CepControl
    from testbed.dataplane.wire import parse_complex_events
    from testbed.semantics.cep.reference import complex_events, per_sink

    _proc, api = cep_switch
    data = topology_data([stream(3, {"kind": "count", "size": 2, "slide": 2}, ["h2", "h3"], events=300)],
                         VETH_PORTS, name="bmv2test")
    data["cep"] = {"windows": [{"name": "w", "stream": 3, "field": "value", "size": 4}], "complex_events": [
        {"name": "rise", "id": 30, "stream": 3, "sinks": ["h6"], "pattern": "[value > 6]; [sum(w) > 20]",
         "returns": "sum(w)"},
        {"name": "low", "id": 5, "stream": 3, "sinks": ["h7"], "pattern": "[count(w < 3) >= 2]",
         "returns": "count(w < 3)"}]}
    data["schedule"] = [{"after": {"stream": 3, "events": k}, "cep": c} for k, c in CEP_CHANGES]
    topo = parse_topology(data)
    timeline = topo.cep_timeline()
    plan = SplitterPlan(topo)
    ip, mac = plan.addresses["h1"]
    rng = random.Random(47)
    values = [rng.randrange(10) for _ in range(300)]
    frames = [event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, 3, seq, seq, key=0, value=v)
              for seq, v in enumerate(values)]
    controls = {}
    for name, target in (("model", SplitterPipeline()), ("bmv2", api)):
        Controller(target).install(plan)                 # the plan addresses the sinks too
        controls[name] = CepControl(target, CEP_SINKS)
        controls[name].install(topo.cep, timeline.tests())
    model = controls["model"].api
    cap = Capture(rig, range(2, VETH_PORTS + 1), events_only=False)
    want, sent = [], 0
    try:
        for change in [*timeline.changes, None]:
            until = change.after if change is not None else len(frames)
            want += [out for frame in frames[sent:until] for out in model.process(frame, 1)]
            send_frames(rig.host_ends[plan.ports["h1"]], frames[sent:until], rate=500)
            cap.wait_for(len(want))           # bmv2 has taken every event before the point
            sent = until
            if change is not None:
                for control in controls.values():
                    control.apply(change)
        got = cap.drain(expect=len(want))
    finally:
        cap.close()

    assert complex_frames(got) == complex_frames(want)
    events = pd.DataFrame({"stream": 3, "seq": range(300), "ts": range(300), "key": 0, "value": values,
                           "send_ns": range(300)})
    expected = per_sink(topo.cep, complex_events(topo.cep, events, timeline), timeline)
    for host, port in CEP_SINKS.items():
        received = [(p, m, s, q, v) for f in complex_frames(want).get(port, [])
                    for p, m, s, q, _t, v in parse_complex_events(f[EVENT_OFFSET:])]
        assert received == expected[host], host
    assert {k[0] for keys in expected.values() for k in keys} == {30, 5, 12, 77}, "every pattern matched"


@needs_root
def test_the_bench_measures_what_a_stopped_switch_keeps(tmp_path):
    """``make bench``'s stalled_input part: the embedded switch keeps the whole
    burst in its socket buffers; bmv2 as the testbed starts it keeps about a
    thousand frames in its libpcap ring, and with a veth's default offloads
    a few dozen."""
    from testbed.experiments.bench.stalled import AS_STARTED, VETH_DEFAULTS, StalledParams, stalled_input
    from testbed.rundir import ExperimentDir

    params = StalledParams(burst=2000)
    rows = stalled_input(["model", "bmv2"], ExperimentDir(tmp_path / "bench").create(), params)
    by = {(row["target"], row["ports"]): row for row in rows}
    assert set(by) == {("model", AS_STARTED), ("bmv2", AS_STARTED), ("bmv2", VETH_DEFAULTS)}
    assert all(row["kept"] + row["lost"] == 2000 for row in rows)
    assert by["model", AS_STARTED]["kept"] == 2000
    assert by["bmv2", AS_STARTED]["kept"] >= 1000
    assert by["bmv2", VETH_DEFAULTS]["kept"] < 100


@needs_root
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not found (Debian package valgrind)")
def test_the_bench_counts_bmv2s_instructions_per_event(tmp_path):
    """``make bench``'s instruction counts: the splitter costs more per event than
    plain forwarding, and a sliding window (two copies for most events) more
    than a tumbling one; the floors (reading the event, the least CEP stage,
    the least splitter) sit between forwarding and the splitter; every count is
    of as many copies as the embedded target sends for the same frames, or the
    part refuses to report it.  Each of bmv2's threads is counted apart: the
    splitter's ingress thread is its busiest, forwarding's the one that
    receives.

    The suite counts the plain splitter build, the one without changes and
    the baselines only: under
    callgrind each splitter build takes half a minute to start, twice per row,
    and the CEP and batches builds' four rows would more than double the
    test's time.  ``make bench`` counts those too, on the same code path
    (``instructions_per_event``); their copies are held to the embedded
    target's there as here."""
    from testbed.experiments.bench.instructions import (
        BATCHES,
        CEP,
        CEP_FLOOR,
        CEP_WORKLOAD,
        FIXED,
        FORWARD_EVENTS,
        SPLITTER_FLOOR,
        InstructionParams,
        floor_workload,
        instructions_per_event,
    )
    from testbed.rundir import ExperimentDir

    params = InstructionParams(events=100, workloads=["count tumbling 100/100", "count sliding 100/50"],
                               cep=False, batches=False)
    rows = instructions_per_event(ExperimentDir(tmp_path / "bench").create(), params)
    by = {(row["program"], row["workload"]): row for row in rows}
    assert len(rows) == 9 and not {CEP, BATCHES} & {row["program"] for row in rows}
    forward = by["forward", "any"]
    tumbling, sliding = by["splitter", "count tumbling 100/100"], by["splitter", "count sliding 100/50"]
    assert forward["copies"] == tumbling["copies"] == 100
    assert sliding["copies"] == 50 + 50 * 2          # one window until the second slide begins, then two
    # The build without changes sends the same copies (each held to the model's) for less work.
    for label, plain in (("count tumbling 100/100", tumbling), ("count sliding 100/50", sliding)):
        fixed = by[FIXED, label]
        assert fixed["copies"] == plain["copies"]
        assert forward["instructions_per_event"] < fixed["instructions_per_event"] < plain["instructions_per_event"]
    assert 0 < forward["instructions_per_event"] < tumbling["instructions_per_event"] \
        < sliding["instructions_per_event"]
    # the floors: reading the event costs more than forwarding the frame, the least CEP stage more
    # again, with the oracle's complex events
    reading, floor = by[FORWARD_EVENTS, "any"], by[CEP_FLOOR, CEP_WORKLOAD]
    assert reading["copies"] == 100
    assert floor["copies"] == floor_workload().copies(100) > 100
    assert forward["instructions_per_event"] < reading["instructions_per_event"] < floor["instructions_per_event"]
    # the splitter's floor: the splitter's copies, each one the oracle's (or the part refuses), for
    # more than reading the event and less than the splitter; sliding dearer than tumbling
    least = {label: by[SPLITTER_FLOOR, label] for label in ("count tumbling 100/100", "count sliding 100/50")}
    assert [row["copies"] for row in least.values()] == [tumbling["copies"], sliding["copies"]]
    assert reading["instructions_per_event"] < least["count tumbling 100/100"]["instructions_per_event"] \
        < least["count sliding 100/50"]["instructions_per_event"] < sliding["instructions_per_event"]
    assert least["count tumbling 100/100"]["instructions_per_event"] < tumbling["instructions_per_event"]
    assert all(row["instructions"] > row["instructions_per_event"] * row["events"] / 2 for row in rows)
    # Each thread counted apart, and they add up to the row.  A frame is received (its metadata reset) on
    # one thread and parsed and put through the ingress on another: forwarding does next to nothing in
    # its ingress, so receiving is its dearest step; the splitter's ingress is dearer than any other
    # step of its own, and than all of forwarding's.
    for row in rows:
        threads = row["threads_per_event"]
        assert {"receive", "ingress", "transmit"} <= set(threads) and any(t.startswith("egress ") for t in threads)
        assert abs(sum(threads.values()) - row["instructions_per_event"]) <= len(threads)
    assert max(forward["threads_per_event"].items(), key=lambda item: item[1])[0] == "receive"
    for row in (tumbling, sliding, by[FIXED, "count tumbling 100/100"]):
        busiest, cost = max(row["threads_per_event"].items(), key=lambda item: item[1])
        assert busiest == "ingress" and cost > max(forward["threads_per_event"].values())
