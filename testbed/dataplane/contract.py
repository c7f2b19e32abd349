"""The data-plane contract: what the P4 program and the embedded model share.

This module mirrors ``p4/constants.p4``: the tables with their keys and
action parameters, the registers and counters with their sizes, the drop
codes, and the control methods every target serves.  The embedded model,
the controller and both targets' clients import it; nothing here knows how
a target implements the contract.  ``tests/integration/test_bmv2.py`` holds
it against the compiled program wherever p4c exists.

It also holds the value codecs (MAC, IPv4, integers) that turn the control
plane's text into the integers a table or register stores.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence

from testbed.semantics.windows import BEFORE_ORIGIN, NO_WINDOW, OUT_OF_ORDER

N_STREAMS = 1 << 16       # registers are indexed by the 16-bit stream id
N_PORTS = 512             # bmv2's default port space
DROP_SLOTS = 8            # drop counter index = stream * DROP_SLOTS + code
U64 = (1 << 64) - 1

#: A frame whose stream has no configuration: a data-plane reason only, the
#: window semantics never send an event there.
UNKNOWN_STREAM = "unknown_stream"
#: Drop reason -> code of ``DROP_*`` in p4/constants.p4.
DROP_CODES = {NO_WINDOW: 1, BEFORE_ORIGIN: 2, OUT_OF_ORDER: 3, UNKNOWN_STREAM: 4}
DROP_NAMES = {v: k for k, v in DROP_CODES.items()}

#: Register name -> bit width (all sized N_STREAMS).
REGISTERS = {
    "initialized": 1,
    "event_count": 64,    # count windows: arrival index of the next event
    "last_ts": 64,        # time windows: latest accepted timestamp
    "slide_start": 64,    # axis coordinate where the newest slide starts
    "newest_op": 32,      # operator index of the newest window (q mod N)
    "begun": 32,          # windows begun so far, saturating at the cap
}

#: Counter name -> size.
COUNTERS = {
    "stream_in": N_STREAMS,                 # events accepted into the pipeline, per stream
    "stream_out": N_STREAMS,                # copies sent to operators, per stream
    "operator_out": N_PORTS,                # copies sent, per egress port (= operator host)
    "stream_drops": N_STREAMS * DROP_SLOTS, # per stream and drop code
    "non_event": 1,                         # frames that are not events
}


@dataclass(frozen=True)
class ActionSpec:
    params: tuple[tuple[str, str], ...]   # (name, kind) with kind in int/mac/ip
    bits: tuple[int, ...] = ()            # width of each parameter in p4/, in the same order


@dataclass(frozen=True)
class TableSpec:
    keys: tuple[str, ...]
    actions: dict[str, ActionSpec]
    key_bits: tuple[int, ...] = ()        # width of each key field in p4/


SCHEMA: dict[str, TableSpec] = {
    "window_spec": TableSpec(("stream",), key_bits=(16,), actions={
        "set_count_window": ActionSpec((("slide", "int"), ("full", "int"), ("extra", "int"), ("cap", "int")),
                                       (64, 32, 64, 32)),
        "set_time_window": ActionSpec((("slide", "int"), ("full", "int"), ("extra", "int"), ("cap", "int"),
                                       ("fixed_origin", "int"), ("origin", "int")), (64, 32, 64, 32, 8, 64)),
    }),
    "operator_count": TableSpec(("stream",), key_bits=(16,),
                                actions={"set_operator_count": ActionSpec((("n", "int"),), (32,))}),
    "unicast": TableSpec(("stream", "newest_op"), key_bits=(16, 32),
                         actions={"to_operator": ActionSpec((("port", "int"),), (9,))}),
    "multicast": TableSpec(("stream", "newest_op", "active"), key_bits=(16, 32, 32),
                           actions={"to_group": ActionSpec((("mgid", "int"),), (16,))}),
    "egress_rewrite": TableSpec(("port",), key_bits=(9,),
                                actions={"rewrite_dst": ActionSpec((("mac", "mac"), ("ip", "ip")), (48, 32))}),
}

#: Entries each table holds (``*_TABLE_SIZE`` in p4/constants.p4).
TABLE_SIZES = {"window_spec": N_STREAMS, "operator_count": N_STREAMS, "unicast": 65536,
               "multicast": 65536, "egress_rewrite": N_PORTS}
#: v1model drops what is sent to this port; the hosts use ports 1 .. DROP_PORT - 1.
DROP_PORT = N_PORTS - 1

class SwitchAPI(Protocol):
    """The control API every target serves, with p4-utils' method names.

    The embedded model implements it directly, the embedded switch serves it
    over its control port (refusing any other name), and ``Bmv2API`` maps it
    onto bmv2's Thrift services.  Values may be ints or text (see ``to_int``).
    """

    def table_add(self, table: str, action: str, match_keys: Sequence[Any],
                  action_params: Sequence[Any] = ()) -> int: ...
    def table_delete(self, table: str, handle: int) -> None: ...
    def table_clear(self, table: str) -> None: ...
    def table_entries(self, table: str) -> list[dict[str, Any]]: ...
    def mc_mgrp_create(self, mgid: int) -> Any: ...
    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int: ...
    def mc_node_associate(self, mgid: int, handle: int) -> None: ...
    def mc_dump(self) -> dict[int, list[tuple[int, list[int]]]]: ...
    def register_read(self, name: str, index: Optional[int] = None) -> Any: ...
    def register_write(self, name: str, index: int, value: int) -> None: ...
    def register_reset(self, name: str) -> None: ...
    def counter_read(self, name: str, index: int) -> tuple[int, int]: ...
    def counter_reset(self, name: str) -> None: ...


#: The method names of ``SwitchAPI``, in declaration order.
CONTROL_METHODS = tuple(name for name in vars(SwitchAPI) if not name.startswith("_")
                        and callable(vars(SwitchAPI)[name]))


def drop_counter_index(stream: int, reason: str) -> int:
    """Cell of ``stream_drops`` that counts ``reason`` for ``stream``."""
    return stream * DROP_SLOTS + DROP_CODES[reason]


def param_bits(table: str, action: str, param: str) -> int:
    """Width in bits of one action parameter, as ``p4/`` declares it."""
    spec = SCHEMA[table].actions[action]
    return dict(zip((name for name, _ in spec.params), spec.bits))[param]


def param_kinds(table: str, action: str) -> Optional[list[str]]:
    """Kinds (int/mac/ip) of an action's parameters, or ``None`` if not in the schema."""
    spec = SCHEMA.get(table)
    if spec is None or action not in spec.actions:
        return None
    return [kind for _, kind in spec.actions[action].params]


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
