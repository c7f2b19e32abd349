"""Where a program's instructions per event go inside bmv2, from the bench's callgrind dumps.

The pinned bmv2 is built without its logging macros (toolchain.toml), so
it cannot say which P4 table or action a packet went through.  What
callgrind does keep is bmv2's call graph: each call's count and inclusive
cost, by caller.  bmv2 runs every P4 element through a handful of
functions (a table through ``MatchTableAbstract::apply_action``, an
``if`` through ``Conditional::operator()``, a primitive through
``ActionPrimitiveCall::execute``), so their calls count the elements a
packet passes and their cost is what those elements take.  The same
differencing as the bench's (a count of ``many`` events less one of
``few``) leaves the cost per event.

``python -m testbed.experiments.bench.breakdown results/bench/<id>`` prints
one table per program and workload the bench counted there; with
``--actions EVENTS`` it also runs the splitter with every action counting
itself (``probed``), for which actions the calls are (docs/p4.md, "Where
the splitter's instructions go").
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, NamedTuple, Optional

from testbed.experiments.bench.instructions import PHV_ALLOCATION

#: What each part of the breakdown is, by the bmv2 function whose calls make
#: it up (matched against callgrind's function names) and, where one
#: function serves two parts, its caller.  Parts overlap: a table holds its
#: action, an action its primitives, the deparser the checksum, and the
#: controls all of those.
ROLES: dict[str, tuple[str, Optional[str]]] = {
    "parser": ("bm::Parser::parse(", None),
    "deparser": ("bm::Deparser::deparse(", None),
    "ingress control": ("bm::Pipeline::apply(", "SimpleSwitch::ingress_thread("),
    "egress control": ("bm::Pipeline::apply(", "SimpleSwitch::egress_thread("),
    "metadata reset": ("bm::PHV::reset_metadata(", None),
    "replication": ("SimpleSwitch::multicast(", None),
    "tables (lookup and action)": ("bm::MatchTableAbstract::apply_action(", None),
    "actions": ("bm::ActionFnEntry::operator()(", None),
    "primitives": ("bm::ActionPrimitiveCall::execute(", None),
    "conditions": ("bm::Conditional::operator()(", None),
    "expressions": ("bm::Expression::eval_(", None),
    "register reads": ("register_read::operator()(", None),
    "register writes": ("register_write::operator()(", None),
    "assignments": ("bm::core::assign::operator()(", None),
    "counters": ("count::operator()(bm::CounterArray", None),
    "checksum": ("bm::Checksum::update(", None),
}


class Calls(NamedTuple):
    """Calls to one function (from one caller, or from any) and what they cost, callees included."""

    count: int
    inclusive: int


def call_graph(dump: str) -> dict[tuple[str, str], Calls]:
    """``(caller, callee) -> Calls`` of one callgrind dump.  In its format a
    ``calls=N`` line follows ``cfn=`` and precedes the call's cost line; a
    function is named in full the first time (``fn=(id) name``), by id after."""
    names: dict[str, str] = {}
    graph: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    caller = callee = None
    count: Optional[int] = None
    for line in dump.splitlines():
        if count is not None:
            if caller is not None and callee is not None:
                entry = graph[names.get(caller, caller), names.get(callee, callee)]
                entry[0] += count
                entry[1] += int(line.split()[-1])
            count = None
            continue
        found = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if found:
            kind, ident, name = found.groups()
            if name:
                names[ident] = name
            if kind == "fn":
                caller = ident
            else:
                callee = ident
        elif line.startswith("calls="):
            count = int(line.split("=", 1)[1].split()[0])
    return {pair: Calls(*totals) for pair, totals in graph.items()}


def role_calls(graph: dict[tuple[str, str], Calls], function: str, caller: Optional[str] = None) -> Calls:
    """Every call of a function whose name holds ``function`` (from one whose
    name holds ``caller``, if given), from outside such functions: a
    recursive or overloaded chain is counted once, at its entry."""
    count = cost = 0
    for (src, dst), calls in graph.items():
        if function in dst and function not in src and (caller is None or caller in src):
            count += calls.count
            cost += calls.inclusive
    return Calls(count, cost)


#: The constructor every packet bmv2 makes goes through, and the two ways to
#: it: a frame received, and a copy made for replication.
PACKET, RECEIVED, COPIED = "bm::Packet::Packet(", "new_packet_ptr(", "bm::Packet::clone_with_phv("


def allocations_in_copies(graph: dict[tuple[str, str], Calls]) -> int:
    """The instructions of header-vector allocations (``PHV_ALLOCATION``) that
    happened while replication made copies.  bmv2 allocates one only when its
    pool is empty, which the machine's load decides, so the bench leaves them
    out and so must replication's part.  Both kinds of packet go through
    the one constructor, and it costs the same per call but for the
    allocations: so its cost per call without them is what the two paths
    spent less all allocations, over their calls."""
    allocations = role_calls(graph, PHV_ALLOCATION).inclusive
    received = role_calls(graph, PACKET, RECEIVED)
    copied = role_calls(graph, PACKET, COPIED)
    if not copied.count:
        return 0
    base = (received.inclusive + copied.inclusive - allocations) / (received.count + copied.count)
    return max(0, round(copied.inclusive - copied.count * base))


def per_event(few: str, many: str, events: int) -> dict[str, tuple[float, float]]:
    """Each part of ``ROLES``: (calls, instructions) per event, from the dump
    of ``few`` events and of ``events`` more than that; replication without
    the header vectors allocated for its copies."""
    small, large = call_graph(few), call_graph(many)
    out = {}
    for role, (function, caller) in ROLES.items():
        a, b = role_calls(small, function, caller), role_calls(large, function, caller)
        cost = b.inclusive - a.inclusive
        if role == "replication":
            cost -= allocations_in_copies(large) - allocations_in_copies(small)
        out[role] = ((b.count - a.count) / events, cost / events)
    return out


def bench_dumps(bench: Path) -> dict[tuple[str, str], tuple[str, str, int]]:
    """``(program, workload) -> (dump of few events, dump of many, many - few)``
    of a bench's instructions part: the last attempt at each count, which is
    the one its row was made from.  A dump is the text of its files, one per
    thread (``callgrind.out.N-TT``) or, in benches before callgrind counted
    threads apart, one (``callgrind.out.N``): each file names its functions
    afresh, so their texts read as one."""
    record = json.loads((bench / "experiment.json").read_text())
    rows = record["ours"]["instructions"]
    found = {}
    for index, row in enumerate(rows):
        runs: dict[int, list[Path]] = {}
        for folder in sorted((bench / "callgrind").glob(f"{row['program']}-{index}-*")):
            count = int(folder.name.rsplit("-", 2)[1])
            files: dict[int, list[Path]] = defaultdict(list)
            for path in folder.glob("callgrind.out.*"):
                files[int(path.name.split(".")[-1].split("-")[0])].append(path)
            if files:                           # a later attempt's folder sorts after an earlier one's
                runs[count] = sorted(files[max(files)])
        if len(runs) == 2:
            few, many = sorted(runs)
            found[row["program"], row["workload"]] = (dump_text(runs[few]), dump_text(runs[many]), many - few)
    return found


def dump_text(paths: list[Path]) -> str:
    return "\n".join(path.read_text() for path in paths)


#: How many of the actions that run the most primitives per event ``--actions`` lists.
TOP_ACTIONS = 15
#: The counter array a probed program counts each action's runs in, by action id.
PROBE = "bench_probe_actions"


def probed(program: dict[str, Any]) -> dict[str, Any]:
    """A bmv2 JSON program whose every action first counts itself in ``PROBE``.

    With bmv2's logging compiled out, this is how to learn which of the
    program's actions, p4c's straight-line ones (``tbl_<file><line>``)
    included, a packet runs: the counts say where the primitives are,
    not what they cost (the probe's own are extra, and left out)."""
    out = copy.deepcopy(program)
    ident = max((array["id"] for array in out["counter_arrays"]), default=-1) + 1
    out["counter_arrays"].append({"name": PROBE, "id": ident, "size": len(out["actions"]), "is_direct": False})
    for action in out["actions"]:
        action["primitives"].insert(0, {"op": "count", "parameters": [
            {"type": "counter_array", "value": PROBE}, {"type": "hexstr", "value": hex(action["id"])}]})
    return out


#: Files of macros and constants only: a primitive expanded from them is
#: the work of the control that used them.
SHARED_SOURCES = {"constants.p4", "headers.p4"}


def action_home(action: dict[str, Any]) -> str:
    """The source file most of an action's primitives come from: p4c inlines
    the splitter's sub-controls (BoundaryCheck in epochs.p4, SlideTracker in
    slides.p4) and may merge their straight-line code with their caller's
    into one action.  ``-`` for an action whose primitives name no file."""
    files = Counter(Path(primitive["source_info"]["filename"]).name for primitive in action["primitives"]
                    if "source_info" in primitive)
    own = Counter({name: n for name, n in files.items() if name not in SHARED_SOURCES}) or files
    return min(own, key=lambda name: (-own[name], name)) if own else "-"


def by_source(program: dict[str, Any], runs: dict[int, int], events: int) -> dict[str, tuple[float, float]]:
    """Per source file: (actions run, primitives run) per event, from each
    action id's runs over ``events`` events (``program`` unprobed)."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for action in program["actions"]:
        count = runs.get(action["id"], 0)
        if count:
            home = out[action_home(action)]
            home[0] += count / events
            home[1] += count * len(action["primitives"]) / events
    return {home: (actions, primitives) for home, (actions, primitives) in sorted(out.items())}


def count_actions(label: str, events: int, rate: float = 500.0) -> dict[int, int]:
    """Runs of each action of the splitter (``p4/splitter.p4``) over ``events``
    events of the bench's workload ``label``, on the probed program (root: veth pairs)."""
    from testbed.emulation.veth import Taps, VethRig, send_frames
    from testbed.experiments.bench.instructions import OPERATORS, SOURCE_PORT, workload
    from testbed.targets.bmv2 import toolchain
    from testbed.targets.bmv2.process import Bmv2Process

    program = json.loads(toolchain.compile_program().read_text())
    install, frames, copies, _deliveries = workload("splitter", label)
    with tempfile.TemporaryDirectory(prefix="probe-") as scratch, VethRig(1 + OPERATORS) as rig:
        json_path = Path(scratch) / "probed.json"
        json_path.write_text(json.dumps(probed(program)))
        proc = Bmv2Process(rig.switch_ends, Path(scratch), name="probe", namespace=rig.namespace,
                           json_path=json_path)
        proc.start()
        try:
            with proc.api() as api:
                install(api)
                taps = Taps({("in", port): rig.host_ends[port] for port in rig.host_ends if port != SOURCE_PORT})
                try:
                    send_frames(rig.host_ends[SOURCE_PORT], frames(events), rate)
                    got, want = len(taps.drain(5.0, expect=copies(events))), copies(events)
                finally:
                    taps.close()
                if got != want:
                    raise RuntimeError(f"{label}: {got} copies of {want}: the counts would be of other work")
                return {action["id"]: api.counter_read(PROBE, action["id"])[1] for action in program["actions"]}
        finally:
            proc.stop()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.experiments.bench.breakdown",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("bench", type=Path, help="a bench folder whose instructions part ran (results/bench/<id>)")
    ap.add_argument("--actions", type=int, metavar="EVENTS", default=0,
                    help="also run the splitter's actions, probed, on EVENTS events of each count workload "
                         "and time workload (root), and say per source file how many run")
    args = ap.parse_args(argv)
    dumps = bench_dumps(args.bench)
    if not dumps:
        print(f"{args.bench}: no callgrind dumps of the instructions part", file=sys.stderr)
        return 1
    rows = {(row["program"], row["workload"]): row
            for row in json.loads((args.bench / "experiment.json").read_text())["ours"]["instructions"]}
    for (program, workload), (few, many, events) in dumps.items():
        print(f"\n{program}, {workload}\n| part | calls per event | instructions per event |\n|---|---|---|")
        for role, (calls, cost) in per_event(few, many, events).items():
            print(f"| {role} | {calls:,.1f} | {cost:,.0f} |")
        threads = rows[program, workload].get("threads_per_event")
        if threads:
            print("\n| bmv2's thread | instructions per event |\n|---|---|")
            for thread, cost in threads.items():
                print(f"| {thread} | {cost:,} |")
    if args.actions:
        from testbed.experiments.bench.instructions import WORKLOADS
        from testbed.targets.bmv2 import toolchain

        program = json.loads(toolchain.compile_program().read_text())
        for label in WORKLOADS:
            runs = count_actions(label, args.actions)
            print(f"\nsplitter, {label}: actions run, by source file\n"
                  "| source | actions per event | primitives per event |\n|---|---|---|")
            for home, (actions, primitives) in by_source(program, runs, args.actions).items():
                print(f"| {home} | {actions:,.2f} | {primitives:,.2f} |")
            print("\n| action (p4c names straight-line code by file and line) | source | runs per event "
                  "| primitives |\n|---|---|---|---|")
            ranked = sorted(program["actions"], key=lambda a: -runs.get(a["id"], 0) * len(a["primitives"]))
            for action in ranked[:TOP_ACTIONS]:
                print(f"| {action['name']} | {action_home(action)} | {runs.get(action['id'], 0) / args.actions:,.2f} "
                      f"| {', '.join(p['op'] for p in action['primitives'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
