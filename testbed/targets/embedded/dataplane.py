"""The embedded switch's data plane: the model on real interfaces.

One AF_PACKET socket per switch port; every frame that arrives goes through
``SplitterPipeline`` and its copies leave on their egress ports.  The
control server shares ``lock`` with it, so a control operation never sees
a frame half processed.
"""
from __future__ import annotations

import selectors
import socket
import struct
import threading
from typing import Optional

from testbed.dataplane.model import SplitterPipeline
from testbed.emulation.packet_socket import PACKET_OUTGOING, PACKET_STATISTICS, SOL_PACKET, packet_socket


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
            # PACKET_STATISTICS reports what even the big buffers could not hold.
            s = packet_socket(intf)
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
                frame, addr = sock.recvfrom(65535)
            except BlockingIOError:
                break
            if addr[2] != PACKET_OUTGOING:
                frames.append(frame)
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
