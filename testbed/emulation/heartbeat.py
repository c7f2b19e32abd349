"""An operator host's heartbeat: "this operator is alive", sent to the splitter.

The switch counts heartbeats per ingress port and drops them
(docs/wire.md, "Heartbeats"); the controller's ``HeartbeatMonitor``
(``testbed.dataplane.liveness``) declares the operator failed when its
port's count stops growing.  The sender runs as a thread of the operator
host's receiver, so a receiver that dies stops its heartbeats, and so does a
host whose link is down.
"""
from __future__ import annotations

import socket
import threading
from typing import Optional

from testbed.dataplane.liveness import HEARTBEAT_INTERVAL_S
from testbed.dataplane.wire import HEARTBEAT_STRUCT, heartbeat_frame


class HeartbeatSender:
    """Sends one heartbeat frame every ``interval`` seconds on ``intf``."""

    def __init__(self, intf: str, src: tuple[str, str], dst: tuple[str, str],
                 interval: float = HEARTBEAT_INTERVAL_S):
        """``src`` and ``dst`` are ``(mac, ip)`` of the operator host and the splitter."""
        self.interval = interval
        self.prefix = heartbeat_frame(src[0], dst[0], src[1], dst[1], 0)[:-HEARTBEAT_STRUCT.size]
        # Protocol 0: the socket sends only, the kernel queues nothing on it.
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        self.sock.bind((intf, 0))
        self.sent = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def beat(self) -> None:
        try:
            self.sock.send(self.prefix + HEARTBEAT_STRUCT.pack(self.sent))
            self.sent += 1
        except OSError:
            pass        # the link is down: silence is the signal

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(self.interval)

    def start(self) -> "HeartbeatSender":
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.sock.close()
