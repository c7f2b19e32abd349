"""The event wire format: Scapy's build, the fast template, and the model's egress."""
from hypothesis import given
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import EVENT_LEN, Event, FrameTemplate, event_frame, parse_event


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
    pipe.table_add("egress_rewrite", "rewrite_dst", ["3"], ["02:00:00:00:00:03", "10.0.0.3"])
    frame = event_frame("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1, 1, 1)
    out = Ether(pipe.egress(3, frame))
    assert out.dst == "02:00:00:00:00:03" and out[IP].dst == "10.0.0.3"
    chk = out[IP].chksum
    del out[IP].chksum
    assert Ether(bytes(out))[IP].chksum == chk
    assert out[UDP].chksum == 0
