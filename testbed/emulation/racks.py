"""A rack: hosts behind an ordinary L2 switch, one splitter port for all of them.

``RackBridge`` is a Mininet switch node whose data plane is a Linux bridge in
a network namespace of its own (this kernel has no Open vSwitch, and Mininet's
``LinuxBridge`` wants ``brctl``).  Its port 0 is the uplink to the splitter,
ports 1.. lead to its hosts.  Operators never send, so the bridge could never
learn their MACs and would flood every copy to every host: instead each host
port gets a static FDB entry for its host's MAC, and flooding to host ports
is off, so a copy reaches only the host whose MAC the splitter's egress
rewrite gave it, and a copy for no known MAC reaches nobody.

The bridge lives and dies with the node's namespace: the node's shell is
recorded in the run's state when it starts, like every other node's, so a
run that stops, fails, is interrupted or is killed (the watchdog, ``testbed
clean``) ends the shell, and the kernel removes the namespace with the
bridge and its ports in it.  Nothing of a rack is in the root namespace.
"""
from __future__ import annotations

from typing import Any

from testbed.emulation.procs import register_pid

#: The bridge's name inside the rack's own namespace, which holds nothing else.
BRIDGE = "br0"


class RackSetupError(RuntimeError):
    """A bridge command failed: the rack would flood or drop, so the run stops."""


def rack_class():
    """``RackBridge``, with Mininet imported on demand."""
    from mininet.node import Switch

    class RackBridge(Switch):
        """One rack's L2 switch; ``hosts`` maps its host ports' interface names to their hosts' MACs."""

        def __init__(self, name: str, device_id: int = 0, **kwargs: Any):
            # Mininet derives a datapath id from digits in the name; a rack's may have none.
            kwargs.setdefault("dpid", "%016x" % (device_id + 1))
            kwargs["inNamespace"] = True
            super().__init__(name, **kwargs)
            self.host_macs: dict[str, str] = {}

        def startShell(self, mnopts=None) -> None:
            """Mininet's node shell, recorded at once so ``testbed clean`` finds it after any crash."""
            super().startShell(mnopts)
            register_pid(self.pid, f"mininet rack {self.name}")
            # Before any port exists: a port with IPv6 would send its own router
            # solicitations and reports straight down each host's link.
            self.run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")

        def run(self, *argv: str) -> None:
            out, err, code = self.pexec(list(argv))
            if code != 0:
                raise RackSetupError(f"rack {self.name}: {' '.join(argv)} failed: {(err or out).strip()}")

        def start(self, controllers) -> None:
            """Bridge every port, pin each host's MAC to its port, and flood nothing to hosts."""
            self.run("ip", "link", "add", BRIDGE, "type", "bridge", "stp_state", "0")
            for intf in self.intfList():
                if intf.name == "lo":
                    continue
                self.run("ip", "link", "set", intf.name, "master", BRIDGE)
                self.run("ip", "link", "set", intf.name, "up")
            for name, mac in self.host_macs.items():
                # A host port learns nothing and is flooded nothing: only its static entry sends to it.
                self.run("bridge", "link", "set", "dev", name, "learning", "off", "flood", "off",
                         "mcast_flood", "off", "bcast_flood", "off")
                self.run("bridge", "fdb", "replace", mac, "dev", name, "master", "static")
            self.run("ip", "link", "set", BRIDGE, "up")

        def fdb(self) -> dict[str, str]:
            """``MAC -> port interface`` of the bridge's static entries, as the kernel holds them."""
            import json

            out, _err, _code = self.pexec(["bridge", "-j", "fdb", "show", "br", BRIDGE])
            return {e["mac"]: e["ifname"] for e in json.loads(out or "[]")
                    if "static" in e.get("state", "") and e.get("ifname") in self.host_macs}

        def stop(self, deleteIntfs: bool = True) -> None:
            self.pexec(["ip", "link", "del", BRIDGE])
            super().stop(deleteIntfs)

    return RackBridge
