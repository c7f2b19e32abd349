"""``testbed plan``: what a window spec will do, shown before anything runs."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from testbed.dataplane.contract import build_tables
from testbed.semantics.plan import SplitterPlan, stream_plan_json
from testbed.semantics.topology import Topology
from testbed.semantics.workload import stream_events


def first_verdicts(topo: Topology, stream_id: int, k: int) -> list[dict[str, Any]]:
    s = topo.stream(stream_id)
    ev = stream_events(s, topo.seed, limit=k)
    oracle = s.oracle()
    out = []
    for seq, ts, key in zip(ev["seq"].tolist(), ev["ts"].tolist(), ev["key"].tolist()):
        v = oracle.step(seq, ts, key)
        row: dict[str, Any] = {"seq": seq, "ts": ts, "operators": list(v.operators)}
        row["windows"] = list(v.windows)
        if v.dropped:
            row["dropped"] = v.dropped
        out.append(row)
    return out


def bmv2_build(topo: Topology) -> str:
    """The splitter build bmv2 runs the topology on (``toolchain.splitter_program``),
    by its program's name: what the topology uses decides it."""
    from testbed.targets.bmv2 import toolchain

    return toolchain.splitter_program(topo.sends_batches(), topo.cep is not None, topo.changes_streams()).stem


def build_cost(plan: SplitterPlan, build: str) -> tuple[dict[str, int], dict[str, int]]:
    """The plan's cost (``SplitterPlan.cost``) split in two: what ``build`` holds
    (its tables, and the multicast groups every build has), and the entries
    of tables it does not hold.  The plan fills every build's tables, and
    the embedded target holds them all; bmv2 is given only its build's."""
    held = build_tables(build)
    cost = plan.cost()
    other = {table: n for table, n in cost.items() if table not in held and not table.startswith("multicast_")}
    return {table: n for table, n in cost.items() if table not in other}, other


def plan_json(topo: Topology, k: int) -> dict[str, Any]:
    plan = SplitterPlan(topo)
    streams = {str(s.id): stream_plan_json(plan, s.id, first_verdicts(topo, s.id, k))
               for s in topo.streams}
    build = bmv2_build(topo)
    held, other = build_cost(plan, build)
    return {"topology": topo.name, "streams": streams,
            "egress": [e.as_json() for e in plan.egress], "cost": plan.cost(),
            "bmv2": {"build": build, "cost": held, "not_held": other}}


def print_plan(topo: Topology, k: int) -> None:
    console = Console()
    plan = SplitterPlan(topo)
    console.print(f"[bold]{topo.name}[/]: {topo.description}")
    for s in topo.streams:
        sp = plan.streams[s.id]
        w = s.window
        kind = "tumbling" if w.size <= w.slide else "sliding"
        origin = "" if w.kind == "count" else f", origin={'first event' if w.origin is None else w.origin}"
        console.rule(f"stream {s.id} ({s.label}): {w.kind}-based {kind}, size={w.size} slide={w.slide}"
                     f"{origin}, N={len(s.operators)} [{', '.join(s.operators)}]"
                     f"{', split by key: crc32(key) mod N' if s.split == 'key' else ''}")
        entries = Table(title="table entries", show_lines=False)
        for col in ("table", "action", "match", "params"):
            entries.add_column(col)
        for e in sp.all_entries():
            entries.add_row(e.table, e.action, " ".join(map(str, e.match)), " ".join(map(str, e.params)))
        console.print(entries)
        if sp.groups:
            groups = Table(title="multicast groups")
            for col in ("mgid", "ports", "operators"):
                groups.add_column(col)
            for g in sorted(sp.groups.values(), key=lambda g: g.mgid):
                replicas = " ".join(str(p) for _rid, ports in g.nodes for p in ports)
                groups.add_row(str(g.mgid), replicas, ", ".join(g.hosts))
            console.print(groups)
        events = Table(title=f"first {k} events")
        for col in ("seq", "ts", "windows", "operators"):
            events.add_column(col)
        for row in first_verdicts(topo, s.id, k):
            wins = row["windows"]
            span = f"{wins[0]}..{wins[-1]}" if len(wins) > 1 else (str(wins[0]) if wins else "-")
            ops = ", ".join(row["operators"]) or f"(none: {row.get('dropped')})"
            events.add_row(str(row["seq"]), str(row["ts"]), span, ops)
        console.print(events)
    # Egress keys on the copy's port and rid (0 for a whole host); its action
    # names the instance: a whole host's port, or an id past the ports for an
    # instance of a shared host or a host in a rack.
    egress = Table(title="egress rewrite ((port, rid) -> instance id, destination)")
    for col in ("port", "rid", "id", "operator", "mac", "ip"):
        egress.add_column(col)
    operators = plan.operator_of_id()
    for e in plan.egress:
        mac, ip, instance = e.params
        egress.add_row(str(e.match[0]), str(e.match[1]), str(instance), operators[instance], str(mac), str(ip))
    console.print(egress)
    build = bmv2_build(topo)
    held, other = build_cost(plan, build)
    console.print(f"cost on bmv2 (build {build}): " + ", ".join(f"{k}={v}" for k, v in held.items()))
    if other:
        console.print(f"the embedded target also holds (no table of {build}): "
                      + ", ".join(f"{k}={v}" for k, v in other.items()))
