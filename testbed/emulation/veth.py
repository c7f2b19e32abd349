"""Veth pairs for a switch outside Mininet, and kernel timestamps on them.

``VethRig`` makes ``k`` veth pairs: the switch end of pair ``i`` is switch
port ``i`` and lives in a namespace of the switch's own (as in a run, so a
Thrift server there is reachable only over its loopback); the host end stays
in the root namespace, where frames are sent and captured.  With ``k = 0``
the rig is just the namespace, for a switch that only serves its control
port.  Interface and namespace names start with a prefix
(``$TESTBED_VETH_PREFIX``, default ``tbv``), so that several people on one
machine can keep to names of their own.

``StampedTaps`` notes the kernel's timestamp of every event frame on the
switch's own interfaces: arriving on its ingress ports, leaving on its
egress ports.  The difference for one frame is the time it spent inside
the switch process, without the veth or the sender in it.  Needs root.
"""
from __future__ import annotations

import itertools
import os
import select
import socket
import struct
import subprocess
import time
from contextlib import nullcontext
from typing import Optional

from testbed.dataplane.wire import (
    CEP_LEN,
    COMPLEX_EVENT_STRUCT,
    EVENT_OFFSET,
    EVENT_STRUCT,
    is_batch_port,
    is_complex_events_frame,
    is_event_frame,
)
from testbed.emulation import netns, procs

PREFIX_VAR, DEFAULT_PREFIX = "TESTBED_VETH_PREFIX", "tbv"
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33
#: ``asm-generic/socket.h``; Python's socket module does not export it.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("qq")
RCVBUF = 32 << 20
_rigs = itertools.count()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class VethRig:
    """``k`` veth pairs: the switch end ``<tag>s<i>`` is port ``i``, the host
    end ``<tag>h<i>`` is where frames are sent or captured.  ``mtu``, when
    given, is set on both ends (jumbo frames need more than the default 1500)."""

    def __init__(self, k: int, prefix: Optional[str] = None, mtu: Optional[int] = None):
        self.mtu = mtu
        prefix = prefix or os.environ.get(PREFIX_VAR) or DEFAULT_PREFIX
        # The whole pid (pid_max is 32768 here, 4194304 at most: "tbv" and the
        # ends' suffixes stay within IFNAMSIZ) and a per-process counter: rigs of
        # two processes at once, such as two test workers, never share names,
        # and a rig deletes an interface of its own name as one a crash left.
        tag = f"{prefix}{os.getpid()}{next(_rigs) % 10}"
        self.switch_ends = {i: f"{tag}s{i}" for i in range(1, k + 1)}
        self.host_ends = {i: f"{tag}h{i}" for i in range(1, k + 1)}
        self.namespace = netns.NamedNamespace(tag)
        self.created: list[str] = []

    def create(self) -> "VethRig":
        self.namespace.create()
        procs.register_namespace(self.namespace.name)
        for i, sw in self.switch_ends.items():
            host = self.host_ends[i]
            subprocess.run(["ip", "link", "del", host], capture_output=True)  # left over by a crash
            _ip("link", "add", sw, "type", "veth", "peer", "name", host)
            self.created.append(host)
            procs.register_interfaces([host])
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

    def __enter__(self) -> "VethRig":
        try:
            return self.create()
        except BaseException:
            self.delete()
            raise

    def __exit__(self, *exc) -> None:
        self.delete()


def send_frames(ifname: str, frames: list[bytes], rate: float) -> None:
    """Send frames on ``ifname`` at a steady ``rate`` per second."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((ifname, 0))
        t0 = time.monotonic()
        for i, frame in enumerate(frames):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            s.send(frame)


def carries_events(frame: bytes) -> bool:
    """An event frame, a batch, or a frame of complex events."""
    return is_event_frame(frame) or is_batch_port(frame) or is_complex_events_frame(frame)


class Taps:
    """AF_PACKET sockets that collect event frames on interfaces until the line goes quiet.

    ``interfaces`` maps ``(direction, port)`` to an interface name (made
    inside ``netns_path`` when given): direction ``in`` keeps the frames
    arriving on it, ``out`` the frames sent from it.  ``rows`` collects what
    ``row`` makes of each frame: ``(port, frame)`` here.  Only event frames
    count (one event, a batch, or the CEP stage's complex events), unless ``events_only`` is false.
    """

    #: Ask the kernel for each frame's receive time (``SO_TIMESTAMPNS``).
    timestamps = False

    def __init__(self, interfaces: dict[tuple[str, int], str], netns_path: Optional[str] = None,
                 events_only: bool = True):
        self.events_only = events_only
        self.socks: dict[socket.socket, tuple[str, int]] = {}
        with netns.entered(netns_path) if netns_path else nullcontext():
            for (direction, port), intf in interfaces.items():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
                if self.timestamps:
                    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                s.bind((intf, 0))
                s.setblocking(False)
                self.socks[s] = (direction, port)
        self.rows: list = []
        self.kernel_drops = 0

    def row(self, direction: str, port: int, frame: bytes, ancdata: list) -> Optional[tuple]:
        return port, frame

    def drain(self, quiet: float = 1.0, expect: Optional[int] = None) -> list:
        """Collect until ``quiet`` seconds pass without an event frame, or ``expect`` rows arrived."""
        last = time.monotonic()
        space = socket.CMSG_SPACE(TIMESPEC.size)
        while time.monotonic() - last < quiet and (expect is None or len(self.rows) < expect):
            ready, _, _ = select.select(list(self.socks), [], [], 0.05)
            for s in ready:
                direction, port = self.socks[s]
                while True:
                    try:
                        frame, ancdata, _flags, addr = s.recvmsg(65535, space)
                    except BlockingIOError:
                        break
                    if (addr[2] == PACKET_OUTGOING) != (direction == "out") or \
                            (self.events_only and not carries_events(frame)):
                        continue
                    row = self.row(direction, port, frame, ancdata)
                    if row is not None:
                        self.rows.append(row)
                        last = time.monotonic()
        for s in self.socks:
            self.kernel_drops += struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
        return self.rows

    def close(self) -> None:
        for s in self.socks:
            s.close()


class StampedTaps(Taps):
    """Kernel timestamps of event frames on a switch's interfaces.

    ``ingress`` and ``egress`` map switch ports to the switch's own interface
    names (inside ``netns_path`` when given).  ``rows`` collects
    ``(direction, port, stream, seq, ns)`` with direction ``in`` for frames
    arriving on an ingress port and ``out`` for frames the switch sends on
    an egress port; the times are the kernel's (``SO_TIMESTAMPNS``), taken
    when the frame passed the interface, not when this process read it.
    """

    timestamps = True

    def __init__(self, ingress: dict[int, str], egress: dict[int, str], netns_path: Optional[str] = None):
        super().__init__({("in", port): intf for port, intf in ingress.items()}
                         | {("out", port): intf for port, intf in egress.items()}, netns_path)

    def row(self, direction: str, port: int, frame: bytes, ancdata: list) -> Optional[tuple]:
        stamp = next((data for level, kind, data in ancdata
                      if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
        if stamp is None:
            return None
        sec, nsec = TIMESPEC.unpack(stamp[:TIMESPEC.size])
        if is_complex_events_frame(frame):
            # A complex event frame stands for the event that completed its matches.
            _p, _r, _m, stream, _r2, seq, _ts, _v = COMPLEX_EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET + CEP_LEN)
        else:
            stream, _f, seq, _ts, _k, _v = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
        return direction, port, stream, seq, sec * 1_000_000_000 + nsec
