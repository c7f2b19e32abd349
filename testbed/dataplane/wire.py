"""The event wire format: Ethernet / IPv4 / UDP / event header.

``Event`` is the Scapy layer sources build packets with; ``EVENT_STRUCT`` is
the same layout for code on the fast path (the switch, the receivers), which
parses fixed offsets instead of dissecting with Scapy.  Every copy the
splitter sends carries a second header after the event, ``Windows``
(``WINDOWS_STRUCT``): the windows of the event that this copy's operator
owns, written by the switch.  ``docs/wire.md`` describes the format.
"""
from __future__ import annotations

import functools
import struct

from scapy.fields import FieldLenField, IntField, LongField, PacketListField, ShortField, SignedLongField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

from testbed.semantics.cep.rules import MAX_PATTERNS
from testbed.semantics.limits import MAX_BATCH

# The header fields' widths are declared once, with the limits they set.

#: UDP destination port that marks an event; the P4 parser keys on it too.
EVENT_UDP_PORT = 50000
#: UDP destination port of an operator host's heartbeat: the switch counts
#: them per ingress port (counter ``heartbeats``) and drops them.
HEARTBEAT_UDP_PORT = 50001
#: UDP destination port of a batch: 1 to ``MAX_BATCH`` events of one stream in one frame.
BATCH_UDP_PORT = 50002
#: count(16) flags(16), network order: the header before a batch's events.
BATCH_STRUCT = struct.Struct("!HH")
BATCH_LEN = BATCH_STRUCT.size  # 4 bytes
#: A heartbeat's payload: the sender's sequence number.
HEARTBEAT_STRUCT = struct.Struct("!Q")
#: stream(16) flags(16) seq(32) ts(64) key(64) value(signed 64), network order.
EVENT_STRUCT = struct.Struct("!HHIQQq")
EVENT_LEN = EVENT_STRUCT.size  # 32 bytes
ETH_LEN, IPV4_LEN, UDP_LEN = 14, 20, 8
EVENT_OFFSET = ETH_LEN + IPV4_LEN + UDP_LEN
#: The IPv4 flags-and-offset bits that mark a fragment: MF and the 13-bit offset.
IPV4_FRAGMENT_BITS = 0x3FFF
#: ``flags`` bit the splitter sets on every copy: a ``Windows`` header follows the event.
FLAG_WINDOWS = 0x0001
#: window(64) span(32) stride(16) epoch(16) old_window(64) old_span(32)
#: old_stride(16) reserved(16), network order (``windows_t`` in p4/headers.p4).
WINDOWS_STRUCT = struct.Struct("!QIHHQIHH")
WINDOWS_LEN = WINDOWS_STRUCT.size  # 32 bytes
#: UDP destination port of the frames that carry complex events to a sink (docs/wire.md, "Complex events").
CEP_UDP_PORT = 50003
#: count(16) flags(16), network order: the header before a frame's complex events.
CEP_STRUCT = struct.Struct("!HH")
CEP_LEN = CEP_STRUCT.size  # 4 bytes
#: pattern(16) reserved(16) match(32) stream(16) reserved(16) seq(32) ts(64)
#: value(signed 64), network order: one complex event (docs/cep.md, "The complex event").
COMPLEX_EVENT_STRUCT = struct.Struct("!HHIHHIQq")
COMPLEX_EVENT_LEN = COMPLEX_EVENT_STRUCT.size  # 32 bytes
#: Width in bits of each windows header field, in wire order.
WINDOWS_FIELD_BITS = {"window": 64, "span": 32, "stride": 16, "epoch": 16,
                      "old_window": 64, "old_span": 32, "old_stride": 16, "reserved": 16}


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


class Windows(Packet):
    """What the splitter tells an operator about one copy of an event: the
    windows of the event that this operator owns, in the epoch in force and,
    during a transition, in the one before (docs/wire.md, "Windows header").

    The operator's windows of an epoch are ``window - k * stride`` for every
    ``k >= 0`` with ``k * stride < span`` (none when ``span`` is 0): window
    ids are global, consecutive across epochs, and round robin with stride
    N within an epoch.
    """

    name = "Windows"
    fields_desc = [
        LongField("window", 0),     # this copy's newest window (epoch in force)
        IntField("span", 0),        # windows of the event from it back to the event's oldest
        ShortField("stride", 0),    # N of the epoch in force
        ShortField("epoch", 0),     # configuration epoch (low 16 bits)
        LongField("old_window", 0),  # the same for the previous epoch's windows
        IntField("old_span", 0),
        ShortField("old_stride", 0),
        ShortField("reserved", 0),
    ]


class BatchedEvent(Event):
    """An event inside a batch: the same header, and its ``Windows`` header
    (in a copy) is all of its payload; the next event is not."""

    name = "BatchedEvent"

    def extract_padding(self, s):
        split = WINDOWS_LEN if self.flags & FLAG_WINDOWS else 0
        return s[:split], s[split:]

    def guess_payload_class(self, payload):
        return Windows if self.flags & FLAG_WINDOWS else super().guess_payload_class(payload)


class Batch(Packet):
    """The header of a batch (docs/wire.md, "Batches") and its events: each
    a ``BatchedEvent`` and, in a copy (``flags`` has ``FLAG_WINDOWS``), its
    ``Windows`` header right after it."""

    name = "Batch"
    fields_desc = [
        FieldLenField("count", None, fmt="H", count_of="events"),   # events in this frame, 1 to MAX_BATCH
        ShortField("flags", 0),    # FLAG_WINDOWS on the splitter's copies
        PacketListField("events", [], BatchedEvent, count_from=lambda pkt: pkt.count),
    ]


class ComplexEvent(Packet):
    """One match of a pattern: its id and number, the event that completed it,
    and the pattern's return value (docs/cep.md, "The complex event")."""

    name = "ComplexEvent"
    fields_desc = [
        ShortField("pattern", 0),   # the pattern's id, 1 .. 65535
        ShortField("reserved", 0),
        IntField("match", 0),       # its number among the pattern's matches, from 1
        ShortField("stream", 0),    # the completing event's stream, seq and ts
        ShortField("reserved2", 0),
        IntField("seq", 0),
        LongField("ts", 0),
        SignedLongField("value", 0),  # the return value
    ]

    def extract_padding(self, s):
        return b"", s


class ComplexEvents(Packet):
    """What a sink receives for one basic event: every complex event it
    completed whose pattern names this sink, in the switch's slot order."""

    name = "ComplexEvents"
    fields_desc = [
        FieldLenField("count", None, fmt="H", count_of="events"),   # 1 .. MAX_PATTERNS
        ShortField("flags", 0),
        PacketListField("events", [], ComplexEvent, count_from=lambda pkt: pkt.count),
    ]


bind_layers(UDP, Event, dport=EVENT_UDP_PORT)
bind_layers(UDP, ComplexEvents, dport=CEP_UDP_PORT)
bind_layers(Event, Windows, flags=FLAG_WINDOWS)
bind_layers(UDP, Batch, dport=BATCH_UDP_PORT)


def batch_events(payload: bytes) -> list[tuple[tuple[int, ...], tuple[int, ...] | None]]:
    """The events of a batch's UDP payload, each as ``EVENT_STRUCT`` fields
    with its ``WINDOWS_STRUCT`` fields (None in a source's batch).  Raises
    ValueError for a malformed batch (count against length)."""
    count, flags = BATCH_STRUCT.unpack_from(payload)
    each = EVENT_LEN + (WINDOWS_LEN if flags & FLAG_WINDOWS else 0)
    if not 1 <= count <= MAX_BATCH or len(payload) < BATCH_LEN + count * each:
        raise ValueError(f"a batch of {count} events in {len(payload)} bytes")
    out = []
    for i in range(count):
        at = BATCH_LEN + i * each
        event = EVENT_STRUCT.unpack_from(payload, at)
        windows = WINDOWS_STRUCT.unpack_from(payload, at + EVENT_LEN) if flags & FLAG_WINDOWS else None
        out.append((event, windows))
    return out


def copy_windows(window: int, span: int, stride: int) -> range:
    """The window ids one epoch's fields of a ``Windows`` header name, oldest first."""
    if span <= 0 or stride <= 0:
        return range(0)
    count = (span - 1) // stride + 1
    return range(window - (count - 1) * stride, window + 1, stride)


def parse_windows(payload: bytes) -> tuple[int, ...]:
    """The ``Windows`` header of a copy's UDP payload, as ``WINDOWS_STRUCT`` fields."""
    return WINDOWS_STRUCT.unpack_from(payload, EVENT_LEN)


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


def batch_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, stream: int,
                events: list[tuple[int, int, int, int]], sport: int = BATCH_UDP_PORT) -> bytes:
    """A batch of ``(seq, ts, key, value)`` events of ``stream``, built with
    Scapy (the same headers as ``event_frame``, to ``BATCH_UDP_PORT``)."""
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src_ip, dst=dst_ip, ttl=64, id=0, flags="DF")
           / UDP(sport=sport, dport=BATCH_UDP_PORT, chksum=0)
           / Batch(events=[BatchedEvent(stream=stream, seq=seq, ts=ts, key=key, value=value)
                           for seq, ts, key, value in events]))
    return bytes(pkt)


def complex_events_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
                         events: list[tuple[int, int, int, int, int, int]]) -> bytes:
    """A frame of ``(pattern, match, stream, seq, ts, value)`` complex events, built
    with Scapy, from the splitter to a sink (both UDP ports ``CEP_UDP_PORT``)."""
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src_ip, dst=dst_ip, ttl=64, id=0, flags="DF")
           / UDP(sport=CEP_UDP_PORT, dport=CEP_UDP_PORT, chksum=0)
           / ComplexEvents(events=[ComplexEvent(pattern=p, match=m, stream=st, seq=seq, ts=ts, value=v)
                                   for p, m, st, seq, ts, v in events]))
    return bytes(pkt)


def parse_complex_events(payload: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """The ``(pattern, match, stream, seq, ts, value)`` complex events of a UDP
    payload to ``CEP_UDP_PORT``.  Raises ValueError for a malformed one: a
    count of 0 or over ``MAX_PATTERNS``, or one its length cannot hold."""
    if len(payload) < CEP_LEN:
        raise ValueError(f"{len(payload)} bytes: no complex event header")
    count, _flags = CEP_STRUCT.unpack_from(payload)
    if not 1 <= count <= MAX_PATTERNS or len(payload) < CEP_LEN + count * COMPLEX_EVENT_LEN:
        raise ValueError(f"{count} complex events in {len(payload)} bytes")
    out = []
    for i in range(count):
        pattern, _r, match, stream, _r2, seq, ts, value = COMPLEX_EVENT_STRUCT.unpack_from(
            payload, CEP_LEN + i * COMPLEX_EVENT_LEN)
        out.append((pattern, match, stream, seq, ts, value))
    return out


def ipv4_checksum(header: bytes) -> int:
    total = 0
    for i in range(0, len(header), 2):
        total += (header[i] << 8) | header[i + 1]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def _udp_to(frame: bytes, port: int, min_len: int) -> bool:
    """Whether a frame is a whole UDP datagram to ``port`` over IPv4 without
    options, as the P4 parser selects it.  A fragment is not: a later one
    carries no UDP header at all, only bytes that may look like one, and the
    switch cannot route a first one's missing rest (sources set DF)."""
    return (len(frame) >= min_len
            and frame[12:14] == b"\x08\x00"                                        # IPv4
            and frame[ETH_LEN] == 0x45                                               # version 4, no options
            and struct.unpack_from("!H", frame, ETH_LEN + 6)[0] & IPV4_FRAGMENT_BITS == 0
            and frame[ETH_LEN + 9] == 17                                             # UDP
            and struct.unpack_from("!H", frame, ETH_LEN + 22)[0] == port)


def is_event_frame(frame: bytes) -> bool:
    """Whether an Ethernet frame carries an event, tested as the P4 parser does:
    an unfragmented IPv4 datagram without options, UDP, destination port
    ``EVENT_UDP_PORT``, room for the header."""
    return _udp_to(frame, EVENT_UDP_PORT, EVENT_OFFSET + EVENT_STRUCT.size)


def is_complex_events_frame(frame: bytes) -> bool:
    """Whether an Ethernet frame is one the CEP stage sends a sink: UDP to
    ``CEP_UDP_PORT`` with room for the header and one complex event."""
    return _udp_to(frame, CEP_UDP_PORT, EVENT_OFFSET + CEP_LEN + COMPLEX_EVENT_LEN)


def batch_count(frame: bytes) -> int:
    """The number of events of a batch frame as the P4 parser takes it, or 0
    if it is not a well-formed batch: an unfragmented IPv4 datagram without
    options, UDP to ``BATCH_UDP_PORT``, a count of 1 to ``MAX_BATCH``, and
    a UDP length of exactly the batch header and that many events."""
    if not _udp_to(frame, BATCH_UDP_PORT, EVENT_OFFSET + BATCH_LEN):
        return 0
    count = struct.unpack_from("!H", frame, EVENT_OFFSET)[0]
    udp_len = struct.unpack_from("!H", frame, UDP_LENGTH_AT)[0]
    if not 1 <= count <= MAX_BATCH or udp_len != UDP_LEN + BATCH_LEN + count * EVENT_LEN:
        return 0
    if len(frame) < EVENT_OFFSET + BATCH_LEN + count * EVENT_LEN:
        return 0
    return count


def is_batch_port(frame: bytes) -> bool:
    """Whether a frame is addressed as a batch, well formed or not."""
    return _udp_to(frame, BATCH_UDP_PORT, EVENT_OFFSET)


def heartbeat_frame(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, seq: int) -> bytes:
    """An operator host's heartbeat to the splitter (docs/wire.md, "Heartbeats")."""
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src_ip, dst=dst_ip, ttl=64, id=0, flags="DF")
           / UDP(sport=HEARTBEAT_UDP_PORT, dport=HEARTBEAT_UDP_PORT, chksum=0)
           / HEARTBEAT_STRUCT.pack(seq))
    return bytes(pkt)


def is_heartbeat_frame(frame: bytes) -> bool:
    """An unfragmented IPv4 datagram without options, UDP to
    ``HEARTBEAT_UDP_PORT``: what the P4 parser and ingress test (the payload
    is not looked at)."""
    return _udp_to(frame, HEARTBEAT_UDP_PORT, EVENT_OFFSET)


@functools.lru_cache(maxsize=1024)
def _headers(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str) -> bytes:
    """The headers before the event, built by Scapy once per pair of ends: the
    stream id lies in the event, so a host's thousands of streams share them
    (Scapy's 10 ms a frame made 32,768 streams' templates take minutes)."""
    return event_frame(src_mac, dst_mac, src_ip, dst_ip, 0, 0, 0)[:EVENT_OFFSET]


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
        self.prefix = _headers(src_mac, dst_mac, src_ip, dst_ip)

    def frame(self, seq: int, ts: int, key: int = 0, value: int = 0) -> bytes:
        return self.prefix + EVENT_STRUCT.pack(self.stream, 0, seq, ts, key & 0xFFFFFFFFFFFFFFFF, value)

    def batch(self, events: list[tuple[int, int, int, int]]) -> bytes:
        """A batch frame of ``(seq, ts, key, value)`` events, byte for byte ``batch_frame``'s."""
        body = b"".join(EVENT_STRUCT.pack(self.stream, 0, seq, ts, key & 0xFFFFFFFFFFFFFFFF, value)
                        for seq, ts, key, value in events)
        payload = BATCH_STRUCT.pack(len(events), 0) + body
        return with_payload(self.prefix, payload, BATCH_UDP_PORT)


# -- where a copy is rewritten: the offsets egress.p4's deparser writes at ------------
#: IPv4's total length, checksum and destination, from the start of the frame.
IPV4_TOTAL_LENGTH_AT = ETH_LEN + 2
IPV4_CHECKSUM_AT = ETH_LEN + 10
IPV4_DST_AT = ETH_LEN + 16
#: UDP's length and checksum.
UDP_LENGTH_AT = ETH_LEN + IPV4_LEN + 4
UDP_CHECKSUM_AT = ETH_LEN + IPV4_LEN + 6
#: The event header's flags, and where the Windows header goes: right after the event.
EVENT_FLAGS_AT = EVENT_OFFSET + 2
WINDOWS_AT = EVENT_OFFSET + EVENT_LEN


def insert_windows_header(frame: bytes, windows: bytes) -> bytes:
    """``frame`` with the Windows header ``windows`` after its event header,
    the event's ``FLAG_WINDOWS`` set, and the IPv4 and UDP lengths grown to match."""
    buf = bytearray(frame)
    buf[WINDOWS_AT:WINDOWS_AT] = windows
    struct.pack_into("!H", buf, EVENT_FLAGS_AT, struct.unpack_from("!H", buf, EVENT_FLAGS_AT)[0] | FLAG_WINDOWS)
    for length_at in (IPV4_TOTAL_LENGTH_AT, UDP_LENGTH_AT):
        struct.pack_into("!H", buf, length_at, (struct.unpack_from("!H", buf, length_at)[0] + len(windows)) & 0xFFFF)
    return bytes(buf)


def with_payload(headers: bytes, payload: bytes, port: int, checksum: bool = True) -> bytes:
    """Ethernet, IPv4 and UDP headers ``headers`` (IPv4 without options)
    carrying ``payload`` from and to UDP port ``port`` (both, so that a
    dissector keyed on either port reads it alike): lengths and the IPv4
    checksum made anew (unless ``readdress`` will), the UDP checksum left out."""
    buf = bytearray(headers[:EVENT_OFFSET]) + payload
    struct.pack_into("!H", buf, IPV4_TOTAL_LENGTH_AT, IPV4_LEN + UDP_LEN + len(payload))
    struct.pack_into("!H", buf, UDP_LENGTH_AT, UDP_LEN + len(payload))
    struct.pack_into("!HH", buf, UDP_LENGTH_AT - 4, port, port)
    buf[IPV4_CHECKSUM_AT:IPV4_CHECKSUM_AT + 2] = b"\0\0"
    if checksum:
        struct.pack_into("!H", buf, IPV4_CHECKSUM_AT, ipv4_checksum(bytes(buf[ETH_LEN:ETH_LEN + IPV4_LEN])))
    buf[UDP_CHECKSUM_AT:UDP_CHECKSUM_AT + 2] = b"\0\0"
    return bytes(buf)


def readdress(frame: bytes, mac: int, ip: int) -> bytes:
    """``frame`` sent to the host with Ethernet address ``mac`` and IPv4 address
    ``ip`` (as integers): its IPv4 checksum made anew, its UDP checksum left out."""
    buf = bytearray(frame)
    buf[0:6] = mac.to_bytes(6, "big")
    buf[IPV4_DST_AT:IPV4_DST_AT + 4] = ip.to_bytes(4, "big")
    buf[IPV4_CHECKSUM_AT:IPV4_CHECKSUM_AT + 2] = b"\0\0"
    struct.pack_into("!H", buf, IPV4_CHECKSUM_AT, ipv4_checksum(bytes(buf[ETH_LEN:ETH_LEN + IPV4_LEN])))
    buf[UDP_CHECKSUM_AT:UDP_CHECKSUM_AT + 2] = b"\0\0"
    return bytes(buf)
