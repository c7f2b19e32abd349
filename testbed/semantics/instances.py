"""Operator instances: many on one host, each reached by an address of its own.

In S4 an operator instance is a process on a server, and a server runs many.
A host of a topology runs one instance unless it says ``instances: K``; its
instances are then named ``<host>.0`` .. ``<host>.<K-1>``, and a stream that
lists the host as an operator gets all of them, in that order.  A single
instance may be listed by its own name.  A host with one instance is its
own instance, named as the host: every topology written before instances
existed means what it meant.

How the splitter tells instances apart (docs/p4.md, "Operator instances"):
every instance has an **instance id**.  A host with one instance is known by
its switch port, as it always was, so its id is its port (1 .. 510).  The
instances of a shared host get ids from ``FIRST_SHARED_ID`` up.  A copy for
a shared host's instance leaves through a multicast node whose replication
id (rid) is the instance id; egress keys the address rewrite and the window
positions on that id, or on the port when the rid is 0.  The rewrite gives
each instance the host's MAC and an IP address of its own, from a /16 per
shared host (``instance_network``); the host accepts the whole /16 as local,
and its one receiver tells instances apart by each datagram's destination.

A host in a rack (``racks:``, docs/topology.md "Racks") shares its splitter
port with the rack's other hosts, so the port cannot name it: its one
instance gets an id from ``FIRST_SHARED_ID`` up too, and is reached the
same way.  It keeps the host's own IP and MAC, which the rack's bridge
delivers by.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

#: Ids below are switch ports: a host with one instance is known by its port.
FIRST_SHARED_ID = 512
#: Instance ids are 16 bits: a multicast replica's rid carries them to egress.
MAX_INSTANCE_ID = (1 << 16) - 1
#: Instances one topology can give shared hosts.
MAX_SHARED_INSTANCES = MAX_INSTANCE_ID - FIRST_SHARED_ID + 1
#: A shared host's instances take addresses from 10.<16 + k>.0.0/16, k counting the shared hosts.
INSTANCE_NETWORKS = ipaddress.ip_network("10.16.0.0/12")
MAX_INSTANCES_PER_HOST = (1 << 16) - 2
MAX_SHARED_HOSTS = 1 << (16 - 12)  # /16s in the /12

#: An operator as a stream lists it: a host, or one instance of a shared host.
OPERATOR_NAME = r"^[a-z][a-z0-9]{0,9}(\.(0|[1-9][0-9]{0,4}))?$"
_INSTANCE = re.compile(r"^([a-z][a-z0-9]{0,9})\.(0|[1-9][0-9]{0,4})$")


def instance_name(host: str, index: int, count: int) -> str:
    """The name of instance ``index`` of ``host``, which runs ``count`` instances."""
    return host if count == 1 else f"{host}.{index}"


def host_of(operator: str) -> str:
    """The host an operator instance runs on."""
    found = _INSTANCE.match(operator)
    return found.group(1) if found else operator


def instance_network(k: int) -> ipaddress.IPv4Network:
    """The addresses of the ``k``-th shared host's instances (k from 0)."""
    return ipaddress.ip_network(f"10.{16 + k}.0.0/16")


class InstanceError(ValueError):
    """An operator reference that names no instance; ``field`` is where, relative to its list."""


def expand(operators: Iterable[str], counts: Mapping[str, int]) -> list[str]:
    """The instances a stream's ``operators`` list names: a host with K > 1
    instances stands for all of them, ``<host>.<i>`` for one."""
    out: list[str] = []
    for j, op in enumerate(operators):
        found = _INSTANCE.match(op)
        if found:
            host, index = found.group(1), int(found.group(2))
            count = counts.get(host)
            if count is None:
                raise InstanceError(f"[{j}]: unknown host {host!r}")
            if count == 1:
                raise InstanceError(f"[{j}]: host {host!r} runs one instance, named {host!r}")
            if index >= count:
                raise InstanceError(f"[{j}]: host {host!r} runs {count} instances (.0 .. .{count - 1})")
            out.append(op)
        else:
            count = max(1, counts.get(op, 1))
            out.extend(instance_name(op, i, count) for i in range(count))
    return out


def collapse(operators: Sequence[str], counts: Mapping[str, int]) -> list[str]:
    """The shortest list ``expand`` turns back into ``operators``: all of a
    host's instances, in order, become the host's name.  A run writes its
    topology so, which keeps thousands of streams over shared hosts small."""
    out: list[str] = []
    i = 0
    while i < len(operators):
        host = host_of(operators[i])
        count = counts.get(host, 1)
        if count > 1 and list(operators[i:i + count]) == [instance_name(host, k, count) for k in range(count)]:
            out.append(host)
            i += count
        else:
            out.append(operators[i])
            i += 1
    return out


@dataclass(frozen=True)
class Instance:
    """One operator instance as the splitter sees it."""

    name: str
    host: str
    index: int
    id: int          # the egress key: the host's port, or FIRST_SHARED_ID and up
    port: int        # the switch port of its host
    ip: str
    mac: str

    @property
    def shared(self) -> bool:
        """Whether its port leads to other instances too, of its host or of its
        rack (then it is reached by a multicast node of its own)."""
        return self.id >= FIRST_SHARED_ID

    @property
    def rid(self) -> int:
        """The rid its copies carry: its id for an instance on a shared port,
        whose multicast node is its own; 0 for a whole host, reached by unicast
        or by a node of whole hosts.  The egress keys on ``(port, rid)``."""
        return self.id if self.shared else 0


def shared_networks(hosts: Iterable[str], counts: Mapping[str, int]) -> dict[str, ipaddress.IPv4Network]:
    """``host -> the /16 its instances are addressed in``, for each host of ``hosts``
    (in placement order, ``placement_order``) that runs several."""
    shared = [h for h in hosts if counts.get(h, 1) > 1]
    return {host: instance_network(k) for k, host in enumerate(shared)}


def placement_order(topo: Any) -> list[str]:
    """The order instance ids and networks are given out in: hosts that run
    receivers first, then the rest (a scheduled change may still name those)."""
    receivers = topo.receiver_hosts()
    return [*receivers, *(h for h in topo.hosts if h not in set(receivers))]


def topology_networks(topo: Any) -> dict[str, ipaddress.IPv4Network]:
    """``host -> /16`` of a topology's hosts that run several instances, as the plan addresses them."""
    return shared_networks(placement_order(topo), instance_counts(topo.hosts))


def plan_instances(hosts: Iterable[str], counts: Mapping[str, int], ports: Mapping[str, int],
                   addresses: Mapping[str, tuple[str, str]], racked: Iterable[str] = ()) -> dict[str, Instance]:
    """Every instance of ``hosts`` (in placement order), by name, with its id and
    addresses; a host of ``racked`` shares its port, so even its one instance gets an id past the ports."""
    hosts = list(hosts)
    racked = set(racked)
    networks = shared_networks(hosts, counts)
    out: dict[str, Instance] = {}
    next_id = FIRST_SHARED_ID
    for host in hosts:
        count = counts.get(host, 1)
        ip, mac = addresses[host]
        if count == 1:
            if host in racked:
                out[host] = Instance(host, host, 0, next_id, ports[host], ip, mac)
                next_id += 1
            else:
                out[host] = Instance(host, host, 0, ports[host], ports[host], ip, mac)
            continue
        network = networks[host]
        for i in range(count):
            name = instance_name(host, i, count)
            out[name] = Instance(name, host, i, next_id, ports[host], str(network.network_address + 1 + i), mac)
            next_id += 1
    return out


def instance_counts(hosts: Mapping[str, Any]) -> dict[str, int]:
    """``host -> instances`` for a topology's ``hosts`` (each a ``Host``)."""
    return {name: getattr(h, "instances", 1) for name, h in hosts.items()}
