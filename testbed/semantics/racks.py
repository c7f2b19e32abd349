"""Racks: hosts behind an ordinary L2 switch, one splitter port for all of them.

A topology without ``racks:`` gives each host its own port, numbered 1.. in
``hosts`` order.  A rack takes the next port where its first host comes, and
all its hosts share it; so the splitter cannot tell them apart by port, and
reaches each as it reaches a shared host's instance (``instances``).  These
are the port numbers the plan, the network and the accounting all use.
"""
from __future__ import annotations

from typing import Iterable, Mapping


def switch_ports(hosts: Iterable[str], rack_of: Mapping[str, str]) -> dict[str, int]:
    """``host -> splitter port`` of ``hosts`` (in order), ``rack_of`` giving each racked host's rack."""
    out: dict[str, int] = {}
    rack_port: dict[str, int] = {}
    next_port = 1
    for host in hosts:
        rack = rack_of.get(host)
        if rack is not None and rack in rack_port:
            out[host] = rack_port[rack]
            continue
        out[host] = next_port
        if rack is not None:
            rack_port[rack] = next_port
        next_port += 1
    return out
