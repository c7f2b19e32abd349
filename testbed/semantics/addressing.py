"""The address plan: each host's IPv4 and Ethernet address, and the network they share.

The splitter's egress rewrites every copy to its operator's addresses, so
the plan (``testbed.semantics.plan``) needs them as much as the emulated
network does; both take them from here, and a topology is valid only if its
addresses can be planned.  Hosts are addressed in 10.0.0.0/24 while they
fit beside the splitter, else in the smallest of a /22, /20 or /16 that
holds them (more than 510 hosts need racks, ``Topology.racks``; the /16
stays clear of the shared hosts' instance networks, 10.16.0.0/12).  A plan that no network will carry
(``parse_topology(plan_only=True)``, the resource sweeps) may have more
operators than a switch has ports: S4 maps operator ids to addresses
anywhere, so such plans draw from all of 10/8.
"""
from __future__ import annotations

import ipaddress
from typing import Any

SUBNET = ipaddress.ip_network("10.0.0.0/24")
WIDE_SUBNET = ipaddress.ip_network("10.0.0.0/22")
#: For racked networks past the /22, smallest first.
WIDER_SUBNETS = (ipaddress.ip_network("10.0.0.0/20"), ipaddress.ip_network("10.0.0.0/16"))
PLAN_SUBNET = ipaddress.ip_network("10.0.0.0/8")
#: Where sources address their events; never given to a host.
SPLITTER_IP = "10.0.0.254"
SPLITTER_MAC = "02:00:00:00:00:fe"


class AddressError(ValueError):
    """A host whose address cannot be planned; ``field`` is its key in the topology file."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def subnet(topo: Any) -> ipaddress.IPv4Network:
    """The hosts' network (see the module's docstring)."""
    if len(topo.hosts) <= SUBNET.num_addresses - 3:
        return SUBNET
    if getattr(topo, "_plan_only", False) and len(topo.hosts) > WIDE_SUBNET.num_addresses - 3:
        return PLAN_SUBNET
    if len(topo.hosts) <= WIDE_SUBNET.num_addresses - 3:
        return WIDE_SUBNET
    return next((net for net in WIDER_SUBNETS if len(topo.hosts) <= net.num_addresses - 3), WIDER_SUBNETS[-1])


def plan_addresses(topo: Any) -> dict[str, tuple[str, str]]:
    """``host -> (ip, mac)`` of a topology, filling in what its file leaves out.

    Auto-assigned addresses follow the host's position in ``hosts``,
    skipping addresses another host was given explicitly, the splitter's, and
    the network's own and broadcast addresses; a MAC is derived from its IP.
    """
    net = subnet(topo)
    taken_ip = {h.ip.split("/")[0] for h in topo.hosts.values() if h.ip}
    taken_ip |= {SPLITTER_IP, str(net.network_address), str(net.broadcast_address)}
    taken_mac = {h.mac for h in topo.hosts.values() if h.mac}
    free = (str(a) for a in net.hosts() if str(a) not in taken_ip)
    out: dict[str, tuple[str, str]] = {}
    for name, h in topo.hosts.items():
        ip, mac = (h.ip.split("/")[0] if h.ip else next(free, None)), h.mac
        if h.ip and ip in (str(net.network_address), str(net.broadcast_address)):
            raise AddressError(f"hosts.{name}.ip", f"{ip} is the address of network {net} itself")
        if ip is None:
            raise AddressError(f"hosts.{name}.ip", f"no address left in {net} for the host")
        if mac is None:
            last = int(ipaddress.ip_address(ip)) & 0xFFFFFF
            mac = "02:00:00:%02x:%02x:%02x" % (last >> 16, (last >> 8) & 0xFF, last & 0xFF)
            if mac in taken_mac:
                raise AddressError(f"hosts.{name}.mac", f"cannot auto-assign, {mac} is taken")
        out[name] = (ip, mac)
    return out
