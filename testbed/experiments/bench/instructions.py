"""Instructions bmv2's ``simple_switch`` executes per event, counted by valgrind.

Time per event moves with the machine's load; the number of instructions
hardly does (see below), so this part holds the switch's cost against the
previous bench closely enough to name the commit that made it dearer, even
on a busy machine.  The switch runs under callgrind.  Once it is
configured, its counters are zeroed, ``events`` frames go in slowly, every
copy is awaited, and the counters are dumped.  The same is done with a
quarter of the frames; the difference over the difference in events leaves
out what the switch spends whatever the traffic (its idle threads, the
control connection).  Both builds a topology without batches or CEP rules
runs, ``p4/splitter.p4`` and the one without changes mid-stream
(``p4/splitter_fixed.p4``), are counted on each workload, and each copy
they send is held to the model's.  Plain forwarding (``p4/baseline/forward.p4``) is
counted alike: the floor any program on this target pays per frame.  So is
the CEP build (``p4/splitter_cep.p4``) with P4CEP Fig. 4's pattern over a
window of ``CEP_WINDOW`` values (``testbed.experiments.cep``), each event
also split to one operator.  So is the batches build
(``p4/splitter_batches.p4``) on the count and time workloads' events in
frames of ``BATCH_EVENTS``, and on the count workload's one to a frame.
And two more programs of ``p4/baseline/`` (``floors``): forwarding that
takes the event frame apart (``forward_events.p4``), and the least CEP stage
for the same pattern and window (``cep_floor.p4``), so that the CEP build's
cost can be told from what any CEP on this target must pay.  And the least
count-window splitter (``splitter_floor.p4``) on the count workloads, so
that the splitter's cost can be told from what splitting itself costs; each
of its copies, (event, port), is held to the oracle's.

bmv2 gives each packet a header vector (PHV) from a pool, and makes a new
one, at some 40,000 instructions, only when the pool is empty.  How many it
makes depends on how many frames queue at once, that is on the machine's
load: it moved whole counts by 20 %.  The instructions spent in making them
(``PHVFactory::create``, with all it calls) are therefore left out; what
remains repeats to about 0.1 %.

The counts are user-space instructions only: the kernel's work for a frame
(the veth, the sockets, waking bmv2's threads) is the same for every
program and is not here.

callgrind counts each of the switch's threads apart, and each row also
says what each thread spent per event (``threads_per_event``).
``simple_switch`` hands a frame from thread to thread: one receives it
and resets its metadata, one parses it and runs the ingress, one of four
(by egress port) runs the egress and the deparser, one sends it.  They
work at once on different frames, so a blast's rate is bounded by the
busiest of them, not by the sum (docs/p4.md, "Which thread bounds a
blast").
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
from pydantic import Field, field_validator

from testbed import ROOT
from testbed.dataplane.cep import CepControl
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import EVENT_OFFSET, parse_event
from testbed.emulation.source import planned_frames
from testbed.emulation.veth import Taps, VethRig, send_frames
from testbed.experiments.bench.costs import TEMPLATE, one_stream
from testbed.experiments.bench.splitter_floor import floor_config, install_floor, oracle_deliveries
from testbed.rundir import ExperimentDir
from testbed.semantics.batching import plan_frames
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import EventCount, Rate, StrictModel
from testbed.semantics.topology import parse_topology
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.process import Bmv2Process

#: The source's port and the operators' (2 .. 1 + OPERATORS), as in a run.
SOURCE_PORT, OPERATORS = 1, 6


class StreamWorkload(NamedTuple):
    """One stream's window (as the YAML has it), the timestamp step between
    its events, and how many operators it is split over."""
    window: dict[str, Any]
    step: int
    operators: int = OPERATORS


#: The stream of p4cep's blast (testbed.experiments.cep.cep_topology): each
#: event its own window, on one operator.  What an event costs there is what
#: the blast's rate against forwarding's is made of.
BLAST_WORKLOAD = "count tumbling 1/1, one operator"
WORKLOADS: dict[str, StreamWorkload] = {
    "count tumbling 100/100": StreamWorkload({"kind": "count", "size": 100, "slide": 100}, 1),
    "count sliding 100/50": StreamWorkload({"kind": "count", "size": 100, "slide": 50}, 1),
    "time sliding 1000/500": StreamWorkload({"kind": "time", "size": 1000, "slide": 500}, 10),
    BLAST_WORKLOAD: StreamWorkload({"kind": "count", "size": 1, "slide": 1}, 1, operators=1),
}
#: Plain forwarding is counted on the first workload's frames only: it does not read them.
FORWARD = "forward"
#: The splitter's build for a run in which no stream changes (``InstructionParams.fixed``),
#: counted on the same workloads as the plain build.
FIXED = "splitter_fixed"
#: The CEP build's workload (``InstructionParams.cep``): P4CEP Fig. 4's pattern
#: over a window of this many values, the largest the p4cep experiment measures.
CEP, CEP_WINDOW = "splitter_cep", 32
CEP_WORKLOAD = f"p4cep pattern, window of {CEP_WINDOW}"
#: The seed of the CEP workload's event values (any; fixed so that counts compare).
CEP_SEED = 1
#: The batches build's workloads (``InstructionParams.batches``): the count
#: and the time workloads' streams, their events sent in frames of
#: ``BATCH_EVENTS``.  Most of them lie in one slide and take one pass
#: (docs/p4.md, "Batches").  And the count stream one event per frame, as a
#: source sends an event alone: what an unbatched stream pays for sharing the
#: switch with a batched one.
BATCHES, BATCH_EVENTS = "splitter_batches", 8
BATCH_WORKLOAD = f"count tumbling 100/100, {BATCH_EVENTS} events per frame"
TIME_BATCH_WORKLOAD = f"time sliding 1000/500, {BATCH_EVENTS} events per frame"
LONE_WORKLOAD = "count tumbling 100/100, one event per frame"
#: Programs of ``p4/baseline/`` that forward port 1 to port 2 (the table that
#: ``Bmv2Process`` fills with ``forward=``).  ``FORWARD_EVENTS`` also parses
#: the event; ``CEP_FLOOR`` also runs the CEP workload's pattern, compiled in,
#: and clones each completing event to ``FLOOR_SINK_PORT``.
FORWARD_EVENTS, CEP_FLOOR = "forward_events", "cep_floor"
#: The least splitter (``splitter_floor``): no forwarding table, its own one
#: table configured from the workload's window (bench.splitter_floor).
SPLITTER_FLOOR = "splitter_floor"
BASELINES: dict[str, Path] = {
    FORWARD: toolchain.FORWARD_PROGRAM,
    FORWARD_EVENTS: toolchain.P4_DIR / "baseline" / "forward_events.p4",
    CEP_FLOOR: toolchain.P4_DIR / "baseline" / "cep_floor.p4",
    SPLITTER_FLOOR: toolchain.SPLITTER_FLOOR_PROGRAM,
}
#: cep_floor.p4's mirror session (FLOOR_SESSION), the group it clones to, and its port.
FLOOR_SESSION, FLOOR_GROUP, FLOOR_SINK_PORT = 1, 1, SOURCE_PORT + 2
#: cep_floor.p4's transition table for ``[value >= 90]; [max(w) >= 0]``
#: under skip-till-next-match: (state, symbol) -> (next state, completes).
#: Symbol bit 0 is the first predicate, bit 1 the second.  Any other
#: (state, symbol) misses and keeps the state.
FLOOR_TRANSITIONS = {(0, 0b01): (1, 0), (0, 0b11): (1, 0), (1, 0b10): (0, 1), (1, 0b11): (0, 1)}
#: Each batches workload: the workload whose stream it sends, and events per frame.
BATCH_WORKLOADS: dict[str, tuple[str, int]] = {
    BATCH_WORKLOAD: ("count tumbling 100/100", BATCH_EVENTS),
    TIME_BATCH_WORKLOAD: ("time sliding 1000/500", BATCH_EVENTS),
    LONE_WORKLOAD: ("count tumbling 100/100", 1),
}
#: Seconds without a copy after which the copies still missing are given up on.
PATIENCE_S = 20.0
#: How long valgrind may take to bring the switch up (it runs it some 50 times slower).
START_TIMEOUT_S = 180.0
#: Sends slower by this factor after a count that lost frames (bmv2 under
#: valgrind on a busy machine can fall behind), at most ``RETRIES`` times.
SLOWER, RETRIES = 2, 2
#: What bmv2 calls to make a packet's header vector when its pool has none free.
PHV_ALLOCATION = "PHVFactory::create"
#: Each of ``simple_switch``'s threads that handle frames, by the function it
#: runs; a thread that runs none of them is one of ``OTHER_THREADS``.
#: There are several egress threads, each serving the ports that hash to
#: it: each is named apart (``egress 1`` ...), busiest first.  Valgrind
#: numbers threads as it reuses their slots, so two switch starts need not
#: number the same egress thread alike; by rank, the two counts of a row
#: pair the thread with most copies in each, and their difference is still
#: the row's egress work, however it is dealt out.
THREAD_FUNCTIONS = {
    "receive": "SimpleSwitch::receive_",
    "ingress": "SimpleSwitch::ingress_thread",
    "egress": "SimpleSwitch::egress_thread",
    "transmit": "SimpleSwitch::transmit_thread",
}
OTHER_THREADS = "other"


class InstructionParams(StrictModel):

    events: EventCount = Field(default=400, ge=8, description="frames of the larger count per workload")
    rate: Rate = Field(default=50, description="events per second, in any frames: slow enough for bmv2 under valgrind")
    workloads: list[str] = Field(default=list(WORKLOADS), min_length=1)
    cep: bool = Field(default=True, description="count the CEP build too (CEP_WORKLOAD)")
    floors: bool = Field(default=True, description="count forward_events, cep_floor and splitter_floor too "
                                                   "(BASELINES; splitter_floor on the count workloads)")
    batches: bool = Field(default=True, description="count the batches build too (BATCH_WORKLOADS)")
    fixed: bool = Field(default=True, description="count the build without changes mid-stream too "
                                                  "(splitter_fixed, on the same workloads)")

    @field_validator("workloads")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        unknown = [name for name in names if name not in WORKLOADS]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is none of {', '.join(map(repr, WORKLOADS))}")
        return names


def missing() -> Optional[str]:
    """Why the part cannot count here, or ``None``."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        return "valgrind not found (Debian package valgrind)"
    return Bmv2Process.available()


class CountedBmv2(Bmv2Process):
    """``simple_switch`` under callgrind, its counts dumped to ``dumps``.N on request."""

    def __init__(self, *args: Any, dumps: Path, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.dumps = dumps

    def command(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.dumps}", "--separate-threads=yes",
                "--dump-instr=no", "--collect-jumps=no"] + super().command()

    def _control(self, flag: str) -> None:
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], check=True, capture_output=True)

    def zero(self) -> None:
        self._control("-z")

    def dump(self) -> dict[str, int]:
        """Instructions since the last ``zero``, per thread (``by_thread``):
        callgrind writes one file per thread for each dump."""
        before = set(self.dumps.parent.glob(f"{self.dumps.name}.*"))
        self._control("-d")
        new = sorted(set(self.dumps.parent.glob(f"{self.dumps.name}.*")) - before)
        if not new:
            raise RuntimeError(f"callgrind wrote no dump next to {self.dumps}")
        return by_thread([(path.name, path.read_text()) for path in new])


def thread_of(dump: str) -> str:
    """Which of ``THREAD_FUNCTIONS`` a thread's dump is of, or ``OTHER_THREADS``."""
    for thread, function in THREAD_FUNCTIONS.items():
        if re.search(rf"^c?fn=\(\d+\) [^\n]*{re.escape(function)}", dump, re.M):
            return thread
    return OTHER_THREADS


def by_thread(dumps: list[tuple[str, str]]) -> dict[str, int]:
    """Instructions per thread (``dumped_instructions``) of one dump's files,
    ``(name, text)``, each thread's ``callgrind.out.N-TT``: the egress
    threads named by rank (``THREAD_FUNCTIONS``), the threads that handle no
    frame summed as ``OTHER_THREADS``."""
    out: dict[str, int] = {}
    egress: list[int] = []
    for _name, text in dumps:
        thread = thread_of(text)
        if thread == "egress":
            egress.append(dumped_instructions(text))
        else:
            out[thread] = out.get(thread, 0) + dumped_instructions(text)
    for rank, cost in enumerate(sorted(egress, reverse=True), 1):
        out[f"egress {rank}"] = cost
    return out


def dumped_instructions(dump: str) -> int:
    """The instruction total of one callgrind dump (its ``summary:`` or
    ``totals:`` line), less what the calls to ``PHV_ALLOCATION`` cost."""
    found = re.search(r"^(?:summary|totals): (\d+)", dump, re.M)
    if found is None:
        raise ValueError("no summary or totals line in the callgrind dump")
    return int(found.group(1)) - inclusive_cost_of_calls(dump, PHV_ALLOCATION)


def inclusive_cost_of_calls(dump: str, function: str) -> int:
    """What all calls to functions whose name contains ``function`` cost, with
    everything they called.  In callgrind's format a ``calls=`` line is
    followed by the call's inclusive cost; ``cfn=(id) name`` names the callee
    the first time, ``cfn=(id)`` after that."""
    names: dict[str, str] = {}
    callee, total, cost_line_next = None, 0, False
    for line in dump.splitlines():
        if cost_line_next:
            cost_line_next = False
            if callee is not None and function in names.get(callee, ""):
                total += int(line.split()[-1])
        elif line.startswith(("fn=", "cfn=")):
            found = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
            if found is None:
                continue
            if found.group(2):
                names[found.group(1)] = found.group(2)
            if line.startswith("cfn="):
                callee = found.group(1)
        elif line.startswith("calls="):
            cost_line_next = True
    return total


def program_revision() -> str:
    """The newest commit that changed ``p4/``: which program a count is of,
    whatever else the checkout's revision has changed since ("unknown"
    outside git; "-dirty" when ``p4/`` has changes not committed)."""
    try:
        rev = subprocess.run(["git", "log", "-1", "--format=%H", "--", "p4"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "p4"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return (rev or "unknown") + ("-dirty" if dirty else "")


def frames_of(step: int, count: int) -> list[bytes]:
    return [TEMPLATE.frame(seq, seq * step) for seq in range(count)]


#: What configures a switch (bmv2's control client, or the embedded model) for a workload.
Installer = Callable[[Any], None]


class Workload(NamedTuple):
    """A program's workload: what configures the switch beyond forwarding
    (None: nothing), the frames of ``count`` events, how many copies the
    switch must send for them, and, where the bench holds every copy to the
    oracle, which: ``(seq, port)``."""

    install: Optional[Installer]
    frames: Callable[[int], list[bytes]]
    copies: Callable[[int], int]
    deliveries: Optional[Callable[[int], set[tuple[int, int]]]] = None


def counted(expdir: ExperimentDir, rig: VethRig, name: str, program: str, install: Optional[Installer],
            frames: list[bytes], rate: float, copies_expected: int) -> tuple[dict[str, int], list[tuple[int, bytes]]]:
    """Instructions the switch spent on ``frames``, per thread (``by_thread``),
    and the copies that came out (port, frame).  ``program``: a build of the splitter (``CEP``,
    ``BATCHES``, ``FIXED``, else the plain one), configured by ``install``; or one of
    ``BASELINES``, forwarding from the source's port to port 2 (all but
    ``SPLITTER_FLOOR``) and configured further by ``install`` if given."""
    baseline = BASELINES.get(program)
    dumps = expdir.root / "callgrind" / name / "callgrind.out"
    dumps.parent.mkdir(parents=True, exist_ok=True)
    proc = CountedBmv2(rig.switch_ends, dumps.parent, name=name, namespace=rig.namespace,
                       forward={SOURCE_PORT: SOURCE_PORT + 1} if baseline and program != SPLITTER_FLOOR else None,
                       json_path=toolchain.compile_program(program=baseline) if baseline else None,
                       cep=program == CEP, batches=program == BATCHES, changes=program != FIXED, dumps=dumps)
    proc.start(timeout=START_TIMEOUT_S)
    try:
        if install is not None:
            api = proc.api()
            try:
                install(api)
            finally:
                api.close()
        taps = Taps({("in", port): rig.host_ends[port] for port in rig.host_ends if port != SOURCE_PORT})
        try:
            proc.zero()
            send_frames(rig.host_ends[SOURCE_PORT], frames, rate)
            copies = list(taps.drain(PATIENCE_S, expect=copies_expected))
            return proc.dump(), copies
        finally:
            taps.close()
    finally:
        proc.stop()


def expected_copies(install: Installer, frames: list[bytes]) -> int:
    """Frames the embedded target sends for ``frames``: what the switch must send too."""
    pipe = SplitterPipeline()
    install(pipe)
    return sum(len(pipe.process(frame, SOURCE_PORT)) for frame in frames)


def model_deliveries(install: Installer, frames: list[bytes]) -> set[tuple[int, int]]:
    """``(seq, port)`` of every copy the embedded target sends for ``frames``
    (one event per frame): each copy a build of the splitter must send."""
    pipe = SplitterPipeline()
    install(pipe)
    return {(parse_event(frame[EVENT_OFFSET:])[1], port)
            for frame in frames for port, _copy in pipe.process(frame, SOURCE_PORT)}


def splitter_workload(label: str) -> tuple[Installer, Callable[[int], list[bytes]]]:
    """One stream of workload ``label`` split over its operators: how to install it, and its frames."""
    window, step, operators = WORKLOADS[label]
    plan = SplitterPlan(parse_topology(one_stream(window["size"], window["slide"], operators, kind=window["kind"])))
    return (lambda api: Controller(api).install(plan)), (lambda count: frames_of(step, count))


def batch_workload(label: str = BATCH_WORKLOAD) -> tuple[Installer, Callable[[int], list[bytes]]]:
    """The batches workload ``label`` (``BATCH_WORKLOADS``): ``count`` events of
    its stream in frames of its size (the last one shorter when ``count`` is
    not a multiple).  A frame of one event is a plain event frame, as a
    source sends it (docs/wire.md, "Batches")."""
    stream, events = BATCH_WORKLOADS[label]
    window, step, operators = WORKLOADS[stream]
    data = one_stream(window["size"], window["slide"], operators, kind=window["kind"])
    data["streams"][0]["batch"] = {"events": events, "max_delay": 0.01}
    plan = SplitterPlan(parse_topology(data))

    def frames(count: int) -> list[bytes]:
        # All due at once: frames of ``events`` each, cut as a source cuts them.
        plan = plan_frames(np.zeros(count), events, max_delay=0.0)
        return planned_frames(TEMPLATE, [(seq, seq * step, 0, 0) for seq in range(count)], plan)

    return (lambda api: Controller(api).install(plan)), frames


def cep_workload() -> tuple[Installer, Callable[[int], list[bytes]]]:
    """The p4cep experiment's stream, split to one operator, and its pattern over a
    window of ``CEP_WINDOW`` values, complex events to one sink."""
    from testbed.experiments.cep import cep_topology, event_frames

    topo = cep_topology(CEP_WINDOW, 1)
    plan = SplitterPlan(topo)
    sinks = {host: plan.ports[host] for host in topo.sink_hosts()}

    def install(api: Any) -> None:
        Controller(api).install(plan)
        CepControl(api, sinks).install(topo.cep)

    return install, lambda count: event_frames(topo, count, CEP_SEED)[0]


def floor_workload() -> Workload:
    """``cep_floor.p4`` on the CEP workload's events: its transitions and the
    sink's session.  Each event is forwarded, and each that completes a match
    by the oracle is cloned to the sink; no other output is right."""
    from testbed.experiments.cep import cep_topology, completing, event_frames

    topo = cep_topology(CEP_WINDOW, 1)

    def install(api: Any) -> None:
        for (state, symbol), (next_state, completes) in FLOOR_TRANSITIONS.items():
            api.table_add("floor_transition", "step", [state, symbol], [next_state, completes])
        api.mc_mgrp_create(FLOOR_GROUP)
        api.mc_node_associate(FLOOR_GROUP, api.mc_node_create(0, [FLOOR_SINK_PORT]))
        api.mirroring_add_mc(FLOOR_SESSION, FLOOR_GROUP)

    def copies(count: int) -> int:
        return count + len(completing(topo.cep, event_frames(topo, count, CEP_SEED)[1]))

    return Workload(install, lambda count: event_frames(topo, count, CEP_SEED)[0], copies)


def splitter_floor_workload(label: str) -> Workload:
    """``splitter_floor.p4`` on the count workload ``label``'s events, its
    window over as many ports after the source's as it has operators, as the
    splitter has them: each copy must be one the oracle makes."""
    window, step, operators = WORKLOADS[label]
    if window["kind"] != "count":
        raise ValueError(f"the splitter's floor splits count windows only, not {label!r}")
    size, slide = window["size"], window["slide"]
    ports = [SOURCE_PORT + 1 + i for i in range(operators)]
    config = floor_config(size, slide, ports)

    def deliveries(count: int) -> set[tuple[int, int]]:
        return oracle_deliveries(size, slide, ports, count)

    return Workload(lambda api: install_floor(api, config), lambda count: frames_of(step, count),
                    lambda count: len(deliveries(count)), deliveries)


def delivered(copies: list[tuple[int, bytes]]) -> list[tuple[int, int]]:
    """``(seq, port)`` of each copy a switch sent."""
    return [(parse_event(frame[EVENT_OFFSET:])[1], port) for port, frame in copies]


def workload(program: str, label: str) -> Workload:
    """How to configure ``program`` for the workload ``label``, its frames, and the copies due."""
    if program in (FORWARD, FORWARD_EVENTS):     # no plan: the frames of the workload, forwarded
        step = WORKLOADS[label].step
        return Workload(None, lambda count: frames_of(step, count), lambda count: count)
    if program == CEP_FLOOR:
        return floor_workload()
    if program == SPLITTER_FLOOR:
        return splitter_floor_workload(label)
    if program == CEP:
        install, frames = cep_workload()
    elif program == BATCHES:
        install, frames = batch_workload(label)
    else:
        install, frames = splitter_workload(label)
        # The plain build and the one without changes: every copy held to the model's.
        return Workload(install, frames, lambda count: expected_copies(install, frames(count)),
                        lambda count: model_deliveries(install, frames(count)))
    return Workload(install, frames, lambda count: expected_copies(install, frames(count)))


def instructions_per_event(expdir: ExperimentDir, params: InstructionParams) -> list[dict[str, Any]]:
    """One row per program and workload: instructions per event, from two counts."""
    few, many = max(params.events // 4, 1), params.events
    rows = []
    revision = program_revision()
    cases = [("splitter", label) for label in params.workloads]
    cases += [(FIXED, label) for label in params.workloads] if params.fixed else []
    cases += [(CEP, CEP_WORKLOAD)] if params.cep else []
    cases += [(BATCHES, label) for label in BATCH_WORKLOADS] if params.batches else []
    first = next(iter(WORKLOADS))
    cases += [(FORWARD_EVENTS, first), (CEP_FLOOR, CEP_WORKLOAD)] if params.floors else []
    cases += [(SPLITTER_FLOOR, label) for label in params.workloads
              if WORKLOADS[label].window["kind"] == "count"] if params.floors else []
    cases.append((FORWARD, first))
    with VethRig(1 + OPERATORS) as rig:
        for program, label in cases:
            install, frames_for, copies_for, deliveries_for = workload(program, label)
            totals = {}
            for count in (few, many):
                frames = frames_for(count)
                want = copies_for(count)
                rate = params.rate * len(frames) / count      # the same events per second in any frames
                for attempt in range(RETRIES + 1):
                    name = f"{program}-{len(rows)}-{count}-{attempt}"
                    threads, copies = counted(expdir, rig, name, program, install, frames, rate, want)
                    if len(copies) == want or attempt == RETRIES:
                        break
                    rate /= SLOWER       # frames were lost on the way in: the switch fell behind
                if len(copies) != want:
                    raise RuntimeError(f"{program} on {label}: {len(copies)} copies out of {count} events at "
                                       f"{rate:g}/s, expected {want}: the count would not be of the same work")
                if deliveries_for is not None:
                    refuse_wrong_copies(program, label, delivered(copies), deliveries_for(count))
                totals[count] = (threads, len(copies))
            (few_threads, _), (many_threads, many_copies) = totals[few], totals[many]
            per_thread = {thread: (many_threads.get(thread, 0) - few_threads.get(thread, 0)) / (many - few)
                          for thread in sorted(set(few_threads) | set(many_threads))}
            rows.append({"target": "bmv2", "program": program, "p4_revision": revision,
                         "workload": "any" if install is None else label,
                         "events": many, "copies": many_copies, "instructions": sum(many_threads.values()),
                         "instructions_per_event": round(sum(per_thread.values())),
                         "threads_per_event": {thread: round(cost) for thread, cost in per_thread.items()}})
    return rows


def refuse_wrong_copies(program: str, label: str, sent: list[tuple[int, int]], due: set[tuple[int, int]]) -> None:
    """Raise unless ``sent`` is each of ``due`` once: a program that splits
    wrongly would be counted doing other work than the splitter's."""
    wrong = sorted(set(sent) ^ due)
    twice = len(sent) - len(set(sent))
    if wrong or twice:
        example = ", ".join(f"event {seq} {'not ' if (seq, port) in due else ''}to port {port}"
                            for seq, port in wrong[:3])
        raise RuntimeError(f"{program} on {label}: {len(wrong)} copies differ from the oracle's"
                           f"{' (' + example + ')' if example else ''}, {twice} sent twice")
