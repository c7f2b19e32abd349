"""From a topology to a running Mininet network: hosts around one splitter.

``SplitterNetwork`` has Mininet's lifecycle (build, start, stop).  Every host
gets one link to the splitter switch, on the port the plan expects
(``Topology.switch_ports``), shaped when the topology asks: bandwidth with
HTB; delay, loss and reordering with netem where the kernel has it, and
otherwise through a relay node running ``testbed.emulation.impairment``, so
a link is never left unshaped.  Every node, the switch included, lives in a
network namespace of its own, so nothing of a run is in the root namespace
and two runs never share an interface name.  Each node's shell is recorded
in the run's state as soon as it starts, so ``testbed clean`` can end it
(and with it the namespace) after a crash at any moment of the build.

A host in a rack (``Topology.racks``) is linked to its rack's bridge
(``testbed.emulation.racks``) instead, and the rack to the splitter, on
the port the plan gives the rack.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any, Optional

from testbed import ROOT
from testbed.emulation.impairment import Impairment, parse_duration
from testbed.emulation.pathstats import interface_counters, socket_drops
from testbed.emulation.procs import node_run, register_pid, spawn, stop, wait_ready
from testbed.emulation.racks import rack_class
from testbed.rundir import RunDir
from testbed.rundir.names import node_name
from testbed.semantics.addressing import plan_addresses, subnet
from testbed.semantics.instances import topology_networks
from testbed.semantics.topology import Topology


def mininet_missing() -> Optional[str]:
    """Why Mininet cannot run here, or ``None``."""
    if os.geteuid() != 0:
        return "Mininet needs root"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "the mininet Python module is not installed (apt-get install mininet)"
    for tool in ("mnexec", "ip", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (apt-get install mininet iproute2)"
    return None


def netem_missing() -> Optional[str]:
    """Why the kernel cannot give links delay or loss (no ``sch_netem``), or ``None``.

    Mininet only prints an error when tc refuses a qdisc and goes on with an
    unshaped link; the network asks first and uses a user-space relay instead.
    The question is put to the loopback of a network namespace made for it,
    which the kernel removes with the probe's process: a probe killed midway
    leaves no interface behind for ``testbed clean`` to find.
    """
    if shutil.which("unshare") is None:
        return "unshare is not on PATH (apt-get install util-linux), so netem cannot be probed"
    res = subprocess.run(["unshare", "--net", "--", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return f"the kernel has no netem qdisc ({res.stderr.strip() or 'tc failed'})"
    return None


def _host_class():
    """Mininet's Host, recording its shell as soon as it starts (Mininet imported on demand)."""
    from mininet.node import Host

    class RunHost(Host):
        def startShell(self, mnopts=None) -> None:
            super().startShell(mnopts)
            register_pid(self.pid, f"mininet host {self.name}")

    return RunHost


class SplitterNetwork:
    """The emulated network of one run, around a switch of the class it is given.

    ``switch_cls`` is a Mininet switch class (a target's ``SplitterSwitch``),
    built with ``switch_params`` besides its name and run directory; the
    network does not choose the target, the run's composer does.
    """

    def __init__(self, topo: Topology, switch_cls: type, rundir: RunDir, switch_params: Optional[dict] = None):
        self.topo = topo
        self.switch_cls = switch_cls
        self.switch_params = switch_params or {}
        self.rundir = rundir
        self.net = None
        self.switch = None
        #: host -> how its link is shaped ("netem", "user-space relay", "htb", or absent)
        self.link_modes: dict[str, str] = {}
        self.relays: dict[str, tuple[object, Impairment]] = {}     # host -> (relay node, impairment)
        self.relay_procs: dict[str, subprocess.Popen] = {}
        self.racks: dict[str, Any] = {}      # rack -> its RackBridge node

    def build(self) -> "SplitterNetwork":
        from mininet.link import Link, TCLink
        from mininet.net import Mininet

        topo = self.topo
        # Mininet hands node and interface names to its nodes' shells: the last guard before it does.
        for name, what in [(topo.switch.name, "switch.name"), *((h, f"hosts.{h}") for h in topo.hosts),
                           *((r, f"racks.{r}") for r in topo.racks)]:
            node_name(name, what)
        net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                      autoStaticArp=False, waitConnected=False, host=_host_class())
        self.net = net
        self.switch = net.addSwitch(topo.switch.name, cls=self.switch_cls, run_dir=str(self.rundir.root),
                                    batches=topo.sends_batches(),
                                    cep=topo.cep is not None,
                                    changes=topo.changes_streams(),
                                    **self.switch_params)
        addresses = plan_addresses(topo)
        prefix = subnet(topo).prefixlen
        ports = topo.switch_ports()
        kernel_netem = any(link.impaired and link.shaper != "user" for link in topo.links) and netem_missing() is None
        rack_of = topo.rack_of()
        for name in topo.hosts:
            ip, mac = addresses[name]
            host = net.addHost(name, ip=f"{ip}/{prefix}", mac=mac)
            if name in rack_of:
                self._rack_link(host, rack_of[name], ports[name], mac)
                continue      # validation refused links: entries for racked hosts
            link = topo.link_for(name)
            bw = {"bw": link.bw} if link.bw is not None else {}
            if link.impaired and (link.shaper == "user" or link.reorder or not kernel_netem):
                # No netem here (or netem could not reorder as asked): a relay
                # node between host and switch impairs the link in user space.
                relay = net.addHost(f"L{ports[name]}", ip=None)
                net.addLink(host, relay)
                net.addLink(relay, self.switch, port2=ports[name], cls=TCLink if bw else Link, **bw)
                self.relays[name] = (relay, Impairment(parse_duration(link.delay) if link.delay else 0.0,
                                                       link.loss or 0.0, link.reorder or 0.0,
                                                       topo.seed * 65536 + ports[name]))
                self.link_modes[name] = "user-space relay"
                continue
            shaping = dict(bw, **{k: v for k, v in (("delay", link.delay), ("loss", link.loss)) if v is not None})
            net.addLink(host, self.switch, port2=ports[name], cls=TCLink if shaping else Link, **shaping)
            if shaping:
                self.link_modes[name] = "netem" if link.impaired else "htb"
        net.build()
        for host in net.hosts:
            # IPv6 neighbour discovery and router solicitations would only add
            # noise to the switch's non-event counter.
            node_run(host, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        for name, network in topology_networks(topo).items():
            # Every address of the host's instances is its own: the kernel delivers
            # them all to the host's one receiver, which tells them apart.
            node_run(self.host(name), "ip", "route", "add", "local", str(network), "dev", "lo")
        return self

    def _rack_link(self, host, rack: str, port: int, mac: str) -> None:
        """Link ``host`` to its rack's bridge, adding the rack and its uplink to the splitter at its first host."""
        from mininet.link import Link

        if rack not in self.racks:
            node = self.net.addSwitch(rack, cls=rack_class(), device_id=len(self.racks) + 1)
            self.net.addLink(node, self.switch, port1=0, port2=port, cls=Link)
            self.racks[rack] = node
        node = self.racks[rack]
        link = self.net.addLink(host, node, cls=Link)
        node.host_macs[link.intf2.name] = mac

    def start(self, ready_timeout: float = 60.0) -> "SplitterNetwork":
        """Start the racks' bridges, then the switch, and wait until it is ready (alive, control port open)."""
        assert self.net is not None and self.switch is not None
        for rack in self.racks.values():
            rack.start([])
        for intf in self.switch.intfList():
            if intf.name != "lo":
                node_run(intf.node, "sysctl", "-qw", f"net.ipv6.conf.{intf.name}.disable_ipv6=1")
        self.switch.start([])
        self.switch.wait_ready(ready_timeout)
        self.start_relays(ready_timeout)
        return self

    def start_relays(self, ready_timeout: float) -> None:
        """One impairment relay per user-space link, ready once its sockets are bound."""
        for name, (relay, impairment) in self.relays.items():
            to_host, to_switch = (intf.name for intf in relay.intfList() if intf.name != "lo")
            cmd = [sys.executable, "-m", "testbed.emulation.impairment", "--host", name,
                   "--out", str(self.rundir.root), "--to-host", to_host, "--to-switch", to_switch,
                   *impairment.args()]
            self.relay_procs[name] = spawn(cmd, self.rundir.log(name, "relay"), f"link relay of {name}",
                                           host=relay, cwd=ROOT)
        for name, proc in self.relay_procs.items():
            wait_ready(proc, self.rundir.relay_status(name).exists, f"link relay of {name}", ready_timeout,
                       self.rundir.log(name, "relay"))

    def host(self, name: str):
        return self.net.get(name)

    def path_counters(self) -> dict[str, Any]:
        """The drop counters along every host's path (``pathstats``): each host's
        end of its link, the switch's end per port, and the switch process's
        packet sockets per port."""
        hosts = {}
        for name in self.topo.hosts:
            intf = self.intf_of(name)
            shown = node_run(self.host(name), "ip", "-s", "-j", "link", "show", intf)
            hosts[name] = interface_counters(shown).get(intf, {})
        # The switch has a namespace of its own (targets.base): read its ends and sockets there.
        root = interface_counters(node_run(self.switch, "ip", "-s", "-j", "link", "show"))
        sockets = socket_drops(node_run(self.switch, "ss", "-0", "-m", "-p", "-n"), self.switch.proc.pid)
        switch_ports, switch_sockets = {}, {}
        for intf, port in self.switch.ports.items():
            if intf.name == "lo":
                continue
            switch_ports[str(port)] = root.get(intf.name, {})
            switch_sockets[str(port)] = sockets.get(intf.name, 0)
        # A rack's bridge ports are a hop of their own between the splitter and its hosts.
        racks = {name: {intf: counters for intf, counters in
                        interface_counters(node_run(rack, "ip", "-s", "-j", "link", "show")).items()
                        if intf in {i.name for i in rack.intfList() if i.name != "lo"}}
                 for name, rack in self.racks.items()}
        return {"hosts": hosts, "switch_ports": switch_ports, "switch_sockets": switch_sockets, "racks": racks}

    def intf_of(self, host: str) -> str:
        return self.host(host).defaultIntf().name

    def link_down(self, host: str) -> None:
        """Fail ``host``'s link at the host's end, as a pulled cable or a dead NIC
        would: the switch's port loses its carrier but stays configured.  (An
        administrative down of the switch's own interface is a different event,
        and bmv2's libpcap then blocks the switch's one receive thread until the
        port is up again, stalling every other port.)"""
        self.host(host).defaultIntf().ifconfig("down")

    def link_up(self, host: str) -> None:
        self.host(host).defaultIntf().ifconfig("up")

    def stop(self) -> None:
        """Stop the relays (they send what they hold and write their records), then Mininet."""
        for proc in self.relay_procs.values():
            stop(proc)
        self.relay_procs.clear()
        if self.net is not None:
            self.net.stop()
            self.net = None

