"""The plan, executed by the pipeline model, against the oracle."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import topologies
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline, shift_subtract_divmod
from testbed.semantics.plan import SplitterPlan, destination_pairs
from testbed.semantics.windows import MAX_EVENT_WINDOWS, MAX_LATE_SLIDES


def topo_for(streams, n_hosts):
    return topologies.build(streams, n_hosts)


def run_plan(topo, events_by_stream):
    """Feed events through a pipeline holding the installed plan; operator sets out."""
    plan = SplitterPlan(topo)
    pipe = SplitterPipeline()
    Controller(pipe).install(plan)
    operators = plan.operator_of_id()
    out = []
    for sid, seq, ts in events_by_stream:
        d = pipe.ingress(sid, ts)
        out.append((sid, seq, sorted(operators[r.instance] for r in pipe.replicate(d)), d.drop))
    return out


def oracle_sets(topo, events):
    oracles = {s.id: s.oracle() for s in topo.streams}
    res = []
    for sid, seq, ts in events:
        v = oracles[sid].step(seq, ts)
        res.append((sid, seq, sorted(v.operators), v.dropped))
    return res


def random_stream(rng, sid, kind, n_hosts):
    ops = rng.sample([f"h{i}" for i in range(2, n_hosts + 1)], rng.randint(1, n_hosts - 1))
    size, slide = rng.randint(1, 40), rng.randint(1, 40)
    window = {"kind": kind, "size": size, "slide": slide}
    if kind == "time" and rng.random() < 0.3:
        window["origin"] = rng.randint(0, 50)
    if kind == "time" and rng.random() < 0.5:
        window["lateness"] = rng.randint(0, MAX_LATE_SLIDES * slide)
    return {"id": sid, "source": "h1", "window": window, "operators": ops, "events": 1, "rate": 1}


@pytest.mark.parametrize("seed", range(12))
def test_executor_matches_oracle_on_random_specs(seed):
    rng = random.Random(seed)
    n_hosts = 9
    streams = [random_stream(rng, sid, rng.choice(["count", "time"]), n_hosts) for sid in range(3)]
    topo = topo_for(streams, n_hosts)
    events, ts = [], {0: 0, 1: 0, 2: 0}
    for seq in range(10_000):
        sid = rng.randrange(3)
        # mostly small steps, sometimes a long gap in time, now and then a step back
        # (some within the stream's lateness, some beyond it)
        r = rng.random()
        step = (rng.randint(0, 3) if r < 0.88 else rng.randint(50, 5000) if r < 0.97
                else -rng.randint(1, 5) if r < 0.98 else -rng.randint(1, 200))
        ts[sid] = max(0, ts[sid] + step)
        events.append((sid, seq, ts[sid]))
    assert run_plan(topo, events) == oracle_sets(topo, events)


@given(size=st.integers(1, 30), slide=st.integers(1, 30), n_ops=st.integers(1, 7),
       kind=st.sampled_from(["count", "time"]), steps=st.lists(st.integers(-120, 200), min_size=1, max_size=150),
       late_fraction=st.floats(0, 1), origin=st.one_of(st.none(), st.integers(0, 400)))
@settings(max_examples=200, deadline=None)
def test_executor_matches_oracle_property(size, slide, n_ops, kind, steps, late_fraction, origin):
    window = {"kind": kind, "size": size, "slide": slide}
    if kind == "time":
        window.update(lateness=int(late_fraction * MAX_LATE_SLIDES * slide), origin=origin)
    assert_model_is_oracle_on_steps(window, n_ops, steps)


@given(slide=st.integers(1, 30), windows=st.integers(1, MAX_EVENT_WINDOWS), short=st.integers(0, 29),
       n_ops=st.integers(1, 7), steps=st.lists(st.integers(-40, 200), min_size=1, max_size=150),
       origin=st.one_of(st.none(), st.integers(0, 400)))
@settings(max_examples=200, deadline=None)
def test_executor_matches_oracle_with_event_starts(slide, windows, short, n_ops, steps, origin):
    """starts: event (S4's rule) on the model, against the oracle: gaps of many
    slides, events that go back in time (too late, since no lateness), a
    size that is not a multiple of the slide, and sizes below the slide."""
    size = max(1, windows * slide - short % slide)
    assert_model_is_oracle_on_steps({"kind": "time", "size": size, "slide": slide, "origin": origin,
                                     "starts": "event"}, n_ops, steps)


def assert_model_is_oracle_on_steps(window: dict, n_ops: int, steps: list[int]) -> None:
    """One stream of ``window`` over ``n_ops`` operators, its timestamps ``steps``
    apart from 300 (never below 0): the model's copies are the oracle's."""
    ops = [f"h{i}" for i in range(2, 2 + n_ops)]
    topo = topo_for([{"id": 7, "source": "h1", "window": window, "operators": ops, "events": 1, "rate": 1}],
                    n_ops + 1)
    t, events = 300, []
    for seq, s in enumerate(steps):
        t = max(0, t + s)
        events.append((7, seq, t))
    assert run_plan(topo, events) == oracle_sets(topo, events)


def test_s4_table_one_groups():
    """n=4, d=1, N=5: start-up groups {0,1}, {0,1,2}, then five rotations of four."""
    ops = [f"h{i}" for i in range(2, 7)]
    topo = topo_for([{"id": 0x123, "source": "h1", "window": {"kind": "count", "size": 4, "slide": 1},
                      "operators": ops, "events": 1, "rate": 1}], 6)
    plan = SplitterPlan(topo)
    sets = sorted(tuple(g.hosts) for g in plan.groups)
    assert len(sets) == 2 + 5
    assert ("h2", "h3") in sets and ("h2", "h3", "h4") in sets
    assert destination_pairs(4, 1, 5) == [(0, 1), (0, 4), (1, 2), (1, 4), (2, 3), (2, 4), (3, 4), (4, 4)]


def test_tumbling_plan_has_no_groups():
    topo = topo_for([{"id": 1, "source": "h1", "window": {"kind": "count", "size": 10, "slide": 10},
                      "operators": ["h2", "h3"], "events": 1, "rate": 1}], 3)
    plan = SplitterPlan(topo)
    assert plan.groups == []
    assert plan.cost()["unicast"] == 2


def test_groups_are_shared_between_streams():
    s = lambda sid: {"id": sid, "source": "h1", "window": {"kind": "count", "size": 3, "slide": 1},
                     "operators": ["h2", "h3", "h4"], "events": 1, "rate": 1}
    plan = SplitterPlan(topo_for([s(1), s(2)], 4))
    assert len(plan.groups) == len(plan.streams[1].groups) == len(plan.streams[2].groups)


@given(d=st.integers(0, 2**64 - 1), v=st.integers(1, 2**64 - 1))
def test_shift_subtract_divmod_is_divmod(d, v):
    assert shift_subtract_divmod(d, v) == divmod(d, v)
