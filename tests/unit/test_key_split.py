"""Splitting by key: the hash, the oracle, the plan and the embedded model agree.

A stream with ``split: key`` sends every event to operator crc32(key) mod N
with all of its windows (docs/windows.md, "Splitting by key").  The model
is held to the oracle here; tests/integration/test_bmv2.py holds bmv2 to
both, byte for byte.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.topologies import build, stream
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import EVENT_LEN, EVENT_OFFSET, WINDOWS_STRUCT, FrameTemplate, copy_windows
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.splitting import key_hash, key_hashes, key_operator, key_owners
from testbed.semantics.topology import SPLITTER_IP, SPLITTER_MAC, TopologyError
from testbed.semantics.windows import MAX_LATE_SLIDES

pytestmark = pytest.mark.unit

WINDOWS_OFFSET = EVENT_OFFSET + EVENT_LEN


@given(keys=st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=50))
def test_key_hash_is_crc32_of_the_wire_bytes_and_vectorized_the_same(keys):
    want = [zlib.crc32((k & (2**64 - 1)).to_bytes(8, "big")) for k in keys]
    assert [key_hash(k) for k in keys] == want
    assert key_hashes(np.array(keys, dtype=np.int64)).tolist() == want


def test_key_hash_of_a_known_value():
    # CRC-32 of eight zero bytes, fixed by the IEEE polynomial (bmv2's crc32 too).
    assert key_hash(0) == 0x6522DF69


def test_key_owners_name_the_operator_of_each_key():
    ops = ["a", "b", "c"]
    keys = np.arange(-20, 20)
    assert key_owners(keys, ops).tolist() == [ops[key_operator(int(k), 3)] for k in keys]


def keyed_topology(window: dict, n_ops: int, **extra):
    ops = [f"h{i}" for i in range(2, 2 + n_ops)]
    return build([stream(7, window, ops, split="key", query={"kind": "count_by_key"}, **extra)], n_ops + 1)


@given(size=st.integers(1, 30), slide=st.integers(1, 30), n_ops=st.integers(1, 7),
       kind=st.sampled_from(["count", "time"]), steps=st.lists(st.integers(-60, 200), min_size=1, max_size=120),
       keys=st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=120), late_fraction=st.floats(0, 1))
@settings(max_examples=150, deadline=None)
def test_model_frames_match_the_oracle_split_by_key(size, slide, n_ops, kind, steps, keys, late_fraction):
    """Per event: one copy, at the key's operator, whose Windows header names
    every window the oracle gives the event; drops as the oracle says."""
    window = {"kind": kind, "size": size, "slide": slide}
    if kind == "time":
        window["lateness"] = int(late_fraction * MAX_LATE_SLIDES * slide)
    topo = keyed_topology(window, n_ops)
    plan = SplitterPlan(topo)
    pipe = SplitterPipeline()
    Controller(pipe).install(plan)
    oracle = topo.streams[0].oracle()
    hosts = plan.host_of_port()
    ip, mac = plan.addresses["h1"]
    template = FrameTemplate(mac, SPLITTER_MAC, ip, SPLITTER_IP, 7)
    t = 300
    for seq, step in enumerate(steps):
        t = max(0, t + step)
        key = keys[seq % len(keys)]
        out = pipe.process(template.frame(seq, t, key, 1))
        verdict = oracle.step(seq, t, key)
        assert [hosts[port] for port, _ in out] == list(verdict.operators)
        for _port, frame in out:
            window, span, stride, _epoch, _ow, old_span, _os, _r = WINDOWS_STRUCT.unpack_from(frame, WINDOWS_OFFSET)
            assert old_span == 0
            assert list(copy_windows(window, span, stride)) == list(verdict.windows)


def test_plan_of_a_key_split_stream_has_no_groups():
    topo = keyed_topology({"kind": "count", "size": 5, "slide": 1}, 4)
    plan = SplitterPlan(topo)
    assert plan.groups == []
    actions = {(e.table, e.action) for e in plan.entries()}
    assert ("operator_count", "split_by_key") in actions
    assert ("operator_count", "set_operator_count") not in actions
    assert plan.cost()["unicast"] == 4


def test_a_key_split_stream_costs_one_copy_per_event():
    window = {"kind": "count", "size": 5, "slide": 1}
    keyed = keyed_topology(window, 4, events=1000).streams[0]
    by_windows = build([stream(7, window, ["h2", "h3", "h4", "h5"], events=1000)], 5).streams[0]
    assert (keyed.copies(), by_windows.copies()) == (1000, 4000)


def test_split_by_key_needs_a_keyed_query():
    with pytest.raises(TopologyError, match=r"streams\[0\]\.split: .*group by key"):
        build([stream(1, {"kind": "count", "size": 2, "slide": 1}, ["h2"], split="key")], 2)


def test_a_key_split_stream_refuses_changes_elastic_and_failover():
    s = stream(1, {"kind": "count", "size": 2, "slide": 1}, ["h2", "h3"], split="key",
               query={"kind": "count_by_key"}, events=100)
    with pytest.raises(TopologyError, match=r"schedule\[0\]\.change.*split by key"):
        build([s], 4, schedule=[{"after": {"stream": 1, "events": 10}, "change": {"stream": 1, "operators": ["h2"]}}])
    with pytest.raises(TopologyError, match=r"adapt\.elastic\[0\]\.stream: stream 1 is split by key"):
        build([s], 4, adapt={"elastic": [{"stream": 1, "pool": ["h2", "h3"], "max": 2, "high": 10, "low": 1}]})
    with pytest.raises(TopologyError, match=r"adapt\.failover: stream 1 is split by key"):
        build([s], 4, adapt={"failover": True})


def test_the_oracle_refuses_to_arm_a_change_on_a_key_split_stream():
    topo = keyed_topology({"kind": "count", "size": 2, "slide": 1}, 2)
    s = topo.streams[0]
    oracle = s.oracle()
    with pytest.raises(ValueError, match="split by key"):
        oracle.arm(s.config())
