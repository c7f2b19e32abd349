"""The data-plane contract: what the P4 program and the embedded model share.

This module mirrors ``p4/constants.p4``: the tables with their keys and
action parameters, the registers and counters with their sizes, the drop
codes, and the control methods every target serves.  The embedded model,
the controller and both targets' clients import it; nothing here knows how
a target implements the contract.  ``tests/unit/test_p4_contract.py`` holds
it against the P4 source on every machine (``testbed.dataplane.p4source``)
and against the compiled program wherever p4c exists.

It also holds the value codecs (MAC, IPv4, integers) that turn the control
plane's text into the integers a table or register stores.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Protocol, Sequence

# Port space, stream ids and table sizes are declared with the limits they set;
# the contract names them again for its readers.
from testbed.semantics.cep.automaton import MAX_COMPARISONS
from testbed.semantics.cep.lastn import MAX_CEP_WINDOW
from testbed.semantics.cep.rules import MAX_CEP_WINDOWS, MAX_PATTERNS
from testbed.semantics.limits import DROP_PORT, N_INSTANCES, N_PORTS, N_STREAMS, TABLE_SIZES, WINDOWS_BACK_UNIT  # noqa: F401
from testbed.semantics.plan import TRANSITION
from testbed.semantics.windows import BEFORE_ORIGIN, MAX_LATE_SLIDES, NO_WINDOW, TOO_LATE

DROP_SLOTS = 8            # drop counter index = stream * DROP_SLOTS + code
U64 = (1 << 64) - 1

#: A frame whose stream has no configuration: a data-plane reason only, the
#: window semantics never send an event there.
UNKNOWN_STREAM = "unknown_stream"
#: Drop reason -> code of ``DROP_*`` in p4/constants.p4.
DROP_CODES = {NO_WINDOW: 1, BEFORE_ORIGIN: 2, TOO_LATE: 3, UNKNOWN_STREAM: 4}
DROP_NAMES = {v: k for k, v in DROP_CODES.items()}

#: How many slides back a late event may lie: the P4 program unrolls as many
#: compare-and-subtract steps (``LATE_STEPS`` in p4/constants.p4).
LATE_STEPS = MAX_LATE_SLIDES

#: Register name -> bit width (all sized N_STREAMS).
REGISTERS = {
    "initialized": 1,
    "event_count": 64,    # count windows: arrival index of the next event
    "last_ts": 64,        # time windows: newest accepted timestamp
    "slide_start": 64,    # axis coordinate where the newest slide starts
    "newest_op": 32,      # operator index of the newest window (q mod N)
    "begun": 32,          # windows begun so far, saturating at the cap (ceil(size/slide) + late slides)
    "newest_window": 64,  # global id of the newest window (the one starting at slide_start)
    "next_start": 64,     # where the slide after the newest one starts: an armed change's boundary
    "time_axis": 1,       # set by the first event: 1 for time windows (the boundary test runs before window_spec)
    # reconfiguration (docs/p4.md, "Reconfiguration")
    "epoch": 32,          # configurations begun after the first; its low bit is the bank in force
    "armed": 1,           # the control plane installed the other bank: flip at the next boundary
    "in_transition": 1,   # windows of the previous epoch may still hold events
    "boundary": 64,       # where the epoch in force began
    "transition_end": 64, # from this in-order coordinate on no event can lie in a previous window
    "old_start": 64,      # the previous epoch's newest slide, frozen at the boundary
    "old_newest": 32,     # ... its newest window's operator
    "old_begun": 32,      # ... and how many of its windows had begun
    "old_window": 64,     # ... and its newest window's global id
    # windows that start at events (docs/windows.md, "Where windows start"):
    # the starts of the windows before the newest, which slide_start holds
    "start_back1": 64,
    "start_back2": 64,
    "start_back3": 64,
}

#: The build without changes (p4/splitter_fixed.p4) keeps a count stream's
#: window state in a cell of this register and in newest_window, and writes
#: no other register for it (p4/counts.p4): the events of its newest slide
#: so far and the newest window's operator, packed as
#: ``testbed.dataplane.model.counts.CountCell``.  The model keeps it beside
#: the plain build's registers.
COUNT_STATE = "count_state"
FIXED_REGISTERS = {COUNT_STATE: 64}

#: The registers a stream of each window kind reads and writes: one cell of
#: each, at the stream's id.  The program declares all of them for every
#: stream id, so one compiled program serves both kinds (S4 compiles one
#: program per semantic and declares only what that semantic needs).
REGISTERS_USED = {
    "count": ("initialized", "event_count", "slide_start", "newest_op", "begun"),
    "time": ("initialized", "last_ts", "slide_start", "newest_op", "begun"),
}
#: What changing a stream's configuration at run time costs on top, per
#: stream of either kind (S4 and P4SS have no such state: they cannot change
#: a stream once it runs without losing its windows).
RECONFIG_REGISTERS = ("next_start", "time_axis", "epoch", "armed", "in_transition", "boundary",
                      "transition_end", "old_start", "old_newest", "old_begun", "old_window")
#: What telling each operator its windows costs (the Windows header,
#: docs/wire.md), per stream, counted apart for the same reason: S4's
#: operators compute their windows themselves.
HEADER_REGISTERS = ("newest_window",)
#: What ``starts: event`` costs on top of a time stream: the starts of the
#: older windows that may still hold an event, which the grid computes.
EVENT_START_REGISTERS = ("start_back1", "start_back2", "start_back3")
HEADER_TABLES = ("operator_position", "previous_position", "operator_back")

#: Counter name -> size.
COUNTERS = {
    "stream_in": N_STREAMS,                 # events accepted into the pipeline, per stream
    "stream_out": N_STREAMS,                # copies sent to operators, per stream
    "operator_out": N_INSTANCES,            # copies sent, per operator instance (a whole host's is its port)
    "stream_drops": N_STREAMS * DROP_SLOTS, # per stream and drop code
    "non_event": 1,                         # frames that are not events (nor heartbeats)
    "heartbeats": N_PORTS,                  # operator hosts' heartbeats, per ingress port
}


class Key(NamedTuple):
    """A match key field: its ``@name`` in the program and its width in bits."""

    name: str
    width: int


class Param(NamedTuple):
    """An action parameter: name, how text is read (int/mac/ip, see ``to_int``), width in bits."""

    name: str
    kind: str
    width: int


@dataclass(frozen=True)
class ActionSpec:
    params: tuple[Param, ...]


@dataclass(frozen=True)
class TableSpec:
    """A table as ``p4/`` declares it; ``control`` is the P4 control that
    applies it, which qualifies its name and its actions' names in bmv2."""

    control: str
    keys: tuple[Key, ...]
    actions: dict[str, ActionSpec]

    def qualified(self, name: str) -> str:
        """``window_spec`` -> ``MyIngress.window_spec`` (tables and actions alike)."""
        return f"{self.control}.{name}"


INGRESS, EGRESS = "MyIngress", "MyEgress"
STREAM_KEY = Key("stream", 16)
PORT_BITS = 9     # v1model's port_t

BANK_KEY = Key("bank", 1)
OP_KEY = Key("newest_op", 32)
ACTIVE_KEY = Key("active", 32)
EGRESS_PORT_KEY = Key("port", PORT_BITS)
RID_KEY = Key("rid", 16)
OPSET_KEY = Key("opset", 32)
TO_OPERATOR = ActionSpec((Param("port", "int", PORT_BITS),))
#: A copy's destination, and the operator instance that operator_out counts it for.
REWRITE_DST = ActionSpec((Param("mac", "mac", 48), Param("ip", "ip", 32), Param("instance", "int", 32)))
TO_GROUP = ActionSpec((Param("mgid", "int", 16),))

#: Tables keyed by ``bank`` hold two configurations per stream: the one in
#: force and the one a change installs beside it.  The data plane picks the
#: bank from the stream's ``epoch`` register, and flips it itself at the
#: boundary of an armed change (docs/p4.md, "Reconfiguration").
SCHEMA: dict[str, TableSpec] = {
    "window_spec": TableSpec(INGRESS, (STREAM_KEY, BANK_KEY), {
        "set_count_window": ActionSpec((Param("slide", "int", 64), Param("full", "int", 32),
                                        Param("extra", "int", 64), Param("cap", "int", 32))),
        "set_time_window": ActionSpec((Param("slide", "int", 64), Param("full", "int", 32),
                                       Param("extra", "int", 64), Param("cap", "int", 32),
                                       Param("fixed_origin", "int", 8), Param("origin", "int", 64),
                                       Param("lateness", "int", 64))),
        # starts: event takes no lateness, and needs the size itself: the
        # windows' starts are not a grid that full and extra describe.
        "set_event_time_window": ActionSpec((Param("slide", "int", 64), Param("size", "int", 64),
                                             Param("cap", "int", 32), Param("fixed_origin", "int", 8),
                                             Param("origin", "int", 64))),
    }),
    # N, and how the stream is split: round robin over windows
    # (set_operator_count) or one operator per key (split_by_key).
    # Its operator set too: the list the windows are dealt over, which the
    # tables below key on, so that streams with the same operators share them.
    "operator_count": TableSpec(INGRESS, (STREAM_KEY, BANK_KEY),
                                {"set_operator_count": ActionSpec((Param("n", "int", 32), Param("opset", "int", 32))),
                                 "split_by_key": ActionSpec((Param("n", "int", 32), Param("opset", "int", 32)))}),
    "previous_spec": TableSpec(INGRESS, (STREAM_KEY,), {
        "set_previous": ActionSpec((Param("slide", "int", 64), Param("full", "int", 32),
                                    Param("extra", "int", 64), Param("size", "int", 64),
                                    Param("n_ops", "int", 32), Param("tail", "int", 64))),
    }),
    # One operator: out of its port, or through its own group (an instance on a shared host).
    "unicast": TableSpec(INGRESS, (OPSET_KEY, OP_KEY), {"to_operator": TO_OPERATOR, "to_group": TO_GROUP}),
    "multicast": TableSpec(INGRESS, (OPSET_KEY, OP_KEY, ACTIVE_KEY), {"to_group": TO_GROUP}),
    "handover": TableSpec(INGRESS, (STREAM_KEY, Key("old_op", 32), Key("old_active", 32), OP_KEY, ACTIVE_KEY),
                            {"to_operator": TO_OPERATOR, "to_group": TO_GROUP}),
    # Egress keys on where the copy leaves and its replica's rid: 0 for unicast
    # and whole hosts' nodes, the instance's id for an instance on a shared
    # port (testbed.semantics.instances).  The action names the instance,
    # which operator_out counts.
    "egress_rewrite": TableSpec(EGRESS, (EGRESS_PORT_KEY, RID_KEY), {"rewrite_dst": REWRITE_DST}),
    # Where the copy's operator instance stands in the operator set: which of
    # the event's windows its copy carries (the Windows header).
    "operator_position": TableSpec(EGRESS, (OPSET_KEY, EGRESS_PORT_KEY, RID_KEY),
                                   {"set_position": ActionSpec((Param("position", "int", 32),))}),
    "previous_position": TableSpec(EGRESS, (STREAM_KEY, EGRESS_PORT_KEY, RID_KEY),
                                   {"set_previous_position": ActionSpec((Param("position", "int", 32),))}),
    # The build without changes addresses every copy and moves its Windows
    # header back in one table, keyed on the (operator set, newest operator)
    # that chose its port or group too: each entry knows how far back its
    # operator's windows lie, 0 (rewrite_dst) or back * WINDOWS_BACK_UNIT.
    "operator_back": TableSpec(EGRESS, (OPSET_KEY, OP_KEY, EGRESS_PORT_KEY, RID_KEY),
                               {"rewrite_dst": REWRITE_DST,
                                "rewrite_back": ActionSpec((*REWRITE_DST.params,
                                                            Param("windows_back", "int", 128)))}),
}
#: The egress tables only bmv2's build without changes holds, and those it
#: leaves out besides the transition's (the model holds every table).
FIXED_ONLY = ("operator_back",)
NOT_FIXED = ("egress_rewrite", "operator_position")


def build_tables(program: Optional[str]) -> frozenset[str]:
    """The contract's splitter tables a build holds (the build without
    changes lacks the transition's, ``TRANSITION``), by its compiled program's
    name (``run.json``'s ``versions.p4_program``, such as
    ``splitter_fixed.json``); None for the model, which holds every table."""
    if program is None:
        return frozenset(SCHEMA)
    if program.split(".")[0] == "splitter_fixed":
        return frozenset(SCHEMA) - set(TRANSITION) - set(NOT_FIXED)
    return frozenset(SCHEMA) - set(FIXED_ONLY)


def build_registers(program: Optional[str], kind: str) -> tuple[str, ...]:
    """The splitter registers a build writes for a stream of window kind
    ``kind`` (``"count"`` or ``"time"``), by its compiled program's name as
    ``build_tables`` takes it; None for the model, which writes all of them."""
    if program is None:
        return (*REGISTERS, *FIXED_REGISTERS)
    if program.split(".")[0] == "splitter_fixed":
        return (COUNT_STATE, "newest_window") if kind == "count" else tuple(REGISTERS)
    return tuple(REGISTERS)


#: The action a table runs on a miss (``const default_action`` in ``p4/``).
DEFAULT_ACTION = "NoAction"

# ---------------------------------------------------------------------------
# The CEP stage (p4/cep.p4, built only into p4/splitter_cep.p4; docs/cep.md)
# ---------------------------------------------------------------------------
#: Slots, the ring buffers' depth and comparisons per pattern, as the program declares them.
CEP_WINDOWS, CEP_DEPTH, CEP_PATTERNS, CEP_COMPARISONS = MAX_CEP_WINDOWS, MAX_CEP_WINDOW, MAX_PATTERNS, MAX_COMPARISONS
#: A pattern slot's comparison c lives in cell slot * CEP_COMPARISONS + c.
CEP_COMPARISON_CELLS = CEP_PATTERNS * CEP_COMPARISONS
#: The mirror session whose clones carry complex events to the sinks' multicast group.
CEP_SESSION = 250
#: Encodings of a window's field, a comparison's operand and its operator (``CEP_FIELD_*`` ...).
CEP_FIELD_CODES = {"value": 1, "key": 2, "ts": 3, "seq": 4}
CEP_OPERAND_CODES = {"value": 1, "key": 2, "ts": 3, "seq": 4, "sum": 5, "min": 6, "max": 7, "count": 8,
                     "count_if": 9}
CEP_OP_CODES = {"<": 1, "<=": 2, "==": 3, "!=": 4, ">=": 5, ">": 6}
#: Register name -> (bit width, cells): configuration written by the control
#: plane (testbed.dataplane.cep) and the stage's state.
CEP_REGISTERS = {
    "cep_window_stream": (16, CEP_WINDOWS), "cep_window_size": (8, CEP_WINDOWS),
    "cep_window_field": (8, CEP_WINDOWS), "cep_window_test": (8, CEP_WINDOWS),
    "cep_window_constant": (64, CEP_WINDOWS), "cep_ring": (64, CEP_WINDOWS * CEP_DEPTH),
    "cep_head": (8, CEP_WINDOWS), "cep_fill": (8, CEP_WINDOWS), "cep_sum": (64, CEP_WINDOWS),
    "cep_min": (64, CEP_WINDOWS), "cep_max": (64, CEP_WINDOWS), "cep_passing": (8, CEP_WINDOWS),
    "cep_pattern_on": (1, CEP_PATTERNS), "cep_pattern_id": (16, CEP_PATTERNS),
    "cep_pattern_stream": (16, CEP_PATTERNS), "cep_return_operand": (8, CEP_PATTERNS),
    "cep_return_window": (32, CEP_PATTERNS),
    "cep_compare_operand": (8, CEP_COMPARISON_CELLS), "cep_compare_window": (32, CEP_COMPARISON_CELLS),
    "cep_compare_op": (8, CEP_COMPARISON_CELLS), "cep_compare_constant": (64, CEP_COMPARISON_CELLS),
    "cep_state": (8, CEP_PATTERNS), "cep_matches": (32, CEP_PATTERNS), "cep_sinks": (8, N_PORTS),
}
#: The state the stage keeps per window slot and per pattern slot (reset when a slot is reused).
CEP_WINDOW_STATE = ("cep_head", "cep_fill", "cep_sum", "cep_min", "cep_max", "cep_passing")
CEP_COUNTERS = {"cep_out": N_PORTS}       # complex events sent, per sink port
#: One transition table per pattern slot: (state, symbol) -> (next state, whether it completes a match).
CEP_SCHEMA: dict[str, TableSpec] = {
    f"cep_transition_{slot}": TableSpec(INGRESS, (Key("state", 8), Key("symbol", 8)), {
        "cep_next": ActionSpec((Param("next_state", "int", 8), Param("completes", "int", 1)))})
    for slot in range(CEP_PATTERNS)}
CEP_TABLE_SIZE = 8192
#: A signed value with this bit flipped orders as an unsigned one (``CEP_SIGN`` in p4/constants.p4).
CEP_SIGN = 1 << 63
#: Every table, register (name -> bit width) and counter (name -> cells) a target may hold:
#: the splitter's, and the CEP stage's in a CEP build.
ALL_TABLES = SCHEMA | CEP_SCHEMA
ALL_REGISTER_WIDTHS = REGISTERS | FIXED_REGISTERS | {name: bits for name, (bits, _cells) in CEP_REGISTERS.items()}
ALL_COUNTERS = COUNTERS | CEP_COUNTERS



class SwitchAPI(Protocol):
    """The control API every target serves, with p4-utils' method names.

    The embedded model implements it directly, the embedded switch serves it
    over its control port (refusing any other name), and ``Bmv2API`` maps it
    onto bmv2's Thrift services.  Values may be ints or text (see ``to_int``).
    """

    def table_add(self, table: str, action: str, match_keys: Sequence[Any],
                  action_params: Sequence[Any] = ()) -> int: ...
    def table_add_many(self, entries: Sequence[Sequence[Any]]) -> list[int]:
        """``table_add`` of each ``(table, action, match_keys, action_params)``, in order, as one
        exchange where the target allows (a plan of 600,000 entries is minutes one by one);
        every entry before a refused one is added, and the refusal raises as ``table_add``'s."""
    def table_delete(self, table: str, handle: int) -> None: ...
    def table_clear(self, table: str) -> None: ...
    def table_entries(self, table: str) -> list[dict[str, Any]]:
        """``[{"handle", "match": [ints], "action": short name, "params": [ints]}]``, sorted by match;
        handles count from 0 per table, as bmv2 numbers them."""
    def mc_mgrp_create(self, mgid: int) -> Any: ...
    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int: ...
    def mc_node_associate(self, mgid: int, handle: int) -> None: ...
    def mc_mgrp_create_many(self, groups: Sequence[Sequence[Any]]) -> list[list[int]]:
        """``mc_mgrp_create`` of each ``(mgid, [(rid, ports), ...])``, each node created and associated,
        as one exchange where the target allows (a thousand sliding instances are 8,000 calls);
        returns each group's node handles, in order.  A refusal raises as the single call's."""
    def mc_node_destroy(self, handle: int) -> None:
        """Remove a node, dissociating it from its group first (as bmv2 does)."""
    def mc_mgrp_destroy(self, mgid: int) -> None:
        """Remove a group; destroy its nodes before, or they stay behind."""
    def mc_dump(self) -> dict[int, list[dict[str, Any]]]:
        """``mgid -> [{"handle": node handle, "rid", "ports": sorted}]``, groups in id order."""
    def mirroring_add_mc(self, session: int, mgid: int) -> None:
        """Clones to mirror session ``session`` go to multicast group ``mgid`` (simple_switch_CLI's name)."""
    def register_read(self, name: str, index: Optional[int] = None) -> Any: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def register_reset(self, name: str) -> None: ...
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...
    def counter_reset(self, name: str) -> None: ...
    def takes_changes(self) -> bool:
        """Whether the data plane changes a stream mid-stream (``Controller.change``):
        bmv2's build for a run without changes has no transition tables."""
    def held_tables(self) -> list[str]:
        """The contract's tables this switch's build holds, which the control
        plane fills (bmv2's builds each lack some: ``FIXED_ONLY``, ``NOT_FIXED``)."""


#: The method names of ``SwitchAPI``, in declaration order.
CONTROL_METHODS = tuple(name for name in vars(SwitchAPI) if not name.startswith("_")
                        and callable(vars(SwitchAPI)[name]))


def drop_counter_index(stream: int, reason: str) -> int:
    """Cell of ``stream_drops`` that counts ``reason`` for ``stream``."""
    return stream * DROP_SLOTS + DROP_CODES[reason]


def param_bits(table: str, action: str, param: str) -> int:
    """Width in bits of one action parameter, as ``p4/`` declares it."""
    return next(p.width for p in SCHEMA[table].actions[action].params if p.name == param)


def param_kinds(table: str, action: str) -> Optional[list[str]]:
    """Kinds (int/mac/ip) of an action's parameters, or ``None`` if not in the schema."""
    spec = ALL_TABLES.get(table)
    if spec is None or action not in spec.actions:
        return None
    return [p.kind for p in spec.actions[action].params]


# ---------------------------------------------------------------------------
# value codecs
# ---------------------------------------------------------------------------
def mac_to_bytes(mac: str) -> bytes:
    octets = mac.split(":")
    if len(octets) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return bytes(int(o, 16) for o in octets)


def ip_to_bytes(ip: str) -> bytes:
    return ipaddress.IPv4Address(ip).packed


def to_int(value: Any, kind: Optional[str] = "int") -> int:
    """A table value as an integer: ints, ``"0x1f"``, ``"aa:bb:cc:dd:ee:ff"``, ``"10.0.0.2"``.

    ``kind`` (int/mac/ip) says how to read text; ``None`` guesses from its shape.
    """
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if kind == "mac" or (kind is None and text.count(":") == 5):
        return int.from_bytes(mac_to_bytes(text), "big")
    if kind == "ip" or (kind is None and text.count(".") == 3):
        return int(ipaddress.IPv4Address(text))
    return int(text, 0)


def to_bytes(value: int, bitwidth: int, what: str) -> bytes:
    """``value`` big-endian in the bytes a ``bitwidth``-bit field takes; refuse what does not fit."""
    if value < 0 or value >> bitwidth:
        raise ValueError(f"{what}: {value} does not fit in {bitwidth} bits")
    return value.to_bytes((bitwidth + 7) // 8, "big")
