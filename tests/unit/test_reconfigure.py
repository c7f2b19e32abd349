"""Reconfiguration at run time: the pipeline model against the epoch-aware oracle.

Streams change their window spec and operator list while events flow
(docs/windows.md, "Reconfiguration"; docs/p4.md, "Reconfiguration").  The
controller installs the new configuration in the bank not in force and arms
it; the model must flip at exactly the boundary the definition gives, and
send every event to exactly the operators the oracle names.
"""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import topologies
from support.changes import HOSTS, next_timestamp, random_change, random_window
from testbed.dataplane.contract import DROP_CODES, NOT_FIXED, UNKNOWN_STREAM, drop_counter_index
from testbed.dataplane.control import ChangeRefused, ChangeTimeout, Controller
from testbed.dataplane.model import PreviousParams, SplitterPipeline, old_windows_after
from testbed.dataplane.wire import WINDOWS_STRUCT, copy_windows
from testbed.semantics.plan import TRANSITION, SplitterPlan
from testbed.semantics.topology import WindowSpec
from testbed.semantics.windows import windows_per_position


class Harness:
    """A model switch with a plan installed, the controller and, beside it, the oracle."""

    def __init__(self, stream_data):
        self.topo = topologies.build([stream_data], ["h1", *HOSTS])
        self.plan = SplitterPlan(self.topo)
        self.pipe = SplitterPipeline()
        self.ctl = Controller(self.pipe)
        self.ctl.install(self.plan)
        self.stream = self.topo.streams[0]
        self.oracle = self.stream.oracle()
        self.hosts = self.plan.host_of_port()
        self.pending = None        # (change, where the oracle says it takes effect)
        self.applied = []

    def change(self, new):
        change = self.ctl.change(self.plan, new, timeout=0)
        start = self.oracle.arm(self.stream.config(new.window, new.operators))
        self.pending = (change, start + (self.oracle.origin or 0))
        self.stream = new

    def event(self, seq, ts):
        d = self.pipe.ingress(self.stream.id, ts)
        got = (sorted(self.hosts[r.instance] for r in self.pipe.replicate(d)), d.drop)
        v = self.oracle.step(seq, ts)
        want = (sorted(v.operators), v.dropped)
        if got == want:
            # Each copy's Windows header names exactly the windows of the
            # event that the oracle gives its operator, across epochs.
            for replica in self.pipe.replicate(d):
                port = replica.instance
                fields = WINDOWS_STRUCT.unpack(self.pipe._windows_header(self.stream.id, replica, d.copy))
                carried = sorted([*copy_windows(fields[4], fields[5], fields[6]),
                                  *copy_windows(fields[0], fields[1], fields[2])])
                owned = sorted(w for w in v.windows if self.oracle.owner(w) == self.hosts[port])
                assert carried == owned, f"event {seq} ts={ts} at {self.hosts[port]}: header {fields}"
        if self.pending and not self.pipe.register_read("armed", self.stream.id):
            change, boundary = self.pending
            assert self.pipe.register_read("boundary", self.stream.id) == boundary, "boundary"
            self.applied.append(boundary)
            self.pending = None
        return got, want


def drive(rng, kind, n_events=1500, change_rate=0.02):
    sid = 3
    window = random_window(rng, kind)
    if kind == "time" and rng.random() < 0.3:
        window["origin"] = rng.randint(0, 20)
    h = Harness(topologies.stream(sid, window, rng.sample(HOSTS, rng.randint(1, len(HOSTS)))))
    newest = window.get("origin", 0) + rng.randint(0, 5)
    for seq in range(n_events):
        if seq and rng.random() < change_rate and h.ctl.settled(sid):
            h.change(random_change(rng, h.stream))
        ts, newest = next_timestamp(rng, kind, h.stream.window.lateness, newest)
        got, want = h.event(seq, ts)
        assert got == want, f"event {seq} ts={ts}: switch {got}, oracle {want}; epochs {h.oracle.epochs}"
    return h


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("kind", ["count", "time"])
def test_changes_while_events_flow_match_the_oracle(kind, seed):
    h = drive(random.Random(seed * 7919 + len(kind)), kind)
    assert len(h.applied) >= 3, "the run should have gone through several changes"


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["count", "time"]))
def test_changes_hypothesis(seed, kind):
    drive(random.Random(seed), kind, n_events=300, change_rate=0.05)


def test_worked_example_count():
    """docs/windows.md: n=3, δ=1 over A, B, C, D; after k = 5 a change to X, Y."""
    stream = topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4", "h5"])
    h = Harness(stream)
    for k in range(6):
        h.event(k, k)
    h.change(h.stream.model_copy(update={"operators": ["h6", "h7"]}))
    rows = [h.event(k, k) for k in range(6, 9)]
    assert [got for got, _ in rows] == [(["h2", "h3", "h6"], None), (["h3", "h6", "h7"], None),
                                        (["h6", "h7"], None)]
    assert h.applied == [6]
    assert h.pipe.register_read("in_transition", 1) == 0


def test_worked_example_time():
    """docs/windows.md: Δ=10, τ=5, L=10 over a, b; at t=12 a change to Δ=6, τ=3 over c, d, e."""
    stream = topologies.stream(1, {"kind": "time", "size": 10, "slide": 5, "origin": 0, "lateness": 10},
                               ["h2", "h3"])
    h = Harness(stream)
    h.event(0, 12)
    new_window = WindowSpec(kind="time", size=6, slide=3, origin=0, lateness=10)
    h.change(h.stream.model_copy(update={"window": new_window, "operators": ["h4", "h5", "h6"]}))
    rows = [h.event(seq, ts) for seq, ts in ((1, 16), (2, 11), (3, 20))]
    for got, want in rows:
        assert got == want
    assert [got[0] for got, _ in rows] == [["h2", "h4"], ["h2", "h3"], ["h4", "h5"]]
    assert h.applied == [15]


def test_other_streams_are_untouched():
    """A change installs into one stream's other bank: the other stream's entries and state stay."""
    streams = [topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3"]),
               topologies.stream(2, {"kind": "count", "size": 4, "slide": 2}, ["h4", "h5", "h6"])]
    topo = topologies.build(streams, ["h1", *HOSTS])
    plan = SplitterPlan(topo)
    pipe = SplitterPipeline()
    ctl = Controller(pipe)
    ctl.install(plan)
    for k in range(10):
        pipe.ingress(1, k)
        pipe.ingress(2, k)
    before = {t: [e for e in pipe.table_entries(t) if e["match"][0] == 2] for t in ("window_spec", "unicast")}
    state = {name: pipe.register_read(name, 2) for name in ("event_count", "slide_start", "newest_op", "begun")}
    ctl.change(plan, topo.streams[0].model_copy(update={"operators": ["h7"]}))
    for k in range(10, 14):
        pipe.ingress(1, k)
    assert before == {t: [e for e in pipe.table_entries(t) if e["match"][0] == 2] for t in ("window_spec", "unicast")}
    assert state == {name: pipe.register_read(name, 2) for name in state}


def test_a_change_waits_for_the_previous_transition():
    stream = topologies.stream(1, {"kind": "count", "size": 4, "slide": 1}, ["h2", "h3"])
    h = Harness(stream)
    for k in range(5):
        h.event(k, k)
    h.change(h.stream.model_copy(update={"operators": ["h4"]}))
    with pytest.raises(ChangeTimeout, match="still under way"):
        h.ctl.change(h.plan, h.stream.model_copy(update={"operators": ["h5"]}), timeout=0)
    for k in range(5, 9):       # boundary at 5, old windows end at 5 - 1 + 4 = 8
        h.event(k, k)
    assert h.ctl.settled(1)


def test_no_event_is_lost_in_planned_changes():
    """Across many changes the switch drops only what the definition drops
    (events in gaps between windows); none for want of a table entry."""
    h = drive(random.Random(5), "count", n_events=3000, change_rate=0.03)
    drops = {reason: h.pipe.counter_read("stream_drops", drop_counter_index(3, reason))[1] for reason in DROP_CODES}
    assert drops[UNKNOWN_STREAM] == 0 and len(h.applied) >= 10
    assert h.pipe.counter_read("stream_in", 3)[1] == 3000 - sum(drops.values())


@given(size=st.integers(1, 30), slide=st.integers(1, 30), begun=st.integers(1, 40), d=st.integers(0, 80))
def test_old_windows_after_the_boundary_by_brute_force(size, slide, begun, d):
    full, extra = windows_per_position(size, slide)
    prev = PreviousParams(slide, full, extra, size, 1, 0)
    boundary = 1000 * slide
    starts = [boundary - i * slide for i in range(1, begun + 1)]
    expected = sum(1 for s in starts if s <= boundary + d < s + size)
    assert old_windows_after(d, prev, begun) == expected


class FixedBuild(SplitterPipeline):
    """The model where it stands for bmv2's build without changes mid-stream,
    which has no transition tables: the control plane asks, as it asks bmv2."""

    def takes_changes(self) -> bool:
        return False

    def held_tables(self) -> list[str]:
        return [t for t in super().held_tables() if t not in TRANSITION and t not in NOT_FIXED]

    def table_clear(self, table: str) -> None:
        assert table not in TRANSITION, f"{table} is not in the build without changes"
        super().table_clear(table)


def test_a_switch_without_changes_refuses_one_and_keeps_its_configuration():
    topo = topologies.build([topologies.stream(3, {"kind": "count", "size": 4, "slide": 2}, ["h2", "h3"])],
                            ["h1", *HOSTS])
    plan = SplitterPlan(topo)
    pipe = FixedBuild()
    ctl = Controller(pipe)
    ctl.install(plan)
    before = {table: pipe.table_entries(table) for table in ("window_spec", "operator_count")}
    new = topo.streams[0].model_copy(update={"operators": ["h4"]})
    with pytest.raises(ChangeRefused, match="stream 3: the switch runs the build without changes"):
        ctl.change(plan, new, timeout=0)
    assert {table: pipe.table_entries(table) for table in before} == before
    assert pipe.register_read("armed", 3) == 0
    # Clearing it leaves the tables it lacks alone.
    ctl.clear()
    assert all(not pipe.table_entries(table) for table in before)
