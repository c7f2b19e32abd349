"""Resources: what the splitter's state costs, against N and against streams.

S4 Table IV and Fig. 7, P4SS Fig. 6.  Three sources, each in its own step:

1. **The plan** (pure computation): table entries per table, multicast
   groups, replication entries (ports summed over groups), control calls,
   and register memory, for one stream as N grows, for N fixed as the
   streams grow, and for P4SS's three streams.  Register memory "per
   stream" is one cell of every register the stream's window kind uses
   (``contract.REGISTERS_USED``; the registers that let a stream change at
   run time, ``RECONFIG_REGISTERS``, are counted apart, since the papers'
   splitters have none, and so are the register and tables that write each
   copy's Windows header, ``HEADER_REGISTERS`` and ``HEADER_TABLES``:
   ``entries`` leaves them out, ``windows_header_entries`` counts them) -- the program declares them for all
   65,536 stream ids whether configured or not, which is the second number
   (``register_bytes_allocated``).
2. **Live targets**: the plan installed on the embedded model in process,
   on an embedded switch process and on bmv2, then read back
   (``table_entries``, ``mc_dump``) and compared with the plan, entry by
   entry; then cleared, and the switch must be empty again.
3. **The compiled program** (where p4c exists): tables, actions, register
   arrays and their bits, and the longest chain of tables one frame can pass
   through per pipeline -- the closest bmv2 analogue of a Tofino stage count.
"""
from __future__ import annotations

import graphlib
import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
from pydantic import Field, field_validator

from testbed import ROOT
from testbed.analysis.plots import plt, save_figure
from testbed.dataplane.contract import (
    HEADER_REGISTERS,
    HEADER_TABLES,
    N_PORTS,
    N_STREAMS,
    RECONFIG_REGISTERS,
    REGISTERS,
    REGISTERS_USED,
    SCHEMA,
    build_tables,
    param_kinds,
    to_int,
)
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.emulation.veth import VethRig
from testbed.experiments import paper
from testbed.experiments.base import ExperimentKind, KindParams, interruptible, live_switch
from testbed.experiments.shipped import check_scenarios, scenario
from testbed.rundir import ExperimentDir
from testbed.semantics.instances import MAX_SHARED_INSTANCES
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import OperatorCount, StreamCount
from testbed.semantics.topology import Topology, WindowSpec, parse_topology
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.client import Bmv2Error
from testbed.targets.bmv2.program import short_name
from testbed.targets.embedded.client import ControlError

#: S4's four semantics and the scenario each takes its window spec from.
SEMANTICS = {"cbtw": "cbtw1", "cbsw": "cbsw1", "tbtw": "tbtw1", "tbsw": "tbsw1"}
#: The embedded model without a process: the plan's first reader.
IN_PROCESS = "model-in-process"
FIG_7, P4SS_FIG_6, TABLE_IV = "s4_fig7", "p4ss_fig6", "s4_table4"


def powers_of(base: int, top: int) -> list[int]:
    out, v = [], 1
    while v <= top:
        out.append(v)
        v *= base
    return out


class ResourceParams(KindParams):
    semantics: dict[str, str] = dict(SEMANTICS)
    n_sweep: list[OperatorCount] = Field(default=powers_of(2, 1024), min_length=1)
    stream_sweep: list[StreamCount] = Field(default=powers_of(4, 65536), min_length=1)
    #: N of every stream in the stream sweep.
    stream_sweep_n: OperatorCount = 6
    #: P4SS Fig. 6: its scenario's three streams, each given N operators.
    p4ss_scenario: str = "p4ss"
    p4ss_n: list[OperatorCount] = Field(default=powers_of(2, 64), min_length=1)
    #: N installed on the live targets: whole hosts up to bmv2's ports,
    #: instances on shared hosts past them (``readback_topology``).
    readback_n: list[OperatorCount] = Field(default=[2, 8, 64, 1024], min_length=1)
    #: Streams (of ``stream_sweep_n`` operators each) installed on the live targets.
    readback_streams: list[StreamCount] = Field(default=[1, 4096, 65536], max_length=16)

    @field_validator("semantics")
    @classmethod
    def _scenarios(cls, semantics: dict[str, str]) -> dict[str, str]:
        check_scenarios(semantics.values())
        return semantics

    @field_validator("p4ss_scenario")
    @classmethod
    def _p4ss(cls, name: str) -> str:
        check_scenarios([name])
        return name

    @field_validator("stream_sweep", "readback_streams")
    @classmethod
    def _stream_ids(cls, sizes: list[int]) -> list[int]:
        if sizes and (max(sizes) > N_STREAMS or min(sizes) < 1):
            raise ValueError(f"streams must be 1..{N_STREAMS} (16-bit stream ids)")
        return sizes

    @field_validator("readback_n")
    @classmethod
    def _instances(cls, sizes: list[int]) -> list[int]:
        if max(sizes) > MAX_SHARED_INSTANCES or min(sizes) < 1:
            raise ValueError(f"N must be 1..{MAX_SHARED_INSTANCES} (16-bit instance ids past the ports)")
        return sizes


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------
def sweep_topology(window: WindowSpec, n_ops: int, streams: int = 1) -> Topology:
    """``streams`` streams (ids 0..) with one window spec over the same ``n_ops`` operators."""
    operators = [f"o{i}" for i in range(1, n_ops + 1)]
    hosts = {"src": {}} | {op: {} for op in operators}
    data = [{"id": sid, "source": "src", "window": window.model_dump(exclude_none=True),
             "operators": operators, "events": 1, "rate": 1} for sid in range(streams)]
    return parse_topology({"name": "sweep", "hosts": hosts, "streams": data}, plan_only=True)


#: Instances per shared host where a readback's N passes the whole hosts bmv2's ports take.
INSTANCES_PER_HOST = 256


def readback_topology(window: WindowSpec, n_ops: int, streams: int = 1) -> Topology:
    """``sweep_topology``, or past bmv2's ports N instances on shared hosts of
    ``INSTANCES_PER_HOST`` each, as a run of N = 1,024 places them."""
    if n_ops <= N_PORTS - 2:
        return sweep_topology(window, n_ops, streams)
    hosts = -(-n_ops // INSTANCES_PER_HOST)
    shares = {f"o{i + 1}": n_ops // hosts + (1 if i < n_ops % hosts else 0) for i in range(hosts)}
    data = [{"id": sid, "source": "src", "window": window.model_dump(exclude_none=True),
             "operators": list(shares), "events": 1, "rate": 1} for sid in range(streams)]
    return parse_topology({"name": "sweep", "hosts": {"src": {}} | {h: {"instances": k} for h, k in shares.items()},
                           "streams": data}, plan_only=True)


#: The tables the sweeps count: the plain build's, one program that takes
#: every topology.  The plan fills every build's; the build without changes
#: holds operator_back (N times the most windows an event lies in, per
#: operator set) in place of egress_rewrite and operator_position.
SWEPT_TABLES = [t for t in SCHEMA if t in build_tables("splitter")]


def register_bits(kind: str) -> int:
    """Register bits one stream of a window kind occupies: one cell of each register it uses."""
    return sum(REGISTERS[name] for name in REGISTERS_USED[kind])


def plan_row(plan: SplitterPlan) -> dict[str, Any]:
    """What installing ``plan`` on the plain build takes (``SWEPT_TABLES``):
    entries per table, groups, replication, calls, register memory."""
    cost = plan.cost()
    entries = sum(cost.get(t, 0) for t in SWEPT_TABLES if t not in HEADER_TABLES)
    streams = list(plan.streams.values())
    bits = sum(register_bits(sp.stream.window.kind) for sp in streams)
    return {**{t: cost.get(t, 0) for t in SWEPT_TABLES}, "entries": entries,
            "windows_header_entries": sum(cost.get(t, 0) for t in HEADER_TABLES if t in SWEPT_TABLES),
            "multicast_groups": cost["multicast_groups"], "multicast_ports": cost["multicast_ports"],
            "control_calls": cost["multicast_groups"] + 2 * cost["multicast_nodes"] + sum(
                cost.get(t, 0) for t in SWEPT_TABLES),
            "register_bytes": bits / 8, "register_bytes_allocated": sum(REGISTERS.values()) * N_STREAMS / 8}


def semantic_windows(semantics: dict[str, str]) -> dict[str, WindowSpec]:
    return {sem: scenario(name)[1].streams[0].window for sem, name in semantics.items()}


def sweep_n(windows: dict[str, WindowSpec], sizes: Iterable[int]) -> pd.DataFrame:
    return pd.DataFrame([{"semantic": sem, "N": n, "streams": 1,
                          **plan_row(SplitterPlan(sweep_topology(w, n), checked=False))}
                         for sem, w in windows.items() for n in sizes])


def sweep_streams(windows: dict[str, WindowSpec], sizes: Iterable[int], n_ops: int) -> pd.DataFrame:
    return pd.DataFrame([{"semantic": sem, "N": n_ops, "streams": k,
                          **plan_row(SplitterPlan(sweep_topology(w, n_ops, k), checked=False))}
                         for sem, w in windows.items() for k in sizes])


def p4ss_growth(topo: Topology, sizes: Iterable[int]) -> pd.DataFrame:
    """P4SS's streams, each over the same N operators: per-stream state and the total."""
    rows = []
    for n in sizes:
        operators = [f"o{i}" for i in range(1, n + 1)]
        hosts = {s.source: {} for s in topo.streams} | {op: {} for op in operators}
        streams = [s.model_copy(update={"operators": operators}).model_dump(mode="json", exclude_none=True)
                   for s in topo.streams]
        plan = SplitterPlan(parse_topology({"name": "p4ssgrowth", "hosts": hosts, "streams": streams},
                                           plan_only=True), checked=False)
        for sp in plan.streams.values():
            groups = sp.groups.values()
            rows.append({"stream": sp.stream.label, "N": n,
                         "entries": sum(e.table not in HEADER_TABLES for e in sp.all_entries()),
                         "multicast_groups": len(sp.groups), "multicast_ports": sum(len(g.ports) for g in groups),
                         "register_bytes": register_bits(sp.stream.window.kind) / 8})
        total = plan_row(plan)
        rows.append({"stream": "all", "N": n, **{k: total[k] for k in
                     ("entries", "multicast_groups", "multicast_ports", "register_bytes")}})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------
# live targets
# ---------------------------------------------------------------------------
def planned_state(plan: SplitterPlan, held: Iterable[str]) -> tuple[dict[str, set], dict[int, tuple[int, ...]]]:
    """The plan as a switch whose build holds the tables ``held`` reports it
    back: entries as integers per table, ports per group."""
    tables: dict[str, set] = {t: set() for t in SCHEMA if t in held}
    for e in plan.entries():
        if e.table not in tables:
            continue
        kinds = param_kinds(e.table, e.action)
        tables[e.table].add((tuple(to_int(v) for v in e.match), e.action,
                             tuple(to_int(v, k) for v, k in zip(e.params, kinds))))
    # every node's ports: a shared host's port once per instance node
    return tables, {g.mgid: tuple(sorted(p for _rid, ports in g.nodes for p in ports)) for g in plan.groups}


def node_ports(node: Any) -> list[int]:
    """A PRE node's ports from ``mc_dump``, whether it reports ``(rid, ports)``
    or ``{"rid", "ports", ...}``."""
    return list(node["ports"] if isinstance(node, dict) else node[1])


def switch_state(api: Any) -> tuple[dict[str, set], dict[int, tuple[int, ...]]]:
    """What the switch holds, read back through the control API, in each table its build has."""
    held = set(api.held_tables())
    tables = {t: {(tuple(e["match"]), e["action"], tuple(e["params"])) for e in api.table_entries(t)}
              for t in SCHEMA if t in held}
    groups = {int(g): tuple(sorted(p for node in nodes for p in node_ports(node)))
              for g, nodes in api.mc_dump().items()}
    return tables, groups


def compare(target: str, semantic: str, plan: SplitterPlan, api: Any) -> list[dict[str, Any]]:
    """One row per table and for the groups: the plan's count, the switch's, and whether they hold the same."""
    got_tables, got_groups = switch_state(api)
    want_tables, want_groups = planned_state(plan, got_tables)
    topo = plan.topology
    point = {"target": target, "semantic": semantic, "N": len(topo.streams[0].operators), "streams": len(topo.streams)}
    rows = [{**point, "what": t, "planned": len(want_tables[t]),
             "read_back": len(got_tables[t]), "same": want_tables[t] == got_tables[t]} for t in got_tables]
    rows.append({**point, "what": "multicast_groups",
                 "planned": len(want_groups), "read_back": len(got_groups), "same": want_groups == got_groups})
    rows.append({**point, "what": "multicast_ports",
                 "planned": sum(map(len, want_groups.values())), "read_back": sum(map(len, got_groups.values())),
                 "same": want_groups == got_groups})
    return rows


def readback(target: str, api: Any, windows: dict[str, WindowSpec], sizes: list[int], streams: Iterable[int] = (),
             streams_n: int = 6, log=lambda line: None) -> list[dict[str, Any]]:
    """Install, read back, clear and check the switch is empty: for every
    semantic, one stream at each N, then ``streams`` streams of ``streams_n``."""
    rows = []
    controller = Controller(api)
    for sem, window in windows.items():
        points = [readback_topology(window, n) for n in sizes] + \
                 [readback_topology(window, streams_n, count) for count in streams]
        for topo in points:
            plan = SplitterPlan(topo)
            try:
                install = controller.install(plan)
            except (Bmv2Error, ControlError) as err:
                # The switch cannot hold it (bmv2's replication engine has a
                # fixed number of nodes): the readback's answer at this point.
                controller.clear()
                rows.append({"target": target, "semantic": sem, "N": len(topo.streams[0].operators),
                             "streams": len(topo.streams), "what": "refused", "planned": len(plan.entries()),
                             "read_back": 0, "same": True, "cleared": True, "install_s": None, "refused": str(err)})
                log(f"{target} {sem}: N = {rows[-1]['N']}, {rows[-1]['streams']:,} streams refused: {err}")
                continue
            found = compare(target, sem, plan, api)
            controller.clear()
            tables, groups = switch_state(api)
            emptied = not groups and not any(tables.values())
            rows += [dict(r, cleared=emptied, install_s=round(install["groups_s"] + install["tables_s"], 4))
                     for r in found]
            log(f"{target} {sem}: N = {found[0]['N']}, {found[0]['streams']:,} streams read back "
                f"({install['entries']:,} entries, {install['groups']:,} groups, "
                f"{install['groups_s'] + install['tables_s']:.2f} s to install)")
    return rows


# ---------------------------------------------------------------------------
# the compiled program
# ---------------------------------------------------------------------------
def longest_chain(pipeline: dict[str, Any], counts) -> list[str]:
    """The path through a bmv2 pipeline's control flow with the most nodes for
    which ``counts(table)`` holds; conditionals are passed through, not counted.

    Nodes are tables (``next_tables``, ``base_default_next``) and conditionals
    (``true_next``, ``false_next``); the graph is acyclic (P4 has no loops).
    """
    tables = {t["name"]: t for t in pipeline["tables"]}
    successors: dict[str, set[str]] = {}
    for t in pipeline["tables"]:
        successors[t["name"]] = {n for n in [*t.get("next_tables", {}).values(), t.get("base_default_next")] if n}
    for c in pipeline.get("conditionals", []):
        successors[c["name"]] = {n for n in (c.get("true_next"), c.get("false_next")) if n}
    predecessors: dict[str, set[str]] = {node: set() for node in successors}
    for node, nexts in successors.items():
        for nxt in nexts:
            predecessors.setdefault(nxt, set()).add(node)
    best: dict[str, list[str]] = {}
    for node in graphlib.TopologicalSorter(predecessors).static_order():
        before = max((best[p] for p in predecessors[node]), key=len, default=[])
        best[node] = before + ([node] if node in tables and counts(tables[node]) else [])
    reachable = _reachable(pipeline.get("init_table"), successors)
    return max((best[n] for n in reachable), key=len, default=[])


def _reachable(start: Any, successors: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [start] if start else []
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(successors.get(node, ()))
    return seen


def is_match_table(table: dict[str, Any]) -> bool:
    """A table the control plane fills; p4c also makes key-less tables to run
    actions called straight from ``apply`` blocks."""
    return bool(table.get("key"))


def program_stats(config: dict[str, Any]) -> dict[str, Any]:
    """Tables, actions, registers and the longest table chains of a bmv2 JSON."""
    pipelines = {}
    for p in config["pipelines"]:
        pipelines[p["name"]] = {
            "tables": len(p["tables"]), "match_tables": sum(map(is_match_table, p["tables"])),
            "conditionals": len(p.get("conditionals", [])),
            "longest_chain": longest_chain(p, lambda t: True),
            "longest_match_chain": longest_chain(p, is_match_table),
        }
    registers = [{"name": r["name"], "bitwidth": r["bitwidth"], "size": r["size"]} for r in config["register_arrays"]]
    sizes = {short_name(t["name"]): t["max_size"] for p in config["pipelines"] for t in p["tables"]
             if is_match_table(t) and "max_size" in t}
    return {"pipelines": pipelines, "actions": len(config["actions"]), "table_sizes": sizes,
            "register_arrays": registers,
            "register_bytes": sum(r["bitwidth"] * r["size"] for r in registers) / 8,
            "counter_arrays": len(config.get("counter_arrays", []))}


def fits(row: dict[str, Any], table_sizes: dict[str, int]) -> bool:
    """Whether a plan of this size fits the compiled program: every table's
    entries within its size, and every operator an instance the splitter can
    address.  An operator has a port of its own while they last (one is the
    source's); past them, the instances share hosts as a live readback places
    them (``readback_topology``), each with a 16-bit instance id.  bmv2's
    replication engine has a node limit of its own, which no compiled file
    states: a live readback it refuses is recorded as refused."""
    addressable = row["N"] + 1 < N_PORTS or row["N"] <= MAX_SHARED_INSTANCES
    return addressable and all(row[t] <= table_sizes.get(t, row[t]) for t in SWEPT_TABLES)


def largest_fitting(rows: pd.DataFrame, axis: str, table_sizes: dict[str, int]) -> dict[str, Any]:
    """Per semantic, the largest swept ``axis`` value whose plan fits, and the first that does not."""
    out = {}
    for sem, part in rows.groupby("semantic", sort=False):
        ok = part[[fits(r, table_sizes) for r in part.to_dict("records")]]
        bad = part[~part[axis].isin(ok[axis])]
        out[sem] = {"largest_fitting": int(ok[axis].max()) if len(ok) else None,
                    "first_not_fitting": int(bad[axis].min()) if len(bad) else None}
    return out


# ---------------------------------------------------------------------------
# the kind
# ---------------------------------------------------------------------------
class Resources(ExperimentKind):
    """Plan sweeps, live read-back on every target, and the compiled program."""

    Params = ResourceParams
    paper = {"s4_table4": paper.S4_TABLE_IV, "s4_fig7": paper.S4_FIG_7, "p4ss_fig6": paper.P4SS_FIG_6}

    def measure(self) -> dict[str, Any]:
        p, x = self.params, self.expdir
        windows = semantic_windows(p.semantics)
        self.log(f"plan: N over {p.n_sweep[0]}..{p.n_sweep[-1]}, streams over {p.stream_sweep[0]}.."
                 f"{p.stream_sweep[-1]}")
        by_n, by_streams, growth = self.sweeps(p)
        for frame, path in ((by_n, x.plan_by_n), (by_streams, x.plan_by_streams), (growth, x.p4ss_growth)):
            frame.to_parquet(path, index=False)
        rows = readback(IN_PROCESS, SplitterPipeline(), windows, p.readback_n, p.readback_streams, p.stream_sweep_n)
        targets = self.targets()
        if targets:
            with interruptible(f"{self.spec.name}-{x.root.name}"), VethRig(0) as rig:
                for target in targets:
                    self.log(f"read-back on {target} at N = {p.readback_n} and streams = {p.readback_streams}")
                    with live_switch(target, x, f"{target}-readback", rig) as (_proc, api):
                        rows += readback(target, api, windows, p.readback_n, p.readback_streams, p.stream_sweep_n,
                                         self.log)
        pd.DataFrame(rows).to_parquet(x.readback, index=False)
        compiled = self.compiled()
        sizes = compiled.get("table_sizes")
        fit = ({"by_n": largest_fitting(by_n, "N", sizes), "by_streams": largest_fitting(by_streams, "streams", sizes)}
               if sizes else {"skipped": compiled.get("skipped")})
        return {"contract": contract_counts(), "compiled": compiled, "fits_compiled_program": fit,
                "readback": readback_summary(pd.DataFrame(rows)),
                "plan_at_largest": {"by_n": by_n[by_n["N"] == by_n["N"].max()].to_dict("records"),
                                    "by_streams": by_streams[by_streams["streams"] == by_streams["streams"].max()]
                                    .to_dict("records")}}

    @staticmethod
    def sweeps(p: "ResourceParams") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """The plan's rows: against N, against the stream count, and P4SS's growth."""
        windows = semantic_windows(p.semantics)
        return (sweep_n(windows, p.n_sweep), sweep_streams(windows, p.stream_sweep, p.stream_sweep_n),
                p4ss_growth(scenario(p.p4ss_scenario)[1], p.p4ss_n))

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        by_n, by_streams, growth = cls.sweeps(params)
        return {"by_n": by_n.to_dict("records"), "by_streams": by_streams.to_dict("records"),
                "p4ss_growth": growth.to_dict("records")}

    def compiled(self) -> dict[str, Any]:
        reason = toolchain.compiler_missing()
        if reason:
            self.skipped["compiled program"] = reason
            return {"skipped": reason}
        path = toolchain.compile_program()
        stats = {"program": str(path.relative_to(ROOT)), **program_stats(json.loads(path.read_text()))}
        self.expdir.program_stats.write_text(json.dumps(stats, indent=2))
        return stats

    def ok(self, ours: dict[str, Any]) -> bool:
        return ours["readback"]["all_same"] and ours["readback"]["all_cleared"]

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        return [draw_fig7(expdir, record), draw_p4ss(expdir, record), draw_table4(expdir, record)]


def contract_counts() -> dict[str, Any]:
    """What the program declares, from the contract (known without p4c)."""
    return {"register_arrays_declared": len(REGISTERS),
            "register_arrays_used": {kind: len(regs) for kind, regs in REGISTERS_USED.items()},
            "register_bits_per_stream": {kind: register_bits(kind) for kind in REGISTERS_USED},
            "reconfiguration_register_bits_per_stream": sum(REGISTERS[name] for name in RECONFIG_REGISTERS),
            "windows_header_register_bits_per_stream": sum(REGISTERS[name] for name in HEADER_REGISTERS),
            "match_tables": len(SWEPT_TABLES)}


def readback_summary(rows: pd.DataFrame) -> dict[str, Any]:
    """Whether every install the switch took read back as planned and cleared,
    the largest N and stream count it took per target, and what it refused."""
    rows = rows.assign(streams=rows["streams"] if "streams" in rows else 1)
    refused = rows[rows["what"] == "refused"]
    taken = rows[rows["what"] != "refused"]
    per_target = taken.groupby("target").agg(installs=("N", "size"), same=("same", "all"), cleared=("cleared", "all"),
                                             largest_n=("N", "max"), most_streams=("streams", "max"))
    return {"all_same": bool(rows["same"].all()), "all_cleared": bool(rows["cleared"].all()),
            "targets": per_target.reset_index().to_dict("records"),
            "refused": refused.reindex(columns=["target", "semantic", "N", "streams", "refused"]).to_dict("records")}


# ---------------------------------------------------------------------------
# figures, from raw/ and the record
# ---------------------------------------------------------------------------
def draw_fig7(expdir: ExperimentDir, record: dict[str, Any]) -> Path:
    by_n, by_streams = pd.read_parquet(expdir.plan_by_n), pd.read_parquet(expdir.plan_by_streams)
    fig, axes = plt.subplots(2, 2, figsize=(13, 7.5))
    # Semantics with the same state draw the same line: each its own marker, the
    # first ones larger and hollow, so a line drawn later never hides one before it.
    marks = {sem: {"marker": m, "ms": size, "mfc": "none"} for sem, m, size in
             zip(by_n["semantic"].unique(), "osD^v", (9, 7, 5, 3, 3))}
    for sem, part in by_n.groupby("semantic", sort=False):
        line, = axes[0, 0].plot(part["N"], part["entries"], label=f"{sem} entries", **marks[sem])
        axes[0, 0].plot(part["N"], part["multicast_ports"], ls="--", color=line.get_color(),
                        label=f"{sem} replication entries")
        axes[0, 1].plot(part["N"], part["register_bytes"], label=sem, **marks[sem])
    for sem, part in by_streams.groupby("semantic", sort=False):
        axes[1, 0].plot(part["streams"], part["entries"], label=sem, **marks.get(sem, {"marker": "o"}))
        axes[1, 1].plot(part["streams"], part["register_bytes"], label=sem, **marks.get(sem, {"marker": "o"}))
    sizes = record["ours"].get("compiled", {}).get("table_sizes")
    if sizes:
        for ax in (axes[0, 0], axes[1, 0]):
            ax.axhline(min(sizes.values()), color="black", ls=":",
                       label=f"bmv2 program: {min(sizes.values()):,} entries per table")
    allocated = by_n["register_bytes_allocated"].iloc[0]
    for ax in (axes[0, 1], axes[1, 1]):
        ax.axhline(allocated, color="grey", ls=":", label=f"declared by the program ({allocated / 2**20:.1f} MiB)")
    n_fixed = int(by_streams["N"].iloc[0])
    titles = [("entries against N (one stream)", "N (operator instances)", "table / replication entries"),
              ("register memory against N (one stream)", "N", "bytes"),
              (f"entries against streams (N = {n_fixed})", "concurrent streams", "table entries"),
              (f"register memory against streams (N = {n_fixed})", "concurrent streams", "bytes")]
    for ax, (title, xl, yl) in zip(axes.flat, titles):
        ax.set(xscale="log", yscale="log", title=title, xlabel=xl, ylabel=yl)
        ax.grid(alpha=0.3, which="both")
        # Beside the axes: inside, the legend lay over the lines.
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    s4 = record["paper"]["s4_fig7"]
    fig.suptitle("S4 Fig. 7-like: the plan's state (ours) | S4 on Tofino1: up to "
                 f"{s4['count_tumbling']['max_operators'] // 1000}k operators and "
                 f"{s4['count_tumbling']['max_streams'] // 1000}k streams (count tumbling), "
                 f"{s4['time_based']['max_operators'] // 1000}k / {s4['time_based']['max_streams'] // 1000}k "
                 f"(time), <= {s4['max_sram_bytes'] // 10**6} MB SRAM", fontsize=9)
    return save_figure(fig, expdir.figure(FIG_7))


def draw_p4ss(expdir: ExperimentDir, record: dict[str, Any]) -> Path:
    growth = pd.read_parquet(expdir.p4ss_growth)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for name, part in growth.groupby("stream", sort=False):
        style = {"color": "black", "lw": 2} if name == "all" else {}
        axes[0].plot(part["N"], part["entries"], marker="o", ms=3, label=f"stream {name}", **style)
        axes[1].plot(part["N"], part["multicast_groups"], marker="o", ms=3, label=f"stream {name}", **style)
        axes[2].plot(part["N"], part["register_bytes"], marker="o", ms=3, label=f"stream {name}", **style)
    n = sorted(growth["N"].unique())
    axes[0].plot(n, [v + 2 for v in n], ls=":", color="grey", label="P4SS: N + 2 per stream")
    for ax, title in zip(axes, ("table entries", "multicast groups", "register bytes")):
        ax.set(title=title, xlabel="N (operator instances per stream)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("P4SS Fig. 6-like: state of three streams with different specs, against N (ours); "
                 "P4SS's stated per-stream entries dotted")
    return save_figure(fig, expdir.figure(P4SS_FIG_6))


def draw_table4(expdir: ExperimentDir, record: dict[str, Any]) -> Path:
    s4, ours = record["paper"]["s4_table4"], record["ours"]
    sems = list(s4["register_arrays"])
    contract, compiled = ours["contract"], ours["compiled"]
    pipes = compiled.get("pipelines", {})

    def chain(key: str) -> str:
        return " + ".join(f"{len(v[key])} {k}" for k, v in pipes.items()) if pipes else "no p4c"

    match = (f"{sum(v['match_tables'] for v in pipes.values())} "
             f"({sum(v['tables'] for v in pipes.values())} with p4c's action tables)" if pipes else "no p4c")
    rows = [
        ["register arrays", *[str(s4["register_arrays"][s]) for s in sems],
         f"{contract['register_arrays_declared']} declared; used: "
         + "/".join(str(contract["register_arrays_used"]["count" if s.startswith("cb") else "time"]) for s in sems)],
        ["match tables", *[str(s4["match_tables"][s]) for s in sems], match],
        ["stages / longest chain", *[str(s4["stages"][s]) for s in sems],
         f"match tables: {chain('longest_match_chain')}; all: {chain('longest_chain')}"],
    ]
    fig, ax = plt.subplots(figsize=(12, 2.2))
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=["", *[f"S4 {s}" for s in sems], "ours: one program, all four"],
                     loc="center", cellLoc="center", colWidths=[0.14, 0.07, 0.07, 0.07, 0.07, 0.58])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.6)
    ax.set_title("S4 Table IV (Tofino1, p4i) beside the bmv2 program and the contract", fontsize=10)
    return save_figure(fig, expdir.figure(TABLE_IV))
