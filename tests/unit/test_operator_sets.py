"""Operator sets (docs/p4.md, "Operator sets"): streams dealt over the same list
of operators share its unicast, multicast, operator_position and
operator_back entries.

What must hold: the plan installs each set once, however many streams name
it; every stream's copies still go to exactly the operators the oracle gives
it, with exactly its windows in their headers; and a change that names a
set, new or old, adds only what the switch lacks and leaves the other
streams' routes alone.
"""
from __future__ import annotations

import random
import socket

import pytest

from support import topologies
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import WINDOWS_STRUCT, copy_windows, event_frame
from testbed.semantics.limits import WINDOWS_BACK_UNIT
from testbed.semantics.plan import MULTICAST, OPERATOR_BACK, OPERATOR_COUNT, OPERATOR_POSITION, UNICAST, SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, WindowSpec, parse_topology

pytestmark = pytest.mark.unit

SLIDING = {"kind": "count", "size": 6, "slide": 2}
TUMBLING = {"kind": "count", "size": 3, "slide": 3}
TIMED = {"kind": "time", "size": 8, "slide": 4}
ABC = ["h2", "h3", "h4"]


def three_streams():
    """Two streams over one list, in different window kinds, and one over another list."""
    return parse_topology(topologies.topology_data([
        topologies.stream(1, SLIDING, ABC, events=200),
        topologies.stream(2, TIMED, ABC, events=200),
        topologies.stream(3, TUMBLING, ["h4", "h3"], events=200),
    ], hosts=6))


def by_table(entries):
    out: dict[str, list] = {}
    for e in entries:
        out.setdefault(e.table, []).append(e)
    return out


def test_streams_over_one_list_share_its_entries():
    plan = SplitterPlan(three_streams())
    tables = by_table(plan.entries())
    assert len(plan.opsets) == 2
    ids = {s.id: plan.streams[s.id].opset.id for s in plan.topology.streams}
    assert ids[1] == ids[2] != ids[3]
    # each stream's own entries name its set; the set's entries are there once
    assert {e.match[0]: e.params for e in tables[OPERATOR_COUNT]} == {1: (3, ids[1]), 2: (3, ids[1]), 3: (2, ids[3])}
    assert sorted(e.match for e in tables[UNICAST]) == sorted(
        [(ids[1], i) for i in range(3)] + [(ids[3], i) for i in range(2)])
    assert len(tables[OPERATOR_POSITION]) == 5
    multicast = [e.match for e in tables[MULTICAST]]
    assert len(multicast) == len(set(multicast))
    # the set holds the union of the pairs its streams reach, and nothing more
    reached = {pair for sid in (1, 2) for pair in plan.streams[sid].opset.multicast}
    assert {(w, c) for s, w, c in multicast if s == ids[1]} == reached
    # a stream's own view (``testbed plan``) is still all it looks up
    assert {e.table for e in plan.streams[2].all_entries()} >= {UNICAST, OPERATOR_POSITION, OPERATOR_COUNT}


def test_a_thousand_streams_over_one_list_cost_two_entries_each_and_one_set():
    streams = [topologies.stream(sid, SLIDING if sid % 2 else TIMED, ABC) for sid in range(1, 1001)]
    plan = SplitterPlan(parse_topology(topologies.topology_data(streams, hosts=5)))
    cost = plan.cost()
    assert cost["window_spec"] == cost["operator_count"] == 1000
    assert cost[UNICAST] == cost[OPERATOR_POSITION] == 3
    assert cost[MULTICAST] == len(next(iter(plan.opsets.values())).multicast) <= 3 * 3


def test_operator_back_says_where_each_operator_of_a_group_stands():
    """Per operator set: for every newest operator w, the operators 0 ..
    min(C, N) - 1 windows back from it, each with the back that its position
    gives, (w - position) mod N, in the header's place (docs/windows.md)."""
    plan = SplitterPlan(three_streams())
    positions = {e.match: e.params[0] for e in by_table(plan.entries())[OPERATOR_POSITION]}
    egress = {e.match: e.params for e in plan.egress}
    backs = by_table(plan.entries())[OPERATOR_BACK]
    for opset in plan.opsets.values():
        n = len(opset.operators)
        # sliding 6/2 and time 8/4 over ABC: C = 3 and 2, so 3 back; tumbling 3/3 over two: 1
        most = 3 if n == 3 else 1
        mine = [e for e in backs if e.match[0] == opset.id]
        back_of = {e.match: e.params[3] // WINDOWS_BACK_UNIT if len(e.params) == 4 else 0 for e in mine}
        assert sorted((match[1], back) for match, back in back_of.items()) == sorted(
            (w, back) for w in range(n) for back in range(min(most, n)))
        for e in mine:
            _opset, newest, port, rid = e.match
            back = back_of[e.match]
            # the newest's operator keeps the header as ingress wrote it; the others move it back
            assert (e.action, e.params[3:]) == (("rewrite_back", (back * WINDOWS_BACK_UNIT,)) if back else
                                                ("rewrite_dst", ()))
            assert (newest - positions[(opset.id, port, rid)]) % n == back
            assert e.params[:3] == egress[(port, rid)]    # addressed as egress_rewrite would


def test_a_multicast_copy_without_its_operator_back_entry_carries_none_of_its_windows():
    """The model reads operator_back for a single event's copies: the table
    decides, not a computation beside it."""
    switch = Switch(three_streams())
    for k in range(8):
        switch.send(1, k)
    opset = switch.plan.streams[1].opset.id
    doomed = next(e for e in switch.pipe.table_entries(OPERATOR_BACK)
                  if e["match"][0] == opset and e["params"][3:] == [WINDOWS_BACK_UNIT])
    switch.pipe.table_delete(OPERATOR_BACK, doomed["handle"])
    newest, port = doomed["match"][1], doomed["match"][2]
    seq = 8
    while True:     # the next event whose newest window is that operator's and that lies in two or more
        frames = switch.pipe.process(frame_of(switch.plan, 1, seq, seq))
        copies = {p: WINDOWS_STRUCT.unpack_from(f, 14 + 20 + 8 + 32) for p, f in frames}
        seq += 1
        if len(copies) >= 2 and switch.pipe.register_read("newest_op", 1) == newest:
            break
        assert seq < 100
    assert copies[port][1] == 0 and all(fields[1] > 0 for p, fields in copies.items() if p != port)


def frame_of(plan, sid: int, seq: int, ts: int) -> bytes:
    ip, mac = plan.addresses["h1"]
    return event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, sid, seq, ts)


class Switch:
    """The model switch with a plan installed, and each stream's oracle beside it."""

    def __init__(self, topo):
        self.topo = topo
        self.plan = SplitterPlan(topo)
        self.pipe = SplitterPipeline()
        self.ctl = Controller(self.pipe)
        self.ctl.install(self.plan)
        self.by_ip = {inst.ip: name for name, inst in self.plan.instances.items()}
        self.oracles = {s.id: s.oracle() for s in topo.streams}
        self.seq = {s.id: 0 for s in topo.streams}

    def send(self, sid: int, ts: int) -> None:
        """One event of stream ``sid``: its copies must be the oracle's, headers included."""
        seq = self.seq[sid]
        self.seq[sid] += 1
        oracle = self.oracles[sid]
        verdict = oracle.step(seq, ts)
        got = {self.by_ip[socket.inet_ntoa(frame[30:34])]: frame
               for _port, frame in self.pipe.process(frame_of(self.plan, sid, seq, ts))}
        assert sorted(got) == sorted(verdict.operators), (sid, seq)
        for name, frame in got.items():
            fields = WINDOWS_STRUCT.unpack_from(frame, 14 + 20 + 8 + 32)
            carried = sorted([*copy_windows(fields[0], fields[1], fields[2]),
                              *copy_windows(fields[4], fields[5], fields[6])])
            assert carried == sorted(w for w in verdict.windows if oracle.owner(w) == name), (sid, seq, name)


@pytest.mark.parametrize("seed", range(3))
def test_interleaved_streams_over_a_shared_set_match_their_oracles(seed):
    rng = random.Random(seed)
    switch = Switch(three_streams())
    clock = {1: 0, 2: 0, 3: 0}
    for _ in range(600):
        sid = rng.choice([1, 2, 3])
        clock[sid] += rng.randint(0, 3) if sid == 2 else 1
        switch.send(sid, clock[sid])


def test_a_change_to_a_known_list_adds_no_set_entries_and_leaves_the_others_routes():
    switch = Switch(three_streams())
    for k in range(12):
        for sid in (1, 2, 3):
            switch.send(sid, k)
    held = {t: switch.pipe.table_entries(t) for t in (UNICAST, MULTICAST, OPERATOR_POSITION)}
    stream = switch.topo.streams[0]
    new = stream.model_copy(update={"operators": ["h4", "h3"], "window": WindowSpec.model_validate(TUMBLING)})
    switch.ctl.change(switch.plan, new, timeout=0)
    switch.oracles[1].arm(stream.config(new.window, new.operators))
    # stream 3's set already routes every pair of the new configuration
    assert {t: switch.pipe.table_entries(t) for t in held} == held
    for k in range(12, 40):
        for sid in (1, 2, 3):
            switch.send(sid, k)
    assert not switch.pipe.register_read("armed", 1), "the change never took effect"


def test_a_change_to_a_new_list_adds_its_set_once():
    switch = Switch(three_streams())
    for k in range(6):
        switch.send(1, k)
    stream = switch.topo.streams[0]
    new = stream.model_copy(update={"operators": ["h4", "h2"]})
    switch.ctl.change(switch.plan, new, timeout=0)
    switch.oracles[1].arm(stream.config(new.window, new.operators))
    unicast = switch.pipe.table_entries(UNICAST)
    assert len(unicast) == 3 + 2 + 2 and len(switch.plan.opsets) == 3
    for k in range(6, 40):
        switch.send(1, k)
        switch.send(2, k)
    # and back: the first list's set is still there, and nothing is added to it
    before = switch.pipe.table_entries(UNICAST)
    switch.ctl.change(switch.plan, stream, timeout=0)
    switch.oracles[1].arm(stream.config(stream.window, stream.operators))
    assert switch.pipe.table_entries(UNICAST) == before
    for k in range(40, 80):
        switch.send(1, k)
        switch.send(2, k)
