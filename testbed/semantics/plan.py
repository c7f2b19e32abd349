"""The splitter plan: the control-plane state a P4 splitter needs for a topology.

The plan is derived from the window definitions (``testbed.semantics.windows``) and is
the only thing the controller installs, on either target.  Its tables and
their actions are the ones ``p4/`` declares (``testbed.dataplane.contract.SCHEMA``).

How the data plane uses it (``docs/windows.md`` has the reasoning): per stream
the switch keeps the start of the newest slide, the operator ``w`` of the
newest window (``q mod N`` for slide ``q``) and how many windows have begun
(saturating).  An event at offset ``p`` in its slide lies in
``c = min(begun, full + (p < extra))`` windows, whose operators are the ``c``
operators ending at ``w`` in round-robin order.  ``(w, c)`` therefore names
the destination set, and the plan maps every reachable pair to a port
(``c = 1``) or a multicast group (``c >= 2``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from testbed.semantics.addressing import plan_addresses
from testbed.semantics.instances import instance_counts, placement_order, plan_instances
from testbed.semantics.limits import MAX_GROUPS, TABLE_CAPACITY, WINDOWS_BACK_UNIT
from testbed.semantics.topology import Stream, Topology, TopologyError, load_topology
from testbed.semantics.windows import EVENT, late_slides, max_windows, windows_per_position

WINDOW_SPEC = "window_spec"
OPERATOR_COUNT = "operator_count"
PREVIOUS_SPEC = "previous_spec"
UNICAST = "unicast"
MULTICAST = "multicast"
HANDOVER = "handover"
EGRESS_REWRITE = "egress_rewrite"
OPERATOR_POSITION = "operator_position"
PREVIOUS_POSITION = "previous_position"
OPERATOR_BACK = "operator_back"
#: operator_count's action per way of splitting (testbed.semantics.splitting).
SPLIT_ACTIONS = {"windows": "set_operator_count", "key": "split_by_key"}
#: Tables whose entries belong to one bank of one stream (their second key is the bank).
BANKED = (WINDOW_SPEC, OPERATOR_COUNT)
#: Tables whose entries belong to an operator set (their first key), which
#: every stream dealt over the same operators shares.
SHARED = (UNICAST, MULTICAST, OPERATOR_POSITION, OPERATOR_BACK)
#: Tables that describe one stream's transition: each change replaces their entries.
TRANSITION = (PREVIOUS_SPEC, PREVIOUS_POSITION, HANDOVER)


class PlanError(TopologyError):
    """A topology whose plan does not fit the switch's tables or group ids."""


@dataclass(frozen=True)
class TableEntry:
    """One ``table_add``: match key values and action parameters, in P4 order."""

    table: str
    action: str
    match: tuple[Any, ...]
    params: tuple[Any, ...]

    def cli(self) -> str:
        """The entry as a ``simple_switch_CLI`` / p4-utils ``table_add`` line."""
        m = " ".join(str(v) for v in self.match)
        p = " ".join(str(v) for v in self.params)
        return f"table_add {self.table} {self.action} {m} => {p}".rstrip(" =>")

    def as_json(self) -> dict[str, Any]:
        return {"action": self.action, "match": list(self.match), "params": list(self.params)}


@dataclass(frozen=True)
class MulticastGroup:
    """A PRE group.  The operators that are whole hosts share one node with
    rid 0, replicating to their ``ports``; each instance of a shared host has
    a node of its own, whose rid is its instance id (``shared``: ``(id, port)``
    pairs), so that egress knows which of the host's instances a replica is for."""

    mgid: int
    ports: tuple[int, ...]
    hosts: tuple[str, ...]       # the operators replicated to: rid 0's in port order, then the shared ones
    shared: tuple[tuple[int, int], ...] = ()

    @property
    def nodes(self) -> list[tuple[int, tuple[int, ...]]]:
        """``(rid, ports)`` of each node the group holds."""
        own = [(0, self.ports)] if self.ports else []
        return own + [(rid, (port,)) for rid, port in self.shared]

    @property
    def replicas(self) -> int:
        return len(self.ports) + len(self.shared)

    def as_json(self) -> dict[str, Any]:
        return {"ports": list(self.ports), "hosts": list(self.hosts), "rid": 0,
                **({"instances": [list(pair) for pair in self.shared]} if self.shared else {})}


def destination_pairs(size: int, slide: int, n_ops: int) -> list[tuple[int, int]]:
    """Every ``(newest operator w, active windows c)`` the data plane can reach.

    ``c`` is already clamped to ``N`` (with at least ``N`` active windows all
    operators are hit).  Slide ``q`` yields ``w = q mod N`` and
    ``c = min(q + 1, full + (p < extra))``; after ``max_windows`` slides the
    start-up is over and one more cycle of ``N`` slides covers every ``w``.
    """
    full, extra = windows_per_position(size, slide)
    counts = {full} | ({full + 1} if extra else set())
    cap = max_windows(size, slide)
    pairs: set[tuple[int, int]] = set()
    # c stops changing once q + 1 >= min(cap, N), so the slides up to there
    # plus one cycle of N cover every pair, however large cap is.
    for q in range(min(cap, n_ops) + n_ops):
        for per_pos in counts:
            c = min(q + 1, per_pos, n_ops)
            if c >= 1:
                pairs.add((q % n_ops, c))
    return sorted(pairs)


def stream_destination_pairs(s: Stream) -> list[tuple[int, int]]:
    """The ``(w, c)`` pairs stream ``s``'s packets can reach.  A batch goes to
    the operators of a range of windows that covers all of its events'
    windows (or, split by key, of its keys' operators): any ``c`` up to N,
    ending anywhere, so every pair.  A stream batched one event to a frame
    sends no batch, and needs only its events' pairs."""
    n_ops = len(s.operators)
    if s.sends_batches:
        return [(newest, active) for newest in range(n_ops) for active in range(1, n_ops + 1)]
    return event_destination_pairs(s)


def event_destination_pairs(s: Stream) -> list[tuple[int, int]]:
    """The ``(w, c)`` pairs a frame of one of stream ``s``'s events can reach."""
    n_ops = len(s.operators)
    if s.window.starts == EVENT:
        # Windows that start at events are not a grid: after a gap fewer of
        # them hold an event, so every count up to ceil(size/slide) ends anywhere.
        most = min(max_windows(s.window.size, s.window.slide), n_ops)
        return [(newest, active) for newest in range(n_ops) for active in range(1, most + 1)]
    return destination_pairs(s.window.size, s.window.slide, n_ops)


def event_backs(s: Stream) -> set[tuple[int, int]]:
    """``(w, back)`` of every copy a frame of one of ``s``'s events makes: its
    windows' operators stand 0 .. c - 1 back from the newest's.  Split by
    key, the one copy goes to the key's operator, whose index stands for w."""
    if s.split == "key":
        return {(newest, 0) for newest in range(len(s.operators))}
    return {(newest, back) for newest, active in event_destination_pairs(s) for back in range(active)}


def destination_set(operators: list[str], newest: int, active: int) -> list[str]:
    """The ``active`` operators whose windows end at ``operators[newest]``, oldest first."""
    n = len(operators)
    return [operators[(newest - i) % n] for i in range(active - 1, -1, -1)]


@dataclass
class OperatorSet:
    """One list of operators, and the entries that deal windows over it:
    unicast and operator_position per operator, multicast per ``(w, c)``
    pair some stream over it reaches, and operator_back per operator that
    owns a window of such a pair's events (``event_backs``).  Every stream
    with the same list, in either bank, shares them (operator_count names
    the set), so a thousand streams over one list cost two entries each; a
    change that brings a new list adds a set and never removes one another
    stream may use."""

    id: int
    operators: tuple[str, ...]
    #: unicast and operator_position, in operator order.
    entries: list[TableEntry] = field(default_factory=list)
    #: ``(w, c) -> `` its multicast entry.
    multicast: dict[tuple[int, int], TableEntry] = field(default_factory=dict)
    #: ``(w, back) -> `` the operator_back entry of the operator ``back`` windows behind ``w``.
    backs: dict[tuple[int, int], TableEntry] = field(default_factory=dict)
    groups: dict[int, MulticastGroup] = field(default_factory=dict)

    def all_entries(self) -> list[TableEntry]:
        return self.entries + list(self.multicast.values()) + list(self.backs.values())

    def entries_for(self, s: Stream) -> list[TableEntry]:
        """What stream ``s`` reaches of the set: every unicast and position, its
        pairs' multicast, and the operator_back entries of its events' pairs."""
        if s.split == "key" and not s.sends_batches:
            reached = list(self.entries)
        else:
            pairs = (self.multicast.get(pair) for pair in stream_destination_pairs(s))
            reached = self.entries + [e for e in pairs if e is not None]
        return reached + [self.backs[pair] for pair in sorted(event_backs(s))]

    def groups_for(self, entries: Iterable[TableEntry]) -> dict[int, MulticastGroup]:
        mgids = {e.params[0] for e in entries if e.action == "to_group"}
        return {mgid: g for mgid, g in self.groups.items() if mgid in mgids}


@dataclass
class StreamPlan:
    """One stream's own entries (window_spec and operator_count), and the operator set they name."""

    stream: Stream
    opset: OperatorSet
    entries: list[TableEntry] = field(default_factory=list)

    def all_entries(self) -> list[TableEntry]:
        """Everything the stream's events look up: its own entries and what it reaches of its set."""
        return self.entries + self.opset.entries_for(self.stream)

    @property
    def groups(self) -> dict[int, MulticastGroup]:
        return self.opset.groups_for(self.all_entries())

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for e in self.all_entries():
            out.setdefault(e.table, []).append(e.as_json())
        return out


@dataclass
class StreamChange:
    """What reconfiguring one stream installs before the change is armed: the
    new configuration in the bank not in force, the previous spec, and the
    handover table for events in old and new windows at once.  ``entries``
    include all the new configuration reaches of its operator set, which
    the switch may hold already for other streams (the controller adds
    only what it lacks)."""

    old: Stream
    new: Stream
    bank: int
    entries: list[TableEntry] = field(default_factory=list)
    groups: dict[int, MulticastGroup] = field(default_factory=dict)


def transition_tail(old: Stream, new: Stream) -> int:
    """How far past the boundary an in-order event must be before no event the
    stream still accepts can lie in a window of the old epoch: the old windows
    end at most ``size - slide`` past it, and a late event may lie the new
    lateness behind the newest one."""
    return max(0, old.window.size - old.window.slide) + new.window.lateness


class SplitterPlan:
    """Tables and multicast groups for every stream of a topology."""

    def __init__(self, topology: Topology, checked: bool = True):
        """``checked``: refuse a plan the switch could not hold (``PlanError``);
        sweeps that report what fits pass ``False``."""
        self.topology = topology
        self.ports = topology.switch_ports()
        self.addresses = plan_addresses(topology)
        #: Every operator instance a host can run, by name.
        self.instances = plan_instances(placement_order(topology), instance_counts(topology.hosts), self.ports,
                                        self.addresses, racked=topology.rack_of())
        self._group_ids: dict[tuple[int, ...], MulticastGroup] = {}
        #: Operator lists -> their sets, in the order streams brought them.
        self.opsets: dict[tuple[str, ...], OperatorSet] = {}
        self.streams: dict[int, StreamPlan] = {s.id: self._plan_stream(s) for s in topology.streams}
        receiving = set(topology.receiver_hosts())
        self.egress = [TableEntry(EGRESS_REWRITE, "rewrite_dst", self.egress_key(inst.name),
                                  (inst.mac, inst.ip, inst.id))
                       for inst in self.instances.values() if inst.host in receiving]
        if checked:
            self._check_capacity()

    def _check_capacity(self) -> None:
        """Refuse a plan the P4 program could not hold (its tables' sizes, 16-bit group ids)."""
        cost = self.cost()
        for table, size in TABLE_CAPACITY.items():
            if cost.get(table, 0) > size:
                raise PlanError(f"streams: the plan needs {cost[table]} entries in table {table}, "
                                f"which holds {size}")
        if cost["multicast_groups"] > MAX_GROUPS:
            raise PlanError(f"streams: the plan needs {cost['multicast_groups']} multicast groups; "
                            f"group ids are 16 bits ({MAX_GROUPS} groups)")

    # -- derivation ----------------------------------------------------
    def _group_for(self, operators: list[str]) -> MulticastGroup:
        """Groups are shared by every stream that replicates to the same instances."""
        members = [self.instances[op] for op in operators]
        ids = tuple(sorted(inst.id for inst in members))
        group = self._group_ids.get(ids)
        if group is None:
            whole = sorted((inst for inst in members if not inst.shared), key=lambda inst: inst.port)
            shared = sorted((inst for inst in members if inst.shared), key=lambda inst: inst.id)
            group = MulticastGroup(len(self._group_ids) + 1, tuple(inst.port for inst in whole),
                                   tuple(inst.name for inst in whole + shared),
                                   tuple((inst.id, inst.port) for inst in shared))
            self._group_ids[ids] = group
        return group

    def _to_one(self, table: str, match: tuple, operator: str, groups: dict[int, MulticastGroup]) -> TableEntry:
        """A copy for one operator: out of its port, or, for an instance on a
        shared host, through a group of its one node (its rid names the instance)."""
        inst = self.instances[operator]
        if not inst.shared:
            return TableEntry(table, "to_operator", match, (inst.port,))
        group = self._group_for([operator])
        groups[group.mgid] = group
        return TableEntry(table, "to_group", match, (group.mgid,))

    def egress_key(self, operator: str) -> tuple[int, int]:
        """What the egress tables key an operator instance's copies on: the
        port they leave on and their rid (``Instance.rid``)."""
        inst = self.instances[operator]
        return inst.port, inst.rid

    def _plan_stream(self, s: Stream) -> StreamPlan:
        """The stream's first configuration, in bank 0."""
        opset = self._opset_for(s)
        return StreamPlan(s, opset, self._bank_entries(s, 0, opset))

    def _opset_for(self, s: Stream) -> OperatorSet:
        """The set of ``s``'s operators, made or grown to hold the pairs ``s`` reaches."""
        key = tuple(s.operators)
        opset = self.opsets.get(key)
        if opset is None:
            opset = self.opsets[key] = OperatorSet(len(self.opsets) + 1, key)
            for i, op in enumerate(s.operators):
                opset.entries.append(self._to_one(UNICAST, (opset.id, i), op, opset.groups))
                opset.entries.append(TableEntry(OPERATOR_POSITION, "set_position",
                                                (opset.id, *self.egress_key(op)), (i,)))
        # The copies of an event: each of its windows' operators, so many
        # back from the newest (operator_back, egress.p4).
        for newest, back in event_backs(s):
            if (newest, back) not in opset.backs:
                op = s.operators[(newest - back) % len(s.operators)]
                inst = self.instances[op]
                match = (opset.id, newest, *self.egress_key(op))
                opset.backs[(newest, back)] = (
                    TableEntry(OPERATOR_BACK, "rewrite_back", match,
                               (inst.mac, inst.ip, inst.id, back * WINDOWS_BACK_UNIT)) if back else
                    TableEntry(OPERATOR_BACK, "rewrite_dst", match, (inst.mac, inst.ip, inst.id)))
        if s.split == "key" and not s.sends_batches:
            # Every event goes to one operator, the key's (unicast by its
            # index), with all of its windows: no groups.
            return opset
        for newest, active in stream_destination_pairs(s):
            if active < 2 or (newest, active) in opset.multicast:
                continue
            group = self._group_for(destination_set(s.operators, newest, active))
            opset.groups[group.mgid] = group
            opset.multicast[(newest, active)] = TableEntry(MULTICAST, "to_group", (opset.id, newest, active),
                                                           (group.mgid,))
        return opset

    def _bank_entries(self, s: Stream, bank: int, opset: OperatorSet) -> list[TableEntry]:
        """window_spec and operator_count of one configuration, naming its operator set."""
        w = s.window
        full, extra = windows_per_position(w.size, w.slide)
        # begun saturates that many slides later, so that a late event's
        # earlier slide still knows how many windows had begun there.
        cap = max_windows(w.size, w.slide) + late_slides(w.lateness, w.slide)
        n_ops = len(s.operators)
        if w.kind == "count":
            spec = TableEntry(WINDOW_SPEC, "set_count_window", (s.id, bank), (w.slide, full, extra, cap))
        elif w.starts == EVENT:
            fixed = 0 if w.origin is None else 1
            spec = TableEntry(WINDOW_SPEC, "set_event_time_window", (s.id, bank),
                              (w.slide, w.size, cap, fixed, w.origin or 0))
        else:
            fixed = 0 if w.origin is None else 1
            spec = TableEntry(WINDOW_SPEC, "set_time_window", (s.id, bank),
                              (w.slide, full, extra, cap, fixed, w.origin or 0, w.lateness))
        return [spec, TableEntry(OPERATOR_COUNT, SPLIT_ACTIONS[s.split], (s.id, bank), (n_ops, opset.id))]

    def change(self, old: Stream, new: Stream, bank: int) -> StreamChange:
        """Entries that prepare ``old`` to become ``new`` at its next window
        boundary, with ``new`` in ``bank``, the bank not in force."""
        old.check_change(new)
        change = StreamChange(old, new, bank)
        ow = old.window
        full, extra = windows_per_position(ow.size, ow.slide)
        n_old = len(old.operators)
        change.entries.append(TableEntry(PREVIOUS_SPEC, "set_previous", (old.id,),
                                         (ow.slide, full, extra, ow.size, n_old, transition_tail(old, new))))
        change.entries.extend(TableEntry(PREVIOUS_POSITION, "set_previous_position", (old.id, *self.egress_key(op)),
                                         (i,))
                              for i, op in enumerate(old.operators))
        opset = self._opset_for(new)
        change.entries.extend(self._bank_entries(new, bank, opset))
        reached = opset.entries_for(new)
        change.entries.extend(reached)
        change.groups.update(opset.groups_for(reached))
        if transition_tail(old, new) == 0 and not old.sends_batches:
            # The old windows end at the boundary and no event may come late past
            # it: the transition is over with the first event of the new epoch, no
            # event ever lies in an old window, and handover is never read.  Its
            # entries (N_old x old windows x new pairs) are what made a change at
            # N = 1,024 too big for the table.  A batch is another matter: one
            # that holds events from both sides of the boundary goes to the union
            # of their operators, through handover.
            return change
        # Old windows of an event in the transition: up to ceil(size/slide) of
        # them (a late event before the boundary), ending at any operator.
        # With new windows (w, c) too, the event goes to the union; with none
        # (c = 0: before the boundary, or in a gap of the new spec) to the old
        # windows alone.
        # A batch's old windows cover a range of any length up to N.
        old_counts = range(1, (n_old if old.sends_batches else min(max_windows(ow.size, ow.slide), n_old)) + 1)
        new_pairs = [(0, 0)] + stream_destination_pairs(new)
        for old_newest in range(n_old):
            for old_active in old_counts:
                old_set = destination_set(old.operators, old_newest, old_active)
                for newest, active in new_pairs:
                    new_set = destination_set(new.operators, newest, active) if active else []
                    hosts = list(dict.fromkeys(old_set + new_set))
                    match = (old.id, old_newest, old_active, newest, active)
                    if len(hosts) == 1:
                        change.entries.append(self._to_one(HANDOVER, match, hosts[0], change.groups))
                        continue
                    group = self._group_for(hosts)
                    change.groups[group.mgid] = group
                    change.entries.append(TableEntry(HANDOVER, "to_group", match, (group.mgid,)))
        return change

    # -- views ---------------------------------------------------------
    @property
    def groups(self) -> list[MulticastGroup]:
        return sorted(self._group_ids.values(), key=lambda g: g.mgid)

    def entries(self) -> list[TableEntry]:
        out: list[TableEntry] = []
        for sp in self.streams.values():
            out.extend(sp.entries)
        for opset in self.opsets.values():
            out.extend(opset.all_entries())
        out.extend(self.egress)
        return out

    def host_of_port(self) -> dict[int, str]:
        """``port -> the host on it``, or the rack whose bridge is on it."""
        rack_of = self.topology.rack_of()
        return {p: rack_of.get(h, h) for h, p in self.ports.items()}

    def operator_of_id(self) -> dict[int, str]:
        """``instance id -> operator instance`` (a whole host's id is its port)."""
        return {inst.id: name for name, inst in self.instances.items()}

    def cost(self) -> dict[str, int]:
        """What installing the plan takes, in entries and groups."""
        counts: dict[str, int] = {}
        for e in self.entries():
            counts[e.table] = counts.get(e.table, 0) + 1
        counts["multicast_groups"] = len(self._group_ids)
        counts["multicast_ports"] = sum(g.replicas for g in self._group_ids.values())
        counts["multicast_nodes"] = sum(len(g.nodes) for g in self._group_ids.values())
        return counts


def load_planned(path: Path) -> tuple[Topology, SplitterPlan]:
    """A topology file, validated, and its plan: everything ``testbed`` checks before it
    starts anything.  Every failure is a one-line ``TopologyError`` naming the file."""
    topo = load_topology(path)
    try:
        return topo, SplitterPlan(topo)
    except PlanError as err:
        raise TopologyError(f"{path}: {err}") from None


def stream_plan_json(plan: SplitterPlan, stream_id: int,
                     events: Optional[Iterable[dict[str, Any]]] = None) -> dict[str, Any]:
    sp = plan.streams[stream_id]
    s = sp.stream
    out: dict[str, Any] = {
        "window": s.window.as_json(),
        "operators": list(s.operators),
        "source": s.source,
    }
    if events is not None:
        out["events"] = list(events)
    out["tables"] = sp.tables()
    out["multicast_groups"] = {str(g.mgid): g.as_json() for g in sorted(sp.groups.values(), key=lambda g: g.mgid)}
    return out
