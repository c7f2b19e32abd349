"""A switch on veth pairs, without Mininet: send frames in, capture what comes out.

Each switch port is one end of a veth pair, kept in a namespace of the
switch's own (as in a run, so a Thrift server there is reachable only over
its loopback); the test sends and captures on the other ends, in the root
namespace, with AF_PACKET sockets.  Needs root.
"""
from __future__ import annotations

import os
import select
import socket
import struct
import subprocess
import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

from testbed.dataplane.wire import EVENT_OFFSET, EVENT_STRUCT, is_event_frame
from testbed.emulation.netns import NamedNamespace

SEND_RATE = 1500            # events per second: well below what bmv2 forwards without loss
QUIET_S = 1.0               # capture ends this long after the last frame
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
RCVBUF = 32 << 20
SO_RCVBUFFORCE = 33


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class VethRig:
    """``k`` veth pairs: the switch end ``<prefix><id>s<i>`` is port ``i``, the host
    end ``<prefix><id>h<i>`` is where the test sends or captures.  ``mtu``, when
    given, is set on both ends (jumbo frames need more than the default 1500)."""

    def __init__(self, k: int, prefix: str = "tbv", mtu: Optional[int] = None):
        tag = f"{prefix}{os.getpid() % 1000}"
        self.mtu = mtu
        self.switch_ends = {i: f"{tag}s{i}" for i in range(1, k + 1)}
        self.host_ends = {i: f"{tag}h{i}" for i in range(1, k + 1)}
        # The switch ends live in the switch's own namespace, as in a run, so
        # its Thrift server is reachable only over that namespace's loopback.
        self.namespace = NamedNamespace(tag)
        self.created: list[str] = []

    def create(self) -> "VethRig":
        self.namespace.create()
        for i, sw in self.switch_ends.items():
            host = self.host_ends[i]
            subprocess.run(["ip", "link", "del", host], capture_output=True)  # left over by a crash
            _ip("link", "add", sw, "type", "veth", "peer", "name", host)
            self.created.append(host)
            if self.mtu is not None:
                _ip("link", "set", sw, "mtu", str(self.mtu))
                _ip("link", "set", host, "mtu", str(self.mtu))
            # No IPv6: the kernel would otherwise send ND/MLD frames into the switch.
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{host}.disable_ipv6=1"], capture_output=True)
            _ip("link", "set", host, "up")
            self.namespace.adopt(sw)
        return self

    def delete(self) -> None:
        for host in self.created:
            subprocess.run(["ip", "link", "del", host], capture_output=True)
        self.created.clear()
        self.namespace.delete()


class Capture:
    """Raw sockets on the host ends of the operator ports; event frames only,
    unless ``events_only`` is false."""

    def __init__(self, rig: VethRig, ports: Iterable[int], events_only: bool = True):
        self.events_only = events_only
        self.socks: dict[socket.socket, int] = {}
        for port in ports:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
            s.bind((rig.host_ends[port], 0))
            s.setblocking(False)
            self.socks[s] = port
        self.frames: list[tuple[int, bytes]] = []
        self.kernel_drops = 0

    def drain(self, quiet: float = QUIET_S, expect: Optional[int] = None) -> list[tuple[int, bytes]]:
        """Collect until ``quiet`` seconds pass without an event frame (or ``expect`` arrived)."""
        last = time.monotonic()
        while time.monotonic() - last < quiet and (expect is None or len(self.frames) < expect):
            ready, _, _ = select.select(list(self.socks), [], [], 0.05)
            for s in ready:
                while True:
                    try:
                        frame, addr = s.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if addr[2] == PACKET_OUTGOING or (self.events_only and not is_event_frame(frame)):
                        continue
                    self.frames.append((self.socks[s], frame))
                    last = time.monotonic()
        for s in self.socks:
            self.kernel_drops += struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
        return self.frames

    def close(self) -> None:
        for s in self.socks:
            s.close()


def send_frames(ifname: str, frames: list[bytes], rate: float = SEND_RATE) -> None:
    """Send frames on ``ifname`` at a steady ``rate`` per second."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((ifname, 0))
        t0 = time.monotonic()
        for i, frame in enumerate(frames):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            s.send(frame)


def event_key(frame: bytes) -> tuple[int, int]:
    stream, _flags, seq, _ts, _k, _v = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
    return stream, seq


def by_event(out: Iterable[tuple[int, bytes]]) -> dict[tuple[int, int], list[tuple[int, bytes]]]:
    """``(stream, seq) -> sorted [(port, frame)]``."""
    res: dict[tuple[int, int], list[tuple[int, bytes]]] = defaultdict(list)
    for port, frame in out:
        res[event_key(frame)].append((port, frame))
    return {k: sorted(v) for k, v in res.items()}


@contextmanager
def running(process) -> Iterator:
    """A switch process (``SwitchProcess``) started, with its control client; both closed after."""
    process.start()
    try:
        api = process.api()
        try:
            yield api
        finally:
            api.close()
    finally:
        process.stop()
