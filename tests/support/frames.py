"""Frames a splitter may meet that are not events, built with Scapy.

Each is something a real network carries, or a corrupted event or batch: the targets
must count them (``non_event``, or ``unknown_stream`` for an event of a
stream without configuration) and send nothing for them.  ``JUMBO`` frames
exceed a standard MTU, so a rig that sends them needs a larger one.
"""
from __future__ import annotations

from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from testbed.dataplane.wire import (
    BATCH_LEN,
    BATCH_UDP_PORT,
    EVENT_LEN,
    EVENT_OFFSET,
    EVENT_UDP_PORT,
    Batch,
    BatchedEvent,
    Event,
    batch_frame,
    event_frame,
)
from testbed.semantics.topology import SPLITTER_IP, SPLITTER_MAC

SRC_MAC, SRC_IP = "02:00:00:00:00:01", "10.0.0.1"
JUMBO = 9000             # bytes of payload in the jumbo frames
MTU = JUMBO + 100        # what a rig needs to carry them


def event(stream: int, seq: int, ts: int = 0) -> bytes:
    """An event from host 1 to the splitter."""
    return event_frame(SRC_MAC, SPLITTER_MAC, SRC_IP, SPLITTER_IP, stream, seq, ts, key=seq, value=seq)


def jumbo_event(stream: int, seq: int, ts: int = 0) -> bytes:
    """An event followed by ``JUMBO`` bytes of payload: still an event, forwarded whole."""
    return bytes(_ip(id=0, flags="DF") / UDP(sport=EVENT_UDP_PORT, dport=EVENT_UDP_PORT, chksum=0)
                 / Event(stream=stream, seq=seq, ts=ts, key=seq, value=seq) / Raw(bytes(JUMBO)))


def _ip(**fields) -> Ether:
    return Ether(src=SRC_MAC, dst=SPLITTER_MAC) / IP(src=SRC_IP, dst=SPLITTER_IP, **fields)


def not_events() -> dict[str, bytes]:
    """Name -> frame, for every kind of frame that is not an event."""
    ev = event(1, 0)
    body = Event(stream=1, seq=0, ts=0)
    return {
        "truncated-event": ev[:-1],
        "truncated-udp": ev[:EVENT_OFFSET - 3],
        "ethernet-only": ev[:14],
        "other-udp-port": bytes(_ip() / UDP(sport=EVENT_UDP_PORT, dport=EVENT_UDP_PORT + 7) / Raw(bytes(body))),
        "udp-no-payload": bytes(_ip() / UDP(sport=1234, dport=EVENT_UDP_PORT)),
        "tcp-to-event-port": bytes(_ip() / TCP(dport=EVENT_UDP_PORT) / Raw(bytes(body))),
        "ipv4-options": bytes(_ip(options=[IPOption_NOP()] * 4) / UDP(dport=EVENT_UDP_PORT) / body),
        "ipv6": bytes(Ether(src=SRC_MAC, dst=SPLITTER_MAC) / IPv6(src="fd00::1", dst="fd00::fe")
                      / UDP(dport=EVENT_UDP_PORT) / body),
        "arp": bytes(Ether(src=SRC_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc=SRC_IP, pdst=SPLITTER_IP)),
        "vlan-tagged-event": bytes(Ether(src=SRC_MAC, dst=SPLITTER_MAC) / Dot1Q(vlan=7)
                                   / IP(src=SRC_IP, dst=SPLITTER_IP) / UDP(dport=EVENT_UDP_PORT) / body),
        "jumbo-not-event": bytes(_ip() / UDP(dport=4000) / Raw(bytes(JUMBO))),
        # an event's datagram cut in two: the first part holds the whole event header
        "first-fragment": bytes(_ip(flags="MF", proto=17)
                                / Raw(bytes(UDP(sport=EVENT_UDP_PORT, dport=EVENT_UDP_PORT, len=8 + 64, chksum=0)
                                            / body))),
        # a later fragment whose payload happens to read as UDP to the event port
        "later-fragment": bytes(_ip(frag=4, proto=17)
                                / Raw(bytes(UDP(sport=EVENT_UDP_PORT, dport=EVENT_UDP_PORT, chksum=0) / body))),
        "garbage": bytes(range(7, 67)),
        # batches (docs/wire.md, "Batches") whose count and length disagree, or of two streams
        "batch-count-above-length": bytes(_ip() / UDP(sport=BATCH_UDP_PORT, dport=BATCH_UDP_PORT, chksum=0)
                                          / Batch(count=3, events=[BatchedEvent(stream=1, seq=i) for i in range(2)])),
        "batch-count-zero": bytes(_ip() / UDP(sport=BATCH_UDP_PORT, dport=BATCH_UDP_PORT, chksum=0)
                                  / Batch(count=0, events=[])),
        "batch-count-over-16": bytes(_ip() / UDP(sport=BATCH_UDP_PORT, dport=BATCH_UDP_PORT, chksum=0)
                                     / Batch(events=[BatchedEvent(stream=1, seq=i) for i in range(17)])),
        "batch-truncated": _batch([(0, 0, 0, 0), (1, 1, 0, 0)])[:EVENT_OFFSET + BATCH_LEN + EVENT_LEN + 5],
        "batch-of-two-streams": bytes(_ip() / UDP(sport=BATCH_UDP_PORT, dport=BATCH_UDP_PORT, chksum=0)
                                      / Batch(events=[BatchedEvent(stream=1, seq=0), BatchedEvent(stream=2, seq=1)])),
    }


def _batch(events: list[tuple[int, int, int, int]]) -> bytes:
    return batch_frame(SRC_MAC, SPLITTER_MAC, SRC_IP, SPLITTER_IP, 1, events)
