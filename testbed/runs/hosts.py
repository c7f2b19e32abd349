"""The processes a run starts on the network's hosts: receivers, sources, captures.

Each is a program of ``testbed.emulation`` started inside its host
(``Network.host(name).popen``), logging to the run directory and recorded
for ``testbed clean``.  Readiness is checked, never assumed: a receiver is
ready once it has bound its socket and written its first status file, a
capture once its file exists.
"""
from __future__ import annotations

import re
import signal
import sys
import time
from pathlib import Path

from testbed import ROOT
from testbed.dataplane.wire import EVENT_UDP_PORT
from testbed.emulation import procs
from testbed.rundir import Fault, RunDir, read_json
from testbed.runs.parts import Network, Process
from testbed.semantics.addressing import plan_addresses
from testbed.semantics.instances import topology_networks
from testbed.semantics.topology import SPLITTER_IP, SPLITTER_MAC, Topology


class HostProcesses:
    """The run's host processes, by host: started, watched and stopped together."""

    def __init__(self, topo: Topology, rundir: RunDir, network: Network, error: type[Exception]):
        self.topo = topo
        self.rundir = rundir
        self.network = network
        #: What a process that is not ready in time raises (the run's error type).
        self.error = error
        self.receivers: dict[str, Process] = {}
        self.sources: dict[str, Process] = {}
        self.captures: list[Process] = []
        self.capture_logs: list[Path] = []

    def start_receiver(self, name: str, spark: bool) -> None:
        """The receiver on operator host ``name`` (again, for a recovered operator)."""
        cmd = [sys.executable, "-m", "testbed.emulation.receiver", "--host", name, "--out", str(self.rundir.root)]
        if spark:
            cmd.append("--spark")
        count = self.topo.hosts[name].instances
        if count > 1:
            network = topology_networks(self.topo)[name]
            cmd += ["--instances", str(count), "--instance-network", str(network)]
        if self.topo.adapt is not None and self.topo.adapt.failover:
            ip, mac = plan_addresses(self.topo)[name]
            cmd += ["--heartbeat", self.network.intf_of(name), mac, ip, SPLITTER_MAC, SPLITTER_IP]
        self.receivers[name] = procs.spawn(cmd, self.rundir.log(name, "receiver"), f"receiver on {name}",
                                           host=self.network.host(name), cwd=ROOT)

    def wait_receivers(self) -> None:
        for name, proc in self.receivers.items():
            # The first status file is written once the UDP socket is bound.
            procs.wait_ready(proc, self.rundir.receiver_status(name).exists, f"receiver on {name}", 30,
                             self.rundir.log(name, "receiver"), self.error)

    def restart_receiver(self, name: str, spark: bool) -> None:
        """A new receiver on ``name`` (it carries on the old one's parts), ready
        once it has bound its socket and written a status of its own."""
        status = self.rundir.receiver_status(name)
        before = read_json(status).get("pid") if status.exists() else None
        self.start_receiver(name, spark)
        procs.wait_ready(self.receivers[name], lambda: read_json(status).get("pid") not in (None, before),
                         f"receiver on {name}", 30, self.rundir.log(name, "receiver"), self.error)

    def kill_receiver(self, name: str) -> None:
        self.receivers[name].send_signal(signal.SIGKILL)

    def start_sources(self) -> None:
        for name in self.topo.source_hosts():
            cmd = [sys.executable, "-m", "testbed.emulation.source", "--topology", str(self.rundir.topology),
                   "--host", name, "--intf", self.network.intf_of(name), "--out", str(self.rundir.root)]
            self.sources[name] = procs.spawn(cmd, self.rundir.log(name, "source"), f"source on {name}",
                                             host=self.network.host(name), cwd=ROOT)

    def start_captures(self) -> None:
        """tcpdump on every switch port into pcaps/, as p4lang/tutorials does."""
        self.rundir.pcaps.mkdir(exist_ok=True)
        switch = self.network.switch
        for _port, intf in sorted(switch.port_map().items()):
            pcap = self.rundir.pcap(intf)
            # Immediate mode hands each frame to tcpdump as it comes: by default libpcap holds
            # frames in a ring block until the block fills, and a capture stopped before then
            # lost them (up to 626 of 1,446 frames on a busy machine).  -U writes each one out.
            proc = procs.spawn(["tcpdump", "-i", intf, "--immediate-mode", "-B", "16384", "-w", str(pcap),
                                "-U", "-q", f"udp port {EVENT_UDP_PORT}"],
                               self.rundir.log(intf, "tcpdump"), f"tcpdump on {intf}", host=switch)
            self.captures.append(proc)
            self.capture_logs.append(self.rundir.log(intf, "tcpdump"))
            procs.wait_ready(proc, pcap.exists, f"tcpdump on {intf}", 10, error=self.error)

    @staticmethod
    def _terminate(group) -> None:
        """SIGTERM all of ``group`` at once, then wait for each."""
        group = list(group)
        for proc in group:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in group:
            procs.stop(proc)

    def stop(self, known: list[Fault]) -> list[Fault]:
        """Stop sources, receivers (they flush their data) and captures, in that
        order; return the receivers that failed on their own, beyond ``known``.
        A capture is stopped once it has written every frame the kernel passed it."""
        for group in (self.sources, self.receivers):
            self._terminate(group.values())
        for proc, log in zip(self.captures, self.capture_logs):
            drain_capture(proc, log)
        self._terminate(self.captures)
        seen = {f.what for f in known}
        return [Fault(what=f"receiver on {host}", phase="stop", exit=proc.returncode)
                for host, proc in self.receivers.items()
                if proc.returncode not in (0, None) and f"receiver on {host}" not in seen]


#: What tcpdump prints on SIGUSR1 (and on exit, over three lines).
_CAPTURE_STATS = re.compile(r"(\d+) packets captured, (\d+) packets received by filter")


def drain_capture(proc: Process, log: Path, timeout: float = 10.0) -> bool:
    """Wait until the tcpdump ``proc`` has written all the frames its filter
    let through, so that stopping it loses none; False if it has not after
    ``timeout`` seconds (or has exited).  Asks by SIGUSR1, on which tcpdump
    appends its counts to ``log``."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        before = len(_CAPTURE_STATS.findall(log.read_text(errors="replace")))
        proc.send_signal(signal.SIGUSR1)
        while time.monotonic() < deadline:
            counts = _CAPTURE_STATS.findall(log.read_text(errors="replace"))
            if len(counts) > before:
                captured, passed = map(int, counts[-1])
                if captured >= passed:
                    return True
                break
            time.sleep(0.02)
        time.sleep(0.05)
    return False
