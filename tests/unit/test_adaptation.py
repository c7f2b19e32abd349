"""Failover and elastic policies, driving the pipeline model."""
import time

import pytest

from support import topologies
from testbed.dataplane.adaptation import Adapter, Decision, ElasticPolicy, ElasticSettings, FailoverPolicy
from testbed.dataplane.control import Controller
from testbed.dataplane.liveness import Detection
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import FrameTemplate
from testbed.semantics.plan import SplitterPlan

HOSTS = ["h1"] + [f"h{i}" for i in range(2, 10)]


class Switch:
    """The model, a controller on it and a lock, since the adapter's thread
    polls registers while the test feeds frames."""

    def __init__(self, streams):
        self.topo = topologies.build(streams, HOSTS)
        self.plan = SplitterPlan(self.topo)
        self.pipe = SplitterPipeline()
        self.ctl = Controller(self.pipe)
        self.ctl.install(self.plan)
        self.adapter = Adapter(self.ctl, self.plan, timeout=5).start()
        self.host_of = self.plan.host_of_port()
        ip, mac = self.plan.addresses["h1"]
        self.templates = {s.id: FrameTemplate(mac, "02:00:00:00:00:fe", ip, "10.0.0.254", s.id)
                          for s in self.topo.streams}
        self.seq = {s.id: 0 for s in self.topo.streams}

    def send(self, sid, n=1):
        out = []
        for _ in range(n):
            seq = self.seq[sid]
            self.seq[sid] += 1
            copies = self.pipe.process(self.templates[sid].frame(seq, seq))
            out.append((seq, sorted(self.host_of[p] for p, _ in copies)))
        return out


def feed_until(switch, sid, done, limit=10_000):
    rows = []
    while not done() and len(rows) < limit:
        rows.extend(switch.send(sid))
        time.sleep(0.0005)
    return rows


def test_failover_removes_the_failed_operator_at_the_next_boundary():
    sw = Switch([topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4", "h5"]),
                 topologies.stream(2, {"kind": "count", "size": 2, "slide": 2}, ["h3", "h6"]),
                 topologies.stream(3, {"kind": "count", "size": 1, "slide": 1}, ["h7"])])
    policy = FailoverPolicy(sw.adapter, sw.host_of)
    sw.send(1, 20), sw.send(2, 20), sw.send(3, 5)
    policy.on_failure(Detection(sw.plan.ports["h3"], 0.0, 0.1))
    decisions = [d for d in sw.adapter.decisions]
    assert sorted(d.stream for d in decisions) == [1, 2]
    for sid in (1, 2):
        feed_until(sw, sid, lambda: all(d.change and d.change.boundary is not None
                                        for d in decisions if d.stream == sid))
    sw.adapter.drain()
    assert all(d.error is None for d in decisions)
    for sid in (1, 2):
        feed_until(sw, sid, lambda: sw.ctl.settled(sid))
        after = sw.send(sid, 30)
        assert all("h3" not in hosts for _, hosts in after)
        assert set().union(*(set(h) for _, h in after)) == set(sw.ctl.streams[sid].operators)
    assert sw.ctl.streams[3].operators == ["h7"]            # untouched
    sw.adapter.stop()


def test_a_recovered_operator_gets_its_place_back():
    """h3 fails and is removed from both its streams; when its heartbeats
    resume it returns to its old position in each, at their boundaries."""
    sw = Switch([topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4"]),
                 topologies.stream(2, {"kind": "count", "size": 2, "slide": 2}, ["h3", "h6"])])
    policy = FailoverPolicy(sw.adapter, sw.host_of)
    sw.send(1, 10), sw.send(2, 10)
    policy.on_failure(Detection(sw.plan.ports["h3"], 0.0, 0.1))
    for sid in (1, 2):
        feed_until(sw, sid, lambda: sw.ctl.settled(sid) and "h3" not in sw.ctl.streams[sid].operators)
    policy.on_recovery(sw.plan.ports["h3"])
    back = [d for d in sw.adapter.decisions if d.policy == "recovery"]
    assert sorted((d.stream, d.operators) for d in back) == [(1, ("h2", "h3", "h4")), (2, ("h3", "h6"))]
    # A source held for failover waits on exactly these, in the order they were asked for.
    removals = [d for d in sw.adapter.decisions if d.policy == "failover"]
    assert policy.act_since("failover", "h3", 0) == tuple(removals)
    assert policy.act_since("recovery", "h3", 0) == policy.act_since("recovery", "h3", 1) == tuple(back)
    assert policy.act_since("failover", "h3", 1) is None and policy.act_since("recovery", "h2", 0) is None
    for sid in (1, 2):
        feed_until(sw, sid, lambda: all(d.change and d.change.boundary is not None for d in back if d.stream == sid))
    sw.adapter.drain()
    assert all(d.error is None for d in back)
    for sid in (1, 2):
        feed_until(sw, sid, lambda: sw.ctl.settled(sid))
        assert "h3" in set().union(*(set(h) for _, h in sw.send(sid, 30)))
    policy.on_recovery(sw.plan.ports["h3"])                  # heard again without a failure: nothing to do
    assert len([d for d in sw.adapter.decisions if d.policy == "recovery"]) == 2
    sw.adapter.stop()


def test_a_change_that_reaches_its_boundary_after_the_wait_gave_up_is_still_recorded():
    """On a busy machine the stream may reach an armed change's boundary after
    the adapter stopped waiting for it; the data plane applies it all the same,
    so the record must say where, or the check holds the events to the old
    configuration."""
    sw = Switch([topologies.stream(1, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3", "h4"])])
    sw.adapter.stop()
    adapter = Adapter(sw.ctl, sw.plan, timeout=0.05).start()
    sw.send(1, 10)
    new = sw.ctl.streams[1].model_copy(update={"operators": ["h2", "h4"]})
    decision = adapter.submit(Decision("schedule", 1, ("h2", "h4"), "test"), new)
    adapter.drain()                                  # armed, then gave up: no event came
    assert decision.change is not None and decision.change.boundary is None and decision.error
    sw.send(1, 10)                                   # the stream goes on past the boundary
    adapter.stop()
    assert decision.error is None and decision.change.boundary == 10
    assert "h3" not in set().union(*(set(h) for _, h in sw.send(1, 10)))


def test_failover_of_a_streams_last_operator_is_reported_not_applied():
    sw = Switch([topologies.stream(1, {"kind": "count", "size": 1, "slide": 1}, ["h2"])])
    policy = FailoverPolicy(sw.adapter, sw.host_of)
    policy.on_failure(Detection(sw.plan.ports["h2"], 0.0, 0.1))
    (d,) = sw.adapter.decisions
    assert d.error == "stream 1 has no operator left" and d.change is None
    assert policy.act_since("failover", "h2", 0) == (d,) and d.armed.is_set()    # a held source goes on
    sw.adapter.stop()


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_elastic_grows_with_load_and_shrinks_when_it_falls():
    pool = [f"h{i}" for i in range(2, 10)]
    sw = Switch([topologies.stream(1, {"kind": "count", "size": 4, "slide": 1}, pool[:2])])
    clock = Clock()
    policy = ElasticPolicy(sw.adapter, sw.pipe, sw.plan.ports,
                           {1: ElasticSettings(pool, min_n=2, max_n=8, high=300, low=100, cooldown=1.0)},
                           clock=clock)
    history = []
    # Offered rate per tick of 0.5 s: up to 1,600 events/s and back down.  With
    # n=4, δ=1 every event reaches min(4, N) operators.
    for step, rate in enumerate([200] * 4 + [400, 800, 1200, 1600] * 2 + [1600] * 4 + [100] * 10):
        clock.now = step * 0.5
        policy.tick()
        sent = len(feed_until(sw, 1, lambda: sw.adapter.idle()))   # events carry the change to its boundary
        sw.send(1, max(0, int(rate * 0.5) - sent))
        history.append(len(sw.ctl.streams[1].operators))
    assert history[0] == 2 and max(history) == 8 and history[-1] == 2
    grow = [b - a for a, b in zip(history, history[1:]) if b != a]
    assert any(d > 0 for d in grow) and any(d < 0 for d in grow)
    assert all(d.error is None for d in sw.adapter.decisions)
    # never two changes of the stream within the cool-down
    times = [t for t, n1, n2 in zip(range(len(history)), history, history[1:]) if n1 != n2]
    assert all(b - a >= 2 for a, b in zip(times, times[1:]))
    sw.adapter.stop()


def test_elastic_on_the_operators_lag_follows_what_they_report():
    """signal: lag takes the copies each operator holds unprocessed, not the
    switch's counters: N grows while they report a backlog above high and
    shrinks once it drains below low."""
    pool = [f"h{i}" for i in range(2, 10)]
    sw = Switch([topologies.stream(1, {"kind": "count", "size": 4, "slide": 1}, pool[:2])])
    clock, backlog = Clock(), {"total": 0.0}
    asked = []

    def lag_of(hosts):
        asked.append(tuple(hosts))
        return {h: backlog["total"] / len(hosts) for h in hosts}

    policy = ElasticPolicy(sw.adapter, sw.pipe, sw.plan.ports,
                           {1: ElasticSettings(pool, min_n=2, max_n=8, high=500, low=100, cooldown=1.0,
                                               signal="lag")}, clock=clock, lag_of=lag_of)
    history = []
    for step, total in enumerate([0] * 2 + [4000] * 8 + [0] * 10):
        clock.now, backlog["total"] = step * 0.5, total
        policy.tick()
        feed_until(sw, 1, lambda: sw.adapter.idle())
        history.append(len(sw.ctl.streams[1].operators))
    # 2,000 waiting per operator: straight to the N that brings it between the
    # thresholds (capped at max), there while it lasts, back to min once drained
    assert history[:2] == [2, 2] and history[2:10] == [8] * 8 and history[-1] == 2
    assert asked and all(hosts == tuple(pool[:len(hosts)]) for hosts in asked)
    # what each tick saw is what the operators reported, spread over N
    assert all(set(loads.values()) <= {0.0, 4000 / n} for _, _, n, loads in policy.samples)
    assert all(d.error is None for d in sw.adapter.decisions)
    assert "2000 copies waiting for Spark per operator at N=2" in sw.adapter.decisions[0].reason
    sw.adapter.stop()


def test_a_lag_policy_needs_the_spark_operators(tmp_path):
    from testbed.rundir import RunDir
    from testbed.runs.orchestrator import PreflightError, preflight
    from testbed.runs.parts import RunParts

    data = topologies.topology_data(
        [topologies.stream(1, {"kind": "count", "size": 4, "slide": 4}, ["h2", "h3"], events=100, rate=100)],
        adapt={"elastic": [{"stream": 1, "pool": ["h2", "h3", "h4"], "max": 3, "high": 50, "low": 10,
                                    "signal": "lag"}]})
    topo = topologies.build(data["streams"], adapt=data["adapt"])
    parts = RunParts(network=None, conclude=None, spark=None, missing=lambda: None)
    with pytest.raises(PreflightError, match=r"adapt.elastic\[0\].signal: lag .* --no-spark"):
        preflight(topo, tmp_path / "t.yaml", parts, RunDir(tmp_path / "run"))
