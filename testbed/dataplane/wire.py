"""The event wire format: Ethernet / IPv4 / UDP / event header.

``Event`` is the Scapy layer sources build packets with; ``EVENT_STRUCT`` is
the same layout for code on the fast path (the switch, the receivers), which
parses fixed offsets instead of dissecting with Scapy.  ``docs/wire.md``
describes the format.
"""
from __future__ import annotations

import struct

from scapy.fields import IntField, LongField, ShortField, SignedLongField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

#: UDP destination port that marks an event; the P4 parser keys on it too.
EVENT_UDP_PORT = 50000
#: UDP destination port of an operator host's heartbeat: the switch counts
#: them per ingress port (counter ``heartbeats``) and drops them.
HEARTBEAT_UDP_PORT = 50001
#: A heartbeat's payload: the sender's sequence number.
HEARTBEAT_STRUCT = struct.Struct("!Q")
#: Width in bits of each event header field, in wire order (``p4/headers.p4``).
EVENT_FIELD_BITS = {"stream": 16, "flags": 16, "seq": 32, "ts": 64, "key": 64, "value": 64}
#: stream(16) flags(16) seq(32) ts(64) key(64) value(signed 64), network order.
EVENT_STRUCT = struct.Struct("!HHIQQq")
EVENT_LEN = EVENT_STRUCT.size  # 32 bytes
ETH_LEN, IPV4_LEN, UDP_LEN = 14, 20, 8
EVENT_OFFSET = ETH_LEN + IPV4_LEN + UDP_LEN


class Event(Packet):
    """One stream event: the header the splitter reads and operators compute on."""

    name = "Event"
    fields_desc = [
        ShortField("stream", 0),   # event type = stream id
        ShortField("flags", 0),    # reserved, 0
        IntField("seq", 0),        # per-stream sequence number set by the source
        LongField("ts", 0),        # event timestamp (stream time units)
        LongField("key", 0),       # grouping key for queries (bidder, campaign, ...)
        SignedLongField("value", 0),
    ]


bind_layers(UDP, Event, dport=EVENT_UDP_PORT)


def event_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
                stream: int, seq: int, ts: int, key: int = 0, value: int = 0,
                sport: int = EVENT_UDP_PORT) -> bytes:
    """An event frame built with Scapy.  The UDP checksum is 0 (none) because
    the splitter rewrites the destination IP, which the checksum covers.  The
    IP id is 0 (DF set, never fragmented), so every frame of a stream shares
    its headers and ``FrameTemplate`` can reuse them."""
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src_ip, dst=dst_ip, ttl=64, id=0, flags="DF")
           / UDP(sport=sport, dport=EVENT_UDP_PORT, chksum=0)
           / Event(stream=stream, seq=seq, ts=ts, key=key, value=value))
    return bytes(pkt)


def parse_event(payload: bytes) -> tuple[int, int, int, int, int]:
    """``(stream, seq, ts, key, value)`` of a UDP payload holding one event."""
    stream, _flags, seq, ts, key, value = EVENT_STRUCT.unpack_from(payload)
    return stream, seq, ts, key, value


def ipv4_checksum(header: bytes) -> int:
    total = 0
    for i in range(0, len(header), 2):
        total += (header[i] << 8) | header[i + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def is_event_frame(frame: bytes) -> bool:
    """Whether an Ethernet frame carries an event, tested as the P4 parser does:
    IPv4 without options, UDP, destination port ``EVENT_UDP_PORT``, room for the header."""
    return (len(frame) >= EVENT_OFFSET + EVENT_STRUCT.size
            and frame[12:14] == b"\x08\x00"          # IPv4
            and frame[ETH_LEN] == 0x45                 # version 4, no options
            and frame[ETH_LEN + 9] == 17               # UDP
            and struct.unpack_from("!H", frame, ETH_LEN + 22)[0] == EVENT_UDP_PORT)


def heartbeat_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, seq: int) -> bytes:
    """An operator host's heartbeat to the splitter (docs/wire.md, "Heartbeats")."""
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src_ip, dst=dst_ip, ttl=64, id=0, flags="DF")
           / UDP(sport=HEARTBEAT_UDP_PORT, dport=HEARTBEAT_UDP_PORT, chksum=0)
           / HEARTBEAT_STRUCT.pack(seq))
    return bytes(pkt)


def is_heartbeat_frame(frame: bytes) -> bool:
    """IPv4 without options, UDP to ``HEARTBEAT_UDP_PORT``: what the P4 parser
    and ingress test (the payload is not looked at)."""
    return (len(frame) >= EVENT_OFFSET
            and frame[12:14] == b"\x08\x00"
            and frame[ETH_LEN] == 0x45
            and frame[ETH_LEN + 9] == 17
            and struct.unpack_from("!H", frame, ETH_LEN + 22)[0] == HEARTBEAT_UDP_PORT)


class FrameTemplate:
    """Frames of one stream: headers built once by Scapy, events packed per frame.

    Scapy takes about a millisecond per packet, far too slow for a source that
    must keep up with thousands of events per second.  Every header byte
    before the event is the same for all events of a stream (the IP id is 0
    and the UDP checksum is off), so Scapy builds them once and ``frame``
    appends the packed event.  ``tests/test_wire.py`` checks the result is
    byte for byte what Scapy builds.
    """

    def __init__(self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, stream: int):
        self.stream = stream
        self.prefix = event_frame(src_mac, dst_mac, src_ip, dst_ip, stream, 0, 0)[:EVENT_OFFSET]

    def frame(self, seq: int, ts: int, key: int = 0, value: int = 0) -> bytes:
        return self.prefix + EVENT_STRUCT.pack(self.stream, 0, seq, ts, key & 0xFFFFFFFFFFFFFFFF, value)
