"""The run-time configuration of ``p4/baseline/splitter_floor.p4``, and what the oracle says it must send.

The floor keeps two values: events seen in the current slide, and a state.
Its one table, ``floor_split``, maps the state to where the event goes
(one port, or a multicast group), the state after the slide, and the
slide's length.  Only count windows whose size is a whole number of slides
fit: then an event's windows depend on its slide alone, so the state can
stand for the set of operators that hold the slide.

A stream's first ``size / slide - 1`` slides are held by fewer windows than
the rest (window ids start at 0, docs/windows.md), so each has a state of
its own, ``j`` for slide ``j``; the registers start at 0, so the lead-in
comes first.  After it, a ring of N states, ``lead-in + (j mod N)``: the
newest window's operator.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from testbed.semantics.windows import CountWindows, StreamOracle

#: The table and its actions, as the program names them.
TABLE, UNICAST, MULTICAST = "floor_split", "to_operator", "to_operators"


class FloorConfig(NamedTuple):
    """``floor_split``'s entries, ``(state, action, [port or group, next state, slide])``,
    and the multicast groups the multicast ones send to (group id -> ports)."""

    entries: list[tuple[int, str, list[int]]]
    groups: dict[int, list[int]]


def floor_config(size: int, slide: int, ports: Sequence[int]) -> FloorConfig:
    """The floor's configuration for count windows of ``size`` and ``slide``
    round robin over the operators at ``ports`` (window ``j`` to ``ports[j % N]``)."""
    n = len(ports)
    if size % slide or not ports:
        raise ValueError(f"the splitter's floor takes count windows whose size is a multiple of the slide, "
                         f"over at least one operator; got size {size}, slide {slide}, {n} operators")
    per_event = size // slide                   # windows that hold a slide once the lead-in is over
    lead_in = per_event - 1
    if n + lead_in > 256:
        raise ValueError(f"{n} operators and {lead_in} lead-in slides exceed the floor's 256 states")

    def state_of(slide_index: int) -> int:
        return slide_index if slide_index < lead_in else lead_in + slide_index % n

    entries: list[tuple[int, str, list[int]]] = []
    groups: dict[int, list[int]] = {}
    # Each state once, by the first slide that reaches it: the lead-in, then one turn of the ring.
    for slide_index in range(lead_in + n):
        state = state_of(slide_index)
        held_by = range(max(0, slide_index - per_event + 1), slide_index + 1)
        targets = sorted({ports[window % n] for window in held_by})
        following = state_of(slide_index + 1)
        if len(targets) == 1:
            entries.append((state, UNICAST, [targets[0], following, slide]))
        else:
            group = state + 1                   # bmv2's group 0 is no group
            groups[group] = targets
            entries.append((state, MULTICAST, [group, following, slide]))
    return FloorConfig(entries, groups)


def install_floor(api: Any, config: FloorConfig) -> None:
    """Write ``config`` into a switch running the floor (bmv2's control client)."""
    for group, ports in sorted(config.groups.items()):
        api.mc_mgrp_create(group)
        api.mc_node_associate(group, api.mc_node_create(0, ports))
    for state, action, params in config.entries:
        api.table_add(TABLE, action, [state], params)


def oracle_deliveries(size: int, slide: int, ports: Sequence[int], events: int) -> set[tuple[int, int]]:
    """``(seq, port)`` of every copy the oracle says events ``0 .. events-1`` of a
    count stream make, window ``j`` to ``ports[j % N]``."""
    names = [str(port) for port in ports]
    oracle = StreamOracle(CountWindows(size, slide), names)
    return {(seq, int(name)) for seq in range(events) for name in oracle.step(seq, seq).operators}
