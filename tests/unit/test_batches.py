"""Batches (docs/wire.md, "Batches"): several events of a stream in one frame.

The definition is that the switch handles a batch's events as if they had
come one by one, in frame order, and that each operator gets, per batch, one
frame holding exactly its events, each with its Windows header.  So the
tests run the same events through two model switches, one frame per event
and in batches cut at random, with the same changes armed at the same
events, and hold the batched switch to the unbatched one (which the
reconfiguration tests hold to the oracle) event by event: same operators,
same Windows headers, same registers, same event counters.
"""
import random
import struct
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether

from support import topologies
from support.changes import HOSTS, next_timestamp, random_change, random_window
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.model.batches import Batches
from testbed.dataplane.wire import (
    BATCH_LEN,
    BATCH_STRUCT,
    EVENT_LEN,
    EVENT_OFFSET,
    EVENT_STRUCT,
    FLAG_WINDOWS,
    Batch,
    FrameTemplate,
    Windows,
    batch_count,
    batch_events,
    batch_frame,
    is_event_frame,
    parse_event,
    parse_windows,
)
from testbed.semantics.batching import plan_frames
from testbed.semantics.limits import MAX_BATCH
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, TopologyError

pytestmark = pytest.mark.unit

SID = 3


class Pair:
    """Two model switches with one plan: ``single`` takes a frame per event, ``batched`` a batch."""

    def __init__(self, stream_data):
        self.topo = topologies.build([stream_data], ["h1", *HOSTS])
        self.plan = SplitterPlan(self.topo)
        self.single, self.batched = SplitterPipeline(), SplitterPipeline()
        self.controllers = [Controller(self.single), Controller(self.batched)]
        for ctl in self.controllers:
            ctl.install(self.plan)
        self.stream = self.topo.streams[0]
        ip, mac = self.plan.addresses["h1"]
        self.template = FrameTemplate(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, SID)
        self.hosts = self.plan.host_of_port()
        self.changes = 0
        #: Changes whose boundary an event of a batch of two or more crossed.
        self.in_batch = 0

    def change(self, new) -> None:
        for ctl in self.controllers:
            ctl.change(self.plan, new, timeout=0)
        self.stream = new
        self.changes += 1

    def settled(self) -> bool:
        return all(ctl.settled(SID) for ctl in self.controllers)

    def send(self, events: list[tuple[int, int, int, int]]) -> None:
        """One batch through ``batched``, its events one by one through
        ``single``; the two must deliver the same copies of every event."""
        want = defaultdict(list)
        for seq, ts, key, value in events:
            for port, copy in self.single.process(self.template.frame(seq, ts, key, value)):
                want[parse_event(copy[EVENT_OFFSET:])].append((self.hosts[port], parse_windows(copy[EVENT_OFFSET:])))
        epoch = self.batched.registers["epoch"][SID]
        got = defaultdict(list)
        ports = []
        for port, copy in self.batched.process(self.template.batch(events)):
            ports.append(port)
            carried = batch_events(copy[EVENT_OFFSET:])
            assert carried, "a replica with no event leaves the switch"
            for fields, windows in carried:
                assert fields[1] & FLAG_WINDOWS
                got[(fields[0], *fields[2:])].append((self.hosts[port], windows))
        assert len(ports) == len(set(ports)), "one frame per operator and batch"
        assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}, events
        assert self.single.registers == self.batched.registers
        assert self.event_counts(self.single) == self.event_counts(self.batched)
        self.in_batch += len(events) > 1 and self.batched.registers["epoch"][SID] != epoch

    @staticmethod
    def event_counts(pipe: SplitterPipeline) -> dict:
        """The counters' packet counts (a batch counts its frame's bytes once per event)."""
        cells = {name: values.items() if isinstance(values, dict) else enumerate(values)
                 for name, values in pipe.counters.items()}
        return {name: {i: packets for i, (_bytes, packets) in items if packets} for name, items in cells.items()}


def drive(rng, kind, split="windows", n_events=600, change_rate=0.25, max_batch=MAX_BATCH, window=None):
    """Random batches of a random stream (or of ``window``), with changes
    armed between batches at ``change_rate`` per batch whenever the previous
    one is over."""
    if window is None:
        window = random_window(rng, kind)
        if kind == "time" and rng.random() < 0.3:
            window["origin"] = rng.randint(0, 20)
    data = topologies.stream(SID, window, rng.sample(HOSTS, rng.randint(1, len(HOSTS))))
    data["batch"] = {"events": max_batch, "max_delay": 0.01}
    if split == "key":
        data.update(split="key", query={"kind": "count_by_key"})
    pair = Pair(data)
    newest = window.get("origin", 0) + rng.randint(0, 5)
    seq = 0
    while seq < n_events:
        if split == "windows" and seq and rng.random() < change_rate and pair.settled():
            pair.change(random_change(rng, pair.stream))
        events = []
        for _ in range(rng.randint(1, max_batch)):
            ts, newest = next_timestamp(rng, kind, pair.stream.window.lateness, newest)
            events.append((seq, ts, rng.randint(0, 50), rng.randint(-100, 100)))
            seq += 1
        pair.send(events)
    return pair


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", ["count", "time"])
def test_a_batch_is_taken_as_its_events_one_by_one(kind, seed):
    pair = drive(random.Random(seed * 104729 + len(kind)), kind)
    assert pair.in_batch >= 3, "changes should have taken effect inside batches"


@pytest.mark.parametrize("window", [
    {"kind": "count", "size": 6, "slide": 6},
    {"kind": "count", "size": 5, "slide": 1},
    {"kind": "time", "size": 10, "slide": 10},
    {"kind": "time", "size": 10, "slide": 3},
    {"kind": "time", "size": 10, "slide": 10, "lateness": 10},
    {"kind": "time", "size": 10, "slide": 3, "lateness": 12},
], ids=["cbtw", "cbsw", "tbtw", "tbsw", "tbtw-late", "tbsw-late"])
def test_each_semantic_in_batches_with_changes(window):
    """The four semantics, with and without lateness, changes armed as events flow."""
    pair = drive(random.Random(7), window["kind"], n_events=1500, window=dict(window))
    assert pair.in_batch >= 3


@pytest.mark.parametrize("window", [
    {"kind": "count", "size": 100, "slide": 100},
    {"kind": "count", "size": 100, "slide": 50},
    {"kind": "count", "size": 40, "slide": 13},
    {"kind": "count", "size": 7, "slide": 30},
    {"kind": "time", "size": 200, "slide": 200},
    {"kind": "time", "size": 300, "slide": 100, "lateness": 40},
    {"kind": "time", "size": 90, "slide": 40, "lateness": 10},
], ids=["tumbling", "sliding", "sliding-extra", "gaps", "time-tumbling", "time-sliding-late", "time-extra-late"])
def test_a_batch_inside_one_slide_is_taken_at_once(window, monkeypatch):
    """A batch whose events share the first one's windows skips the
    per-event steps for the rest (p4/batches.p4, BATCH_WHOLE_SLIDE), and the
    switch still equals the one that takes a frame per event: copies, Windows
    headers, registers and counters.  Batches that cross a slide, the point
    where an event's window count drops, or a change's boundary go event by
    event, and so do time batches out of order or after a late first event;
    both kinds occur here."""
    whole = []
    take = Batches._whole_slide

    def spy(self, *args):
        whole.append(take(self, *args))
        return whole[-1]

    monkeypatch.setattr(Batches, "_whole_slide", spy)
    pair = drive(random.Random(11), "count", n_events=3000, change_rate=0.05, window=dict(window))
    assert sum(whole) >= 20 and whole.count(False) >= 20, (sum(whole), len(whole))
    assert pair.in_batch >= 1


@pytest.mark.parametrize("window", [
    {"kind": "count", "size": 100, "slide": 50},
    {"kind": "time", "size": 100, "slide": 50, "lateness": 12},
], ids=["count", "time"])
def test_a_whole_slide_is_what_taking_its_events_one_by_one_writes(window):
    """The same batches through the switch with and without the whole-slide
    step: the same frames, byte for byte, registers and counters; time
    batches with late events among them."""
    data = topologies.stream(SID, window, HOSTS[:4])
    pair = Pair({**data, "batch": {"events": MAX_BATCH, "max_delay": 0.01}})
    stepwise = SplitterPipeline()
    stepwise.whole_slides = False
    Controller(stepwise).install(pair.plan)
    rng, seq, newest = random.Random(5), 0, 0
    while seq < 2000:
        events = []
        for _ in range(rng.randint(1, MAX_BATCH)):
            ts, newest = next_timestamp(rng, window["kind"], window.get("lateness", 0), newest)
            events.append((seq, ts if window["kind"] == "time" else seq, rng.randint(0, 9), 0))
            seq += 1
        frame = pair.template.batch(events)
        assert pair.batched.process(frame) == stepwise.process(frame)
    assert pair.batched.registers == stepwise.registers and pair.batched.counters == stepwise.counters


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["count", "time"])
def test_a_batch_split_by_key_reaches_each_keys_operator(kind, seed):
    drive(random.Random(seed), kind, split="key")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["count", "time"]),
       max_batch=st.integers(1, MAX_BATCH))
def test_batches_hypothesis(seed, kind, max_batch):
    drive(random.Random(seed), kind, n_events=200, max_batch=max_batch)


def test_a_worked_batch_cbsw1():
    """cbsw1's windows (count, size 5, slide 1) over six operators: events 0..7
    in one frame.  Window j goes to operator j mod 6, and event i lies in
    windows max(0, i-4)..i, so operator 1 (windows 1 and 7) gets events 1..5
    and 7, and operator 5 (window 5) events 5..7."""
    ops = HOSTS[:6]
    pair = Pair({**topologies.stream(SID, {"kind": "count", "size": 5, "slide": 1}, ops),
                 "batch": {"events": 8, "max_delay": 0.01}})
    copies = {pair.hosts[port]: batch_events(copy[EVENT_OFFSET:])
              for port, copy in pair.batched.process(pair.template.batch([(i, i, 0, 0) for i in range(8)]))}
    assert sorted(copies) == sorted(ops)
    assert [f[2] for f, _w in copies[ops[1]]] == [1, 2, 3, 4, 5, 7]
    assert [f[2] for f, _w in copies[ops[5]]] == [5, 6, 7]
    # event 7 at operator 1: its newest window 7, among its five (3..7)
    assert copies[ops[1]][-1][1][:3] == (7, 5, 6)
    # event 5 at operator 1: window 1, the fifth and oldest of its windows
    assert copies[ops[1]][4][1][:3] == (1, 1, 6)


def test_the_scapy_layer_and_the_fast_path_build_the_same_batch():
    pair = Pair({**topologies.stream(SID, {"kind": "count", "size": 2, "slide": 2}, HOSTS[:2]),
                 "batch": {"events": 4, "max_delay": 0}})
    ip, mac = pair.plan.addresses["h1"]
    events = [(0, 5, 2**64 - 1, -(2**63)), (1, 6, 7, 2**63 - 1), (2, 7, 0, 0)]
    frame = batch_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, SID, events)
    assert frame == pair.template.batch(events)
    assert batch_count(frame) == 3
    dissected = Ether(frame)[Batch]
    assert [(e.seq, e.ts, e.key, e.value) for e in dissected.events] == events
    # a copy: each event followed by its Windows header
    (port, copy), = [c for c in pair.batched.process(frame) if pair.hosts[c[0]] == HOSTS[0]]
    layer = Ether(copy)[Batch]
    assert layer.flags == FLAG_WINDOWS and layer.count == 2
    assert [(e.seq, e[Windows].window, e[Windows].span, e[Windows].stride) for e in layer.events] == \
        [(0, 0, 1, 2), (1, 0, 1, 2)]


def malformed(frame: bytes) -> dict[str, bytes]:
    """Batches the switch must take as non-events."""
    count_at = EVENT_OFFSET
    udp_len_at = EVENT_OFFSET - 4

    def edit(at, fmt, value, data=frame):
        buf = bytearray(data)
        struct.pack_into(fmt, buf, at, value)
        return bytes(buf)

    n = batch_count(frame)
    other_stream = edit(EVENT_OFFSET + BATCH_LEN + EVENT_LEN, "!H", SID + 1)
    return {
        "count above the length": edit(count_at, "!H", n + 1),
        "count below the length": edit(count_at, "!H", n - 1),
        "count of zero": edit(udp_len_at, "!H", 8 + BATCH_LEN, data=edit(count_at, "!H", 0)),
        "count over the maximum": edit(count_at, "!H", MAX_BATCH + 1),
        "truncated event": frame[:-5],
        "events of two streams": other_stream,
    }


@pytest.mark.parametrize("what", ["count above the length", "count below the length", "count of zero",
                                  "count over the maximum", "truncated event", "events of two streams"])
def test_a_malformed_batch_is_not_an_event(what):
    pair = Pair({**topologies.stream(SID, {"kind": "count", "size": 3, "slide": 1}, HOSTS[:3]),
                 "batch": {"events": 4, "max_delay": 0}})
    frame = malformed(pair.template.batch([(i, i, 0, 0) for i in range(4)]))[what]
    assert pair.batched.process(frame) == []
    assert pair.batched.counters["non_event"][0][1] == 1
    assert not any(packets for _bytes, packets in pair.batched.counters["stream_in"].values())
    assert pair.batched.registers["initialized"][SID] == 0


def test_the_wire_refuses_what_the_switch_refuses():
    pair = Pair({**topologies.stream(SID, {"kind": "count", "size": 3, "slide": 1}, HOSTS[:3]),
                 "batch": {"events": 4, "max_delay": 0}})
    frame = pair.template.batch([(i, i, 0, 0) for i in range(4)])
    for what, bad in malformed(frame).items():
        if what != "events of two streams":
            assert batch_count(bad) == 0, what
    with pytest.raises(ValueError):
        batch_events(BATCH_STRUCT.pack(3, 0) + EVENT_STRUCT.pack(SID, 0, 0, 0, 0, 0))


@pytest.mark.parametrize("batch, message", [
    ({"events": 0, "max_delay": 0.01}, "batch.events"),
    ({"events": MAX_BATCH + 1, "max_delay": 0.01}, "batch.events"),
    ({"events": 4, "max_delay": -1}, "batch.max_delay"),
    ({"events": 4}, "batch.max_delay"),
])
def test_a_bad_batch_option_names_its_field(tmp_path, batch, message):
    from testbed.semantics.topology import load_topology
    data = topologies.topology_data([{**topologies.stream(SID, {"kind": "count", "size": 3, "slide": 1},
                                                          HOSTS[:2]), "batch": batch}], ["h1", *HOSTS])
    path = topologies.write(tmp_path / "t.yaml", data)
    with pytest.raises(TopologyError) as err:
        load_topology(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


@settings(max_examples=200, deadline=None)
@given(gaps=st.lists(st.floats(0, 0.02), min_size=1, max_size=200), k=st.integers(1, MAX_BATCH),
       max_delay=st.floats(0, 0.03), cuts=st.lists(st.integers(0, 210), max_size=4))
def test_frames_hold_the_definition(gaps, k, max_delay, cuts):
    """docs/wire.md, "Batches": at most k events, none waiting longer than
    max_delay, no frame across a point where the stream is held, and a frame
    closes early only when the next event would wait too long."""
    offsets = np.cumsum(gaps)
    plan = plan_frames(offsets, k, max_delay, cuts)
    starts, ends = plan.starts(), plan.ends
    assert ends[-1] == len(offsets) and (ends > starts).all() and (ends - starts <= k).all()
    assert all(not (a < c < b) for a, b in zip(starts, ends) for c in cuts)
    assert (np.diff(plan.due) >= 0).all()
    wait = plan.wait(offsets)
    assert (wait >= -1e-12).all() and (wait <= max_delay + 1e-9).all()
    for a, b, due in zip(starts, ends, plan.due):
        full, held = b - a == k, b == len(offsets) or b in cuts
        if not (full or held):
            assert offsets[b] - offsets[a] > max_delay and due == pytest.approx(offsets[a] + max_delay)
        else:
            assert due == offsets[b - 1]
    assert (plan.frame_of_event() == np.repeat(np.arange(len(ends)), ends - starts)).all()


def test_a_frame_of_one_event_leaves_as_a_plain_event():
    """docs/wire.md, "Batches": a batched stream's frame of one event is the
    event's plain frame, and every other frame a batch of its events in order."""
    from testbed.emulation.source import planned_frames
    tpl = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", SPLITTER_IP, 7)
    offsets = np.array([0.0, 0.001, 0.002, 0.5, 1.0, 1.001])      # 3 close, 1 alone, 2 close
    events = [(seq, 100 * seq, seq % 3, seq * seq) for seq in range(len(offsets))]
    plan = plan_frames(offsets, 4, 0.005)
    frames = planned_frames(tpl, events, plan)
    assert plan.ends.tolist() == [3, 4, 6] and len(frames) == 3
    assert frames[1] == tpl.frame(*events[3]) and batch_count(frames[1]) == 0
    assert parse_event(frames[1][EVENT_OFFSET:]) == (7, 3, 300, 0, 9) and is_event_frame(frames[1])
    assert [batch_count(f) for f in (frames[0], frames[2])] == [3, 2]
    assert frames[0] == tpl.batch(events[:3]) and frames[2] == tpl.batch(events[4:])


@pytest.mark.parametrize("events, sends", [(None, False), (1, False), (2, True), (MAX_BATCH, True)])
def test_only_a_stream_that_packs_events_asks_for_the_batches_build(events, sends):
    """A stream batched one event to a frame sends plain frames only, so its
    topology runs the plain build (docs/p4.md, "Two builds"); one stream that
    packs two or more is enough for the batches build."""
    batched = [] if events is None else [{"batch": {"events": events, "max_delay": 0.01}}]
    plain = topologies.stream(SID, {"kind": "count", "size": 3, "slide": 1}, HOSTS[:2])
    streams = [plain] + [{**topologies.stream(SID + 1, {"kind": "count", "size": 3, "slide": 1},
                                              HOSTS[:2]), **extra} for extra in batched]
    topo = topologies.build(streams, ["h1", *HOSTS])
    assert topo.sends_batches() is sends


@pytest.mark.parametrize("split", ["windows", "key"])
def test_a_stream_batched_one_event_to_a_frame_gets_the_unbatched_streams_tables(split):
    """It sends no batch, so it needs no range of operators beyond its
    events' own: the same entries and groups as the stream unbatched, where
    a stream that packs events gets every (newest, count) pair."""
    window = {"kind": "count", "size": 5, "slide": 5}

    def plan(batch):
        stream = {**topologies.stream(SID, window, HOSTS[:4]), "split": split}
        if split == "key":
            stream["query"] = {"kind": "count_by_key"}
        if batch:
            stream["batch"] = {"events": batch, "max_delay": 0.01}
        plan = SplitterPlan(topologies.build([stream], ["h1", *HOSTS]))
        return sorted(map(repr, plan.entries())), [g.ports for g in plan.groups]

    assert plan(1) == plan(None)
    assert len(plan(2)[0]) > len(plan(None)[0]) and len(plan(2)[1]) > len(plan(None)[1])
