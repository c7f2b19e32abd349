"""A switch on veth pairs, without Mininet: send frames in, capture what comes out.

The rig itself is ``testbed.emulation.veth.VethRig`` (experiments use it too).
Each switch port is one end of a veth pair, kept in a namespace of the
switch's own (as in a run, so a Thrift server there is reachable only over
its loopback); the test sends and captures on the other ends, in the root
namespace, with AF_PACKET sockets.  Needs root.
"""
from __future__ import annotations

import select
import socket
import struct
import time
from collections import defaultdict
from typing import Iterable, Optional

from testbed.dataplane.wire import EVENT_OFFSET, EVENT_STRUCT, is_event_frame
from testbed.emulation.veth import (
    ETH_P_ALL,
    PACKET_OUTGOING,
    PACKET_STATISTICS,
    RCVBUF,
    SO_RCVBUFFORCE,
    SOL_PACKET,
    VethRig,
)
from testbed.emulation.veth import send_frames as _send_frames

SEND_RATE = 1500            # events per second: well below what bmv2 forwards without loss
QUIET_S = 1.0               # capture ends this long after the last frame

__all__ = ["VethRig", "Capture", "send_frames", "by_event", "event_key"]


def send_frames(ifname: str, frames: list[bytes], rate: float = SEND_RATE) -> None:
    """Send frames on ``ifname`` at a steady ``rate`` per second (default: the tests' rate)."""
    _send_frames(ifname, frames, rate)


class Capture:
    """Raw sockets on the host ends of the operator ports; event frames only."""

    def __init__(self, rig: VethRig, ports: Iterable[int]):
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
                    if addr[2] == PACKET_OUTGOING or not is_event_frame(frame):
                        continue
                    self.frames.append((self.socks[s], frame))
                    last = time.monotonic()
        for s in self.socks:
            self.kernel_drops += struct.unpack("II", s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
        return self.frames

    def close(self) -> None:
        for s in self.socks:
            s.close()


def event_key(frame: bytes) -> tuple[int, int]:
    stream, _flags, seq, _ts, _k, _v = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
    return stream, seq


def by_event(out: Iterable[tuple[int, bytes]]) -> dict[tuple[int, int], list[tuple[int, bytes]]]:
    """``(stream, seq) -> sorted [(port, frame)]``."""
    res: dict[tuple[int, int], list[tuple[int, bytes]]] = defaultdict(list)
    for port, frame in out:
        res[event_key(frame)].append((port, frame))
    return {k: sorted(v) for k, v in res.items()}
