"""The embedded switch's data plane: the model on real interfaces.

One AF_PACKET socket per switch port; every frame that arrives goes through
``SplitterPipeline`` and its copies leave on their egress ports.  The
control server shares ``lock`` with it, so a control operation never sees
a frame half processed.

Linux strips the 802.1Q tag of a received frame before a packet socket sees
it and hands it over on the side (``PACKET_AUXDATA``).  The data plane puts
the tag back, as libpcap does for bmv2, so a VLAN-tagged event is what it
is on the wire: not an event, counted as such, never forwarded.
"""
from __future__ import annotations

import errno
import selectors
import socket
import struct
import threading
from typing import Optional

from testbed.dataplane.model import SplitterPipeline
from testbed.emulation.packet_socket import PACKET_OUTGOING, PACKET_STATISTICS, SOL_PACKET, packet_socket

PACKET_AUXDATA = 8
#: struct tpacket_auxdata: status, len, snaplen, mac, net, vlan_tci, vlan_tpid.
AUXDATA = struct.Struct("IIIHHHH")
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ETH_P_8021Q = 0x8100
#: Largest frame a port takes in: the IPv4 maximum, so jumbo frames arrive whole.
MAX_FRAME = 65535
ANCILLARY = socket.CMSG_SPACE(AUXDATA.size)


def with_vlan_tag(frame: bytes, ancillary: list) -> bytes:
    """The frame as it was on the wire: its 802.1Q tag put back if the kernel took it off."""
    for level, kind, data in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= AUXDATA.size:
            status, _len, _snap, _mac, _net, tci, tpid = AUXDATA.unpack_from(data)
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else ETH_P_8021Q
                return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


class EmbeddedDataPlane:
    """Frames in, pipeline, frames out: one AF_PACKET socket per port.

    With ``forward`` (ingress port -> egress port) every frame bypasses the
    pipeline and leaves unchanged on its port: the plain forwarding
    baseline, with the same sockets, batching and lock as the splitter, so
    the difference between the two is the pipeline's cost.
    """

    def __init__(self, pipeline: SplitterPipeline, ports: dict[int, str],
                 forward: Optional[dict[int, int]] = None):
        self.pipeline = pipeline
        self.forward = forward
        self.lock = threading.Lock()
        self.sockets: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        for port, intf in ports.items():
            # PACKET_STATISTICS reports what even the big buffers could not hold;
            # PACKET_AUXDATA brings back the VLAN tag the kernel strips.
            s = packet_socket(intf)
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            self.sockets[port] = s
            self.selector.register(s, selectors.EVENT_READ, port)
        self.rx_dropped = {port: 0 for port in ports}
        self.tx_errors = {port: 0 for port in ports}
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            for key, _ in self.selector.select(timeout=0.2):
                self._drain(key.fileobj, key.data)

    def _drain(self, sock: socket.socket, port: int) -> None:
        """Take what the port has queued (bounded, so one busy port cannot
        starve the others), run it through the pipeline under one hold of the
        control lock, then send the copies."""
        frames = []
        for _ in range(256):
            try:
                frame, ancillary, _flags, addr = sock.recvmsg(MAX_FRAME, ANCILLARY)
            except BlockingIOError:
                break
            except OSError as err:
                # A port whose link went down reports it once (ENETDOWN) and
                # then stays quiet until the link is up again: a port state,
                # not a fault of the switch.
                if err.errno in (errno.ENETDOWN, errno.ENXIO):
                    break
                raise
            if addr[2] != PACKET_OUTGOING:
                frames.append(with_vlan_tag(frame, ancillary) if ancillary else frame)
        if not frames:
            return
        if self.forward is not None:
            egress = self.forward.get(port)
            with self.lock:
                out = [(egress, frame) for frame in frames] if egress is not None else []
        else:
            process = self.pipeline.process
            with self.lock:
                out = [copy for frame in frames for copy in process(frame, port)]
        for egress, data in out:
            try:
                self.sockets[egress].send(data)
            except (KeyError, OSError):
                self.tx_errors[egress] = self.tx_errors.get(egress, 0) + 1

    def port_stats(self) -> dict[str, dict[str, int]]:
        """Kernel-side socket drops per port (read-and-reset by the kernel, so summed here)."""
        for port, s in self.sockets.items():
            raw = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
            _packets, drops = struct.unpack("II", raw)
            self.rx_dropped[port] += drops
        return {str(p): {"rx_dropped": self.rx_dropped[p], "tx_errors": self.tx_errors.get(p, 0)}
                for p in self.sockets}
