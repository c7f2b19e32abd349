"""Frames that are not events, through each target's switch process on veth pairs.

The frames of ``tests/support/frames.py`` (truncated events, other ports
and protocols, IPv6, ARP, VLAN tags, jumbo frames, an unconfigured stream)
are interleaved with events and sent into the embedded switch and, where
the toolchain exists, bmv2.  Nothing but events may come out, the events
must come out exactly as the pipeline model says, the counters must count
every other frame, and the switch must still be running at the end.  The
rig's MTU carries jumbo frames, so the data planes' receive paths meet them.
"""
from __future__ import annotations

import os

import pytest

from support import topologies
from support.frames import MTU, event, jumbo_event, not_events
from support.veth import Capture, VethRig, by_event, running, send_frames
from testbed.dataplane.contract import UNKNOWN_STREAM, drop_counter_index
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import is_event_frame
from testbed.semantics.plan import SplitterPlan
from testbed.targets.bmv2 import toolchain

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs need root")

TOPO = topologies.build([topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4"])], 4)
ROUNDS = 30


@pytest.fixture(scope="module")
def rig():
    rig = VethRig(4, prefix="r12n", mtu=MTU)
    try:
        yield rig.create()
    finally:
        rig.delete()


@pytest.fixture(params=["model", "bmv2"])
def switch(request, rig, tmp_path):
    """A fresh switch process of the target on the rig, with the topology's plan installed."""
    if request.param == "bmv2":
        if toolchain.toolchain_missing():
            pytest.skip(f"bmv2 toolchain: {toolchain.toolchain_missing()}")
        from testbed.targets.bmv2.process import Bmv2Process as Process
    else:
        from testbed.targets.embedded.process import EmbeddedProcess as Process
    proc = Process(rig.switch_ends, tmp_path, "r12sw", namespace=rig.namespace)
    with running(proc) as api:
        Controller(api).install(SplitterPlan(TOPO))
        yield proc, api


def test_non_events_are_counted_and_never_forwarded(rig, switch):
    proc, api = switch
    junk = list(not_events().values())
    frames = []
    for seq in range(ROUNDS):
        frames.append(jumbo_event(1, seq) if seq % 5 == 2 else event(1, seq))
        frames += junk + [event(99, seq)]
    model = SplitterPipeline()
    Controller(model).install(SplitterPlan(TOPO))
    want = by_event(copy for frame in frames for copy in model.process(frame))

    cap = Capture(rig, rig.host_ends, events_only=False)      # every port, the sender's too
    try:
        send_frames(rig.host_ends[1], frames)
        got = cap.drain()
        assert cap.kernel_drops == 0
    finally:
        cap.close()
    assert all(is_event_frame(frame) for _, frame in got), "a frame that is not an event left the switch"
    assert by_event(got) == want
    assert sum(len(copies) for copies in want.values()) > ROUNDS
    assert api.counter_read("non_event", 0)[1] == ROUNDS * len(junk) == model.counter_read("non_event", 0)[1]
    unknown = drop_counter_index(99, UNKNOWN_STREAM)
    assert api.counter_read("stream_drops", unknown)[1] == ROUNDS
    for counter in ("stream_in", "stream_out"):
        assert api.counter_read(counter, 1) == model.counter_read(counter, 1), counter
    assert proc.proc.poll() is None, "the switch process died"
    assert api.register_read("event_count", 1) == ROUNDS       # and still answers its control port
