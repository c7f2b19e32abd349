"""The run's adaptive part: its schedule, failover and elastic policies, while the stream flows.

``RunAdaptation`` has one lifecycle, started with the stream and stopped
before the network: a timeline thread carries out the topology's
``schedule`` at its times (changes through the ``Adapter``, failures
through the run's callback), a ``HeartbeatMonitor`` feeds the failover
policy, and an elastic thread ticks each elastic policy.  Each part talks to
the switch over a control connection of its own.  ``record()`` gives what
happened for run.json: the changes as the check reads them, every
decision, detection and failure with its times.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from testbed.dataplane.adaptation import Adapter, Decision, ElasticPolicy, ElasticSettings, FailoverPolicy
from testbed.dataplane.cep import CepControl
from testbed.dataplane.control import Controller
from testbed.dataplane.liveness import HeartbeatMonitor
from testbed.rundir import RunDir, read_json
from testbed.runs.progress import operator_lag
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import Topology, WindowSpec, nominal_times

#: How long a change may wait for its boundary; the stream may end first.
CHANGE_TIMEOUT_S = 5.0
#: How often the timeline looks whether a source is held at an entry's point.
POINT_POLL_S = 0.001
#: How long the timeline waits for the switch to count the events a held source
#: sent before its point (events lost on a link never arrive).
SWITCH_CATCH_UP_S = 2.0
#: How long a held source waits for a change to be armed: longer only when an
#: earlier change's transition needs more events, which only the source can send.
ARM_WAIT_S = 1.0
#: How long a source held for failover (``hold: failover``) waits for the policy
#: to act at most: detection takes ``detect_timeout`` and more on a busy machine,
#: and only a monitor that stopped watching never acts.
FAILOVER_WAIT_S = 30.0


class RunAdaptation:
    """Schedule, failover and elasticity of one run.

    ``connect`` opens a new control connection to the run's switch;
    ``fail(host, how)`` makes an operator host fail (kill its receiver, or
    take its link down) and ``recover(host, how)`` brings it back;
    ``origins`` gives each time stream's origin on its axis, to record where
    changes began relative to it.
    """

    def __init__(self, topo: Topology, plan: SplitterPlan, installed: Controller, connect: Callable[[], Any],
                 fail: Callable[[str, str], None], origins: dict[int, int], rundir: RunDir,
                 recover: Optional[Callable[[str, str], None]] = None, cep: Optional[CepControl] = None):
        self.topo = topo
        self.rundir = rundir
        self.not_applied: list[dict[str, Any]] = []
        self.plan = plan
        self.connect = connect
        self.fail = fail
        self.recover = recover
        self.origins = origins
        self.apis: list[Any] = []
        self.adapter = Adapter(installed.fork(self._api()), plan, timeout=CHANGE_TIMEOUT_S)
        self.failures: list[dict[str, Any]] = []
        self.recoveries: list[dict[str, Any]] = []
        #: host -> how many failover acts there were when it last failed
        self._failed_from: dict[str, int] = {}
        self.monitor: Optional[HeartbeatMonitor] = None
        self.failover: Optional[FailoverPolicy] = None
        self.elastic: Optional[ElasticPolicy] = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.t0 = 0.0
        # The schedule's CEP changes, on a connection of the timeline's own (the run's
        # main connection serves other threads), each with the slot validation gave it.
        self.cep = cep
        self.cep_changes = {c.entry: c for c in topo.cep_timeline().changes} if cep is not None else {}
        self.cep_applied: list[dict[str, Any]] = []
        if self.cep_changes:
            self.cep.api = self._api()

    def _api(self):
        api = self.connect()
        self.apis.append(api)
        return api

    @property
    def needed(self) -> bool:
        return bool(self.topo.schedule or self.topo.adapt)

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "RunAdaptation":
        """Begin with the stream: ``at`` times count from its first event at the switch."""
        self.t0 = time.monotonic()
        self.adapter.start()
        self._first = self._api()
        adapt = self.topo.adapt
        if adapt is not None and adapt.failover:
            self.failover = FailoverPolicy(self.adapter, self.plan.host_of_port())
            ports = [self.plan.ports[h] for h in self.topo.operator_hosts()]
            self.monitor = HeartbeatMonitor(self._api(), ports, timeout=adapt.detect_timeout,
                                            on_failure=self.failover.on_failure,
                                            on_recovery=self.failover.on_recovery).start()
        if adapt is not None and adapt.elastic:
            settings = {e.stream: ElasticSettings(e.pool, e.min, e.max, e.high, e.low, e.cooldown, e.signal)
                        for e in adapt.elastic}
            self.elastic = ElasticPolicy(self.adapter, self._api(), self.plan.ports, settings,
                                         lag_of=lambda hosts: {h: float(lag.lag_events) for h, lag in
                                                               operator_lag(self.rundir, hosts).items()})
            period = min(e.period for e in adapt.elastic)
            self._thread(lambda: self._tick(period), "elastic")
        if self.topo.schedule:
            self._thread(self._timeline, "schedule")
        return self

    def _thread(self, target, name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _await_first_event(self, timeout: float = 60.0) -> None:
        """Sources take a moment to start, each its own: the schedule's clock
        starts when the switch has counted an event of every stream."""
        sids = [s.id for s in self.topo.streams]
        deadline = time.monotonic() + timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            if all(self._first.counter_read("stream_in", sid)[1] for sid in sids):
                break
            time.sleep(0.002)
        self.t0 = time.monotonic()

    def _timeline(self) -> None:
        """Carry the entries out in the order their times give at the streams'
        pace: an ``at`` entry when its second comes, an ``after`` entry when
        its stream's source is held at its point (and the switch has seen
        every event sent before it), releasing the source once it took effect
        (with ``hold: failover``, once failover has answered it)."""
        self._await_first_event()
        due = nominal_times(self.topo)
        order = sorted(range(len(self.topo.schedule)), key=lambda i: due[i])
        for n, i in enumerate(order):
            entry = self.topo.schedule[i]
            if entry.after is None:
                reached = not self._stop.wait(max(0.0, self.t0 + entry.at - time.monotonic()))
            else:
                reached = self._await_point(i, entry.after.stream)
            if not reached:
                self.not_applied = [{"entry": j, "action": self.topo.schedule[j].action,
                                     "why": "the stream ended first"} for j in order[n:]]
                return
            decision = self._carry_out(i, entry)
            if entry.after is not None:
                if decision is not None:
                    # Armed, unless an earlier change's transition is still waiting for events.
                    decision.armed.wait(ARM_WAIT_S)
                self.rundir.barrier_go(i).touch()

    def _await_point(self, i: int, sid: int) -> bool:
        """Wait until the stream's source is held at entry ``i``'s point and the
        switch has counted what it sent; False if the run stops first."""
        reached = self.rundir.barrier_reached(i)
        while not reached.exists():
            if self._stop.wait(POINT_POLL_S):
                return False
        sent = read_json(reached).get("events", 0)
        deadline = time.monotonic() + SWITCH_CATCH_UP_S     # events lost on a link never arrive
        while self._first.counter_read("stream_in", sid)[1] < sent and time.monotonic() < deadline:
            if self._stop.wait(POINT_POLL_S):
                return False
        return True

    def _carry_out(self, i: int, entry) -> Optional[Decision]:
        placed = {"scheduled_s": entry.at} if entry.after is None else {"after": entry.after.model_dump()}
        if entry.change is not None:
            c = entry.change
            old = self.adapter.current(c.stream)
            window = WindowSpec.model_validate(c.window) if c.window is not None else old.window
            new = old.model_copy(update={"window": window, "operators": list(c.operators or old.operators)})
            return self.adapter.submit(Decision("schedule", c.stream, tuple(new.operators), f"schedule[{i}]"), new)
        if entry.cep is not None:
            change = self.cep_changes[i]
            started = time.perf_counter()
            self.cep.apply(change)
            self.cep_applied.append({"entry": i, "action": change.kind, "stream": change.stream,
                                     "after": change.after, "slot": change.slot, "at": time.time(),
                                     "install_ms": round(1000 * (time.perf_counter() - started), 3)})
            return None
        held = entry.hold == "failover" and self.failover is not None
        start = time.monotonic()
        if entry.fail is not None:
            host = entry.fail.host
            failure = {"host": host, "how": entry.fail.how, "at": time.time(), "port": self.plan.ports[host]} | placed
            self.failures.append(failure)
            # Acts from here on answer this failure: an earlier one of the same host was answered before.
            self._failed_from[host] = self._acts_so_far()
            self.fail(host, entry.fail.how)
            if held:
                answered = self._await_failover("failover", host, self._failed_from[host])
                failure["failover_held_s"] = time.monotonic() - start if answered else None
        elif entry.recover is not None:
            host = entry.recover.host
            how = next(f["how"] for f in reversed(self.failures) if f["host"] == host)
            # A return is answered only after the removal it undoes: wait for that first.
            answered = held and self._await_failover("failover", host, self._failed_from[host])
            since = self._acts_so_far()
            recovery = {"host": host, "at": time.time()} | placed
            self.recoveries.append(recovery)
            self.recover(host, how)
            if held:
                answered = answered and self._await_failover("recovery", host, since)
                recovery["failover_held_s"] = time.monotonic() - start if answered else None
        return None

    def _acts_so_far(self) -> int:
        return len(self.failover.acts) if self.failover is not None else 0

    def _await_failover(self, policy: str, host: str, since: int) -> bool:
        """Wait until the failover policy's first ``policy`` act on ``host`` from
        act ``since`` on is armed; False if the run stopped, the monitor stopped
        watching or ``FAILOVER_WAIT_S`` passed first, or its changes were not
        armed within ``ARM_WAIT_S`` (as a held change's: an earlier transition
        may need events that only the source can send)."""
        deadline = time.monotonic() + FAILOVER_WAIT_S
        decisions = None
        while decisions is None:
            if self.monitor.error is not None or time.monotonic() > deadline or self._stop.wait(POINT_POLL_S):
                return False
            decisions = self.failover.act_since(policy, host, since)
        armed_by = time.monotonic() + ARM_WAIT_S
        return all(d.armed.wait(max(0.0, armed_by - time.monotonic())) for d in decisions)

    def _tick(self, period: float) -> None:
        while not self._stop.wait(period):
            self.elastic.tick()

    def stop(self) -> None:
        """Stop deciding; changes still waiting for a boundary give up after ``CHANGE_TIMEOUT_S``,
        and those the stream reached after that are recorded from the switch (``Adapter.stop``)."""
        self._stop.set()
        for t in self._threads:
            t.join()
        if self.monitor is not None:
            self.monitor.stop()
        self.adapter.stop()
        for api in self.apis:
            close = getattr(api, "close", None)
            if close is not None:
                try:
                    close()
                except OSError:
                    pass

    # -- what happened -------------------------------------------------------
    def changes(self) -> dict[str, list[dict[str, Any]]]:
        """Applied changes per stream, in order, as ``Stream.recorded_changes`` reads them:
        ``start`` is the boundary on the stream's axis relative to its origin."""
        out: dict[str, list[dict[str, Any]]] = {}
        applied = [d for d in self.adapter.decisions if d.change is not None and d.change.boundary is not None]
        for d in sorted(applied, key=lambda d: d.change.epoch):
            rec = d.record()
            rec["start"] = d.change.boundary - self.origins.get(d.stream, 0)
            out.setdefault(str(d.stream), []).append(rec)
        return out

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decisions": [d.record() for d in self.adapter.decisions],
                               "failures": self.failures, "recoveries": self.recoveries}
        if self.cep_applied:
            out["cep_changes"] = self.cep_applied
        if self.not_applied:
            out["not_applied"] = self.not_applied
        if self.monitor is not None:
            host_of = self.plan.host_of_port()
            out["detections"] = [{"host": host_of.get(d.port), "port": d.port, "detected_at": d.wall_clock,
                                  "silent_s": d.detected - d.last_heartbeat, "others_beats": d.others_beats}
                                 for d in self.monitor.detections]
            out["heard_again"] = [{"host": host_of.get(port), "port": port, "at": at}
                                  for port, at in self.failover.heard_again]
            if self.monitor.error is not None:
                out["monitor_stopped"] = self.monitor.error
        if self.elastic is not None:
            wall = time.time() - time.monotonic()      # the policy's clock is monotonic; figures use wall time
            out["elastic_samples"] = [{"t": t - self.t0, "at": t + wall, "stream": sid, "N": n, "load": load}
                                      for t, sid, n, load in self.elastic.samples]
        return out
