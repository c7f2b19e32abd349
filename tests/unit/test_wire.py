"""The event wire format: Scapy's build, the fast template, and the model's egress; complex events."""
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.dataplane.model import Replica, SplitterPipeline
from testbed.dataplane.wire import (
    CEP_UDP_PORT,
    EVENT_LEN,
    EVENT_OFFSET,
    ComplexEvents,
    Event,
    FrameTemplate,
    complex_events_frame,
    event_frame,
    parse_complex_events,
    parse_event,
)


@given(seq=st.integers(0, 2**32 - 1), ts=st.integers(0, 2**64 - 1), key=st.integers(0, 2**63 - 1),
       value=st.integers(-2**63, 2**63 - 1), stream=st.integers(0, 0xFFFF))
def test_template_frames_equal_scapy_frames(seq, ts, key, value, stream):
    args = ("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254")
    assert FrameTemplate(*args, stream).frame(seq, ts, key, value) == \
        event_frame(*args, stream, seq, ts, key, value)


def test_scapy_dissects_event_frames():
    frame = event_frame("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254",
                        291, 7, 1234, 5, -6)
    pkt = Ether(frame)
    ev = pkt[Event]
    assert (ev.stream, ev.seq, ev.ts, ev.key, ev.value) == (291, 7, 1234, 5, -6)
    assert len(bytes(ev)) == EVENT_LEN
    assert parse_event(bytes(pkt[UDP].payload)) == (291, 7, 1234, 5, -6)


def test_egress_rewrite_keeps_ip_checksum_valid():
    pipe = SplitterPipeline()
    pipe.table_add("egress_rewrite", "rewrite_dst", ["3", "0"], ["02:00:00:00:00:03", "10.0.0.3", "3"])
    frame = event_frame("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1, 1, 1)
    [(replica, address)] = pipe.addressed([Replica(3, 0)])
    assert replica.port == 3 and address.instance == 3
    assert pipe.addressed([Replica(3, 7), Replica(4, 0)]) == [], "a copy without an entry is dropped"
    out = Ether(pipe.egress(address, frame))
    assert out.dst == "02:00:00:00:00:03" and out[IP].dst == "10.0.0.3"
    chk = out[IP].chksum
    del out[IP].chksum
    assert Ether(bytes(out))[IP].chksum == chk
    assert out[UDP].chksum == 0


# -- complex events (docs/wire.md, "Complex events") -------------------------------
complex_event = st.tuples(st.integers(1, 2**16 - 1), st.integers(1, 2**32 - 1), st.integers(0, 2**16 - 1),
                          st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(-2**63, 2**63 - 1))


@given(st.lists(complex_event, min_size=1, max_size=4))
def test_complex_event_frames_read_back_alike_by_scapy_and_the_fast_path(events):
    frame = complex_events_frame("02:00:00:00:00:fe", "02:00:00:00:00:03", "10.0.0.254", "10.0.0.3", events)
    assert len(frame) == EVENT_OFFSET + 4 + 32 * len(events)
    assert parse_complex_events(frame[EVENT_OFFSET:]) == events
    layer = Ether(frame)[ComplexEvents]
    assert Ether(frame)[UDP].dport == CEP_UDP_PORT and layer.count == len(events)
    assert [(e.pattern, e.match, e.stream, e.seq, e.ts, e.value) for e in layer.events] == events


def test_a_complex_event_frame_its_length_cannot_hold_is_refused():
    payload = complex_events_frame("02:00:00:00:00:fe", "02:00:00:00:00:03", "10.0.0.254", "10.0.0.3",
                                   [(1, 1, 2, 3, 4, 5)] * 2)[EVENT_OFFSET:]
    for bad in (payload[:-1], payload[:3], b"\x00\x00" + payload[2:], b"\x00\x05" + payload[2:]):
        with pytest.raises(ValueError):
            parse_complex_events(bad)
