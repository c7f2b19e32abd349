"""Raw packet sockets on one interface: what the embedded switch, the link
relay and the sources use to put frames on the wire and take them off.

The buffers are forced large (root may exceed ``rmem_max``): the testbed
accounts for every frame, so a burst must not overflow silently.  Frames a
socket sees leaving its own interface carry ``PACKET_OUTGOING`` and are
skipped by readers.
"""
from __future__ import annotations

import socket

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
DEFAULT_BUFFER = 16 << 20


def packet_socket(intf: str, buffer: int = DEFAULT_BUFFER, receive: bool = True) -> socket.socket:
    """A non-blocking AF_PACKET socket bound to ``intf`` for every protocol.

    ``receive=False`` sizes only the send buffer (a sender never reads).
    """
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    if receive:
        s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, buffer)
    s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, buffer)
    s.bind((intf, 0))
    s.setblocking(False)
    return s
