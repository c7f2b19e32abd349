"""Frames that are not events, through the pipeline model in process.

The model is what the embedded target runs; ``tests/integration/test_non_events.py``
sends the same frames through both targets' switch processes.
"""
from hypothesis import given, settings
from hypothesis import strategies as st

from support import topologies
from support.frames import event, jumbo_event, not_events
from testbed.dataplane.contract import UNKNOWN_STREAM, drop_counter_index
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import EVENT_LEN, EVENT_OFFSET, WINDOWS_LEN, is_event_frame
from testbed.semantics.plan import SplitterPlan

TOPO = topologies.build([topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4"])], 4)


def pipeline() -> SplitterPipeline:
    pipe = SplitterPipeline()
    Controller(pipe).install(SplitterPlan(TOPO))
    return pipe


def test_non_events_are_counted_and_go_nowhere():
    """Interleaved with events, every non-event is counted and sent nowhere, and the
    events around them go exactly where they would without them."""
    junk = not_events()
    clean, mixed = pipeline(), pipeline()
    expected, got = [], []
    for seq in range(40):
        frame = jumbo_event(1, seq) if seq % 7 == 3 else event(1, seq)
        expected.append(clean.process(frame))
        for name in junk:
            assert mixed.process(junk[name]) == [], name
        assert mixed.process(event(99, seq)) == []          # a stream with no configuration
        got.append(mixed.process(frame))
    assert got == expected
    assert sum(len(out) for out in got) > 40                 # sliding: most events go to several operators
    assert mixed.counter_read("non_event", 0)[1] == 40 * len(junk)
    assert mixed.counter_read("stream_drops", drop_counter_index(99, UNKNOWN_STREAM))[1] == 40
    assert mixed.counter_read("stream_in", 1) == clean.counter_read("stream_in", 1)
    assert mixed.register_read("event_count", 99) == 0      # no state for an unknown stream


def test_an_event_no_destination_routes_is_counted_once_as_dropped():
    """Windows found, but no unicast or multicast entry for them: the event
    is dropped as unknown_stream and counted there alone, not in stream_in,
    which counts the events sent on (forwarding.p4, COUNT_SENT_ON)."""
    pipe = pipeline()
    routed = [pipe.process(event(1, seq)) for seq in range(6)]
    assert all(routed) and pipe.counter_read("stream_in", 1)[1] == 6
    pipe.table_clear("unicast")
    pipe.table_clear("multicast")
    assert [pipe.process(event(1, seq)) for seq in range(6, 10)] == [[]] * 4
    assert pipe.counter_read("stream_in", 1)[1] == 6
    assert pipe.counter_read("stream_drops", drop_counter_index(1, UNKNOWN_STREAM))[1] == 4
    assert pipe.register_read("event_count", 1) == 10       # the tracker took every event


def test_jumbo_event_is_forwarded_whole():
    out = pipeline().process(jumbo_event(1, 0))
    assert len(out) == 1 and len(out[0][1]) == len(jumbo_event(1, 0)) + WINDOWS_LEN
    # the payload beyond the event header follows the Windows header unchanged
    end = EVENT_OFFSET + EVENT_LEN
    assert out[0][1][end + WINDOWS_LEN:] == jumbo_event(1, 0)[end:]


@settings(max_examples=300, deadline=None)
@given(frame=st.one_of(st.binary(max_size=200),
                       st.builds(lambda cut, flip, byte: _mutate(event(1, 5), cut, flip, byte),
                                 st.integers(0, 80), st.integers(0, 73), st.integers(0, 255))))
def test_any_bytes_are_processed_without_error(frame):
    """Whatever arrives, the model answers: copies only for events, a count for everything else."""
    pipe = pipeline()
    out = pipe.process(frame)
    if not is_event_frame(frame):
        assert out == [] and pipe.counter_read("non_event", 0)[1] == 1
    for port, copy in out:
        assert port in (2, 3, 4) and len(copy) == len(frame) + WINDOWS_LEN


def _mutate(frame: bytes, cut: int, flip: int, byte: int) -> bytes:
    data = bytearray(frame[:max(cut, 1)] if cut < len(frame) else frame)
    if flip < len(data):
        data[flip] = byte
    return bytes(data)
