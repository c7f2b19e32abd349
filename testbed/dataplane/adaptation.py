"""Controller policies that change streams at run time: failover and elasticity.

Both act only through ``Controller.change``, so every change they make takes
effect at a window boundary and loses no event (docs/p4.md,
"Reconfiguration"), and both decide only from what the switch reports:
heartbeat counters (``testbed.dataplane.liveness``) and per-port copy
counters (``operator_out``).  ``Adapter`` serialises their changes: one
worker thread owns the controller, so a failure detected while the elastic
policy is changing the same stream waits its turn instead of racing it.
"""
from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from testbed.dataplane.control import Change, ChangeTimeout, Controller
from testbed.dataplane.liveness import Detection
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import Stream


@dataclass
class Decision:
    """One change a policy asked for, and what became of it."""

    policy: str                     # "failover", "recovery", "elastic" or "schedule"
    stream: int
    operators: tuple[str, ...]
    reason: str
    asked_at: float = field(default_factory=time.time)
    change: Optional[Change] = None
    error: Optional[str] = None
    #: Set once the change is installed and armed, or has failed: a source held
    #: for it (a schedule entry in stream terms) may go on from then.
    armed: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def record(self) -> dict[str, Any]:
        out = {"policy": self.policy, "stream": self.stream, "operators": list(self.operators),
               "reason": self.reason, "asked_at": self.asked_at, "error": self.error}
        if self.change is not None:
            out |= self.change.record()
        return out


class Adapter:
    """Applies the changes policies ask for, one at a time, in a worker thread.

    The controller's connection to the switch is this thread's alone; a
    policy that reads counters needs a connection of its own (control
    clients are not shared between threads).

    ``submit`` never blocks the caller (a monitor's thread, a policy's
    tick); the worker waits for the stream to be settled, installs and arms
    the change, and waits for its boundary.
    """

    def __init__(self, controller: Controller, plan: SplitterPlan, timeout: float = 10.0):
        self.controller = controller
        self.plan = plan
        self.timeout = timeout
        self.decisions: list[Decision] = []
        self._queue: "queue.Queue[Optional[tuple[Decision, Stream]]]" = queue.Queue()
        self._thread: Optional[threading.Thread] = None
        self.lock = threading.Lock()

    def current(self, sid: int) -> Stream:
        """The configuration in force or armed for stream ``sid``."""
        with self.lock:
            return self.controller.streams[sid]

    def submit(self, decision: Decision, new: Stream) -> Decision:
        with self.lock:
            self.decisions.append(decision)
        self._queue.put((decision, new))
        return decision

    def _apply(self, decision: Decision, new: Stream) -> None:
        try:
            # Only this thread changes streams, so once settled a stream stays
            # settled until the change below: wait without holding the lock.
            self.controller.wait_settled(new.id, self.timeout)
            self._seen_late(new.id)
            with self.lock:
                change = self.controller.change(self.plan, new, 0)
            decision.change = change
            decision.armed.set()
            self.controller.wait_applied(change, self.timeout)
        except (ChangeTimeout, ValueError) as exc:
            decision.error = str(exc)
        finally:
            decision.armed.set()

    def _seen_late(self, sid: int) -> None:
        """Fill in the boundary of a change of stream ``sid`` that was armed but
        not seen to apply within ``timeout``.  The data plane applies an armed
        change at its boundary whenever the stream gets there, so on a busy
        machine it may have applied after the wait gave up; a record without it
        would hold the stream's events to the configuration it replaced.  Called
        while the stream is settled and before anything changes it again, so the
        switch's ``boundary`` is still that change's."""
        api = self.controller.api
        for decision in self.decisions:
            change = decision.change
            if change is None or change.stream != sid or change.boundary is not None:
                continue
            if not api.register_read("armed", sid) and int(api.register_read("epoch", sid)) == change.epoch:
                change.boundary = int(api.register_read("boundary", sid))
                change.applied_at = time.time()         # when it was seen: it applied before
                decision.error = None

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._apply(*item)
            finally:
                self._queue.task_done()

    def start(self) -> "Adapter":
        self._thread = threading.Thread(target=self._run, name="adapter", daemon=True)
        self._thread.start()
        return self

    def idle(self) -> bool:
        """No change waits to be applied or for its boundary."""
        return self._queue.unfinished_tasks == 0

    def drain(self) -> None:
        """Wait until every submitted change was applied or failed."""
        self._queue.join()

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        # The stream has ended: a change still waiting for its boundary either got there or never will.
        late = {d.change.stream for d in self.decisions if d.change is not None and d.change.boundary is None}
        try:
            for sid in sorted(late):
                self._seen_late(sid)
        except Exception:      # noqa: BLE001 - each target's client raises its own kinds
            pass               # the switch is gone (the run reports why): the changes stay unapplied


class FailoverPolicy:
    """Removes a failed operator from every stream it serves, at each stream's
    next window boundary.  Windows the failed operator owned are lost with
    it; the check names them (``testbed.analysis.check``).  When its
    heartbeats resume, it gets its place back in the streams it left, again
    at their next boundaries."""

    def __init__(self, adapter: Adapter, host_of_port: dict[int, str]):
        self.adapter = adapter
        self.host_of_port = host_of_port
        self.detections: list[Detection] = []
        #: host -> {stream: its operator list when the host was removed}
        self.removed: dict[str, dict[int, tuple[str, ...]]] = {}
        self.heard_again: list[tuple[int, float]] = []     # (port, wall clock)
        #: Every answer to a failure or a return, in order: ``(policy, host, decisions)``,
        #: so that a source held for failover (``schedule``, ``hold: failover``) knows
        #: when the policy has acted, and on which changes to wait.
        self.acts: list[tuple[str, str, tuple[Decision, ...]]] = []
        self._acts_lock = threading.Lock()

    def _acted(self, policy: str, host: str, decisions: list[Decision]) -> None:
        with self._acts_lock:
            self.acts.append((policy, host, tuple(decisions)))

    def act_since(self, policy: str, host: str, since: int) -> Optional[tuple[Decision, ...]]:
        """The decisions of the first ``policy`` act on ``host`` at index ``since`` or later, if any."""
        with self._acts_lock:
            return next((d for p, h, d in self.acts[since:] if p == policy and h == host), None)

    def on_recovery(self, port: int) -> None:
        self.heard_again.append((port, time.time()))
        host = self.host_of_port.get(port)
        decisions = []
        for sid, before in sorted(self.removed.pop(host, {}).items()):
            current = self.adapter.current(sid).operators
            # its old place among the operators that are still there, newcomers after
            back = [op for op in before if op in current or op == host] + [op for op in current if op not in before]
            decisions.append(self.adapter.submit(
                Decision("recovery", sid, tuple(back), f"{host} heard again (port {port})"),
                self.adapter.current(sid).model_copy(update={"operators": back})))
        self._acted("recovery", host, decisions)

    def on_failure(self, detection: Detection) -> None:
        self.detections.append(detection)
        host = self.host_of_port.get(detection.port)
        decisions = []
        for sid in sorted(self.adapter.controller.streams):
            stream = self.adapter.current(sid)
            if host not in stream.operators:
                continue
            self.removed.setdefault(host, {})[sid] = tuple(stream.operators)
            left = tuple(op for op in stream.operators if op != host)
            decision = Decision("failover", sid, left, f"{host} failed (port {detection.port})")
            decisions.append(decision)
            if not left:
                decision.error = f"stream {stream.label} has no operator left"
                decision.armed.set()        # failed: nothing will arm it
                with self.adapter.lock:
                    self.adapter.decisions.append(decision)
                continue
            self.adapter.submit(decision, stream.model_copy(update={"operators": list(left)}))
        self._acted("failover", host, decisions)


#: What an elastic policy's thresholds measure, by its signal.
SIGNAL_UNITS = {"copies": "copies/s", "lag": "copies waiting for Spark"}


@dataclass
class ElasticSettings:
    """The elastic policy's knobs, per stream."""

    pool: Sequence[str]            # operator hosts the stream may use, in the order they are added
    min_n: int = 1
    max_n: int = 8
    high: float = 1500.0           # signal per operator above which N grows
    low: float = 500.0             # ... below which it shrinks
    cooldown: float = 2.0          # seconds between two changes of the stream
    signal: str = "copies"         # copies/s from the switch, or ``lag``: copies waiting for Spark


class ElasticPolicy:
    """Scales a stream's N from the load its operators carry.

    Load is copies per second per operator, from the switch's ``operator_out``
    counters between two ticks: a signal a real deployment has.  With
    ``signal: lag`` it is what the operators report instead: the copies each
    holds that the stream processor has not processed yet (``lag_of``), the
    feedback of S4's Fig. 3.  Above
    ``high`` N grows to what would bring the load back between the
    thresholds; below ``low`` it shrinks likewise; never outside
    ``[min_n, max_n]`` and never twice within ``cooldown``.  Operators come
    from the front of ``pool``, so growing and shrinking keep a prefix.
    """

    def __init__(self, adapter: Adapter, api, ports: dict[str, int], settings: dict[int, ElasticSettings],
                 clock: Callable[[], float] = time.monotonic,
                 lag_of: Optional[Callable[[Sequence[str]], dict[str, float]]] = None):
        self.adapter = adapter
        self.lag_of = lag_of
        self.api = api
        self.ports = ports
        self.settings = settings
        self.clock = clock
        self._last: dict[str, tuple[float, int]] = {}
        self._changed_at: dict[int, float] = {}
        #: (time, stream, N, per-operator load) per tick, for the figure.
        self.samples: list[tuple[float, int, int, dict[str, float]]] = []

    def load(self, hosts: Sequence[str], now: float) -> dict[str, float]:
        """Copies per second each host received since the last tick."""
        out = {}
        for host in hosts:
            count = self.api.counter_read("operator_out", self.ports[host])[1]
            then, before = self._last.get(host, (now, count))
            self._last[host] = (now, count)
            out[host] = (count - before) / (now - then) if now > then else 0.0
        return out

    def target_n(self, n: int, per_operator: float, s: ElasticSettings) -> int:
        total = per_operator * n
        if per_operator > s.high:
            want = max(n + 1, math.ceil(total / ((s.high + s.low) / 2)))
        elif per_operator < s.low:
            want = min(n - 1, max(1, math.ceil(total / ((s.high + s.low) / 2))))
        else:
            want = n
        return max(s.min_n, min(s.max_n, len(s.pool), want))

    def tick(self) -> list[Decision]:
        now = self.clock()
        decisions = []
        for sid, s in self.settings.items():
            stream = self.adapter.current(sid)
            loads = self.lag_of(stream.operators) if s.signal == "lag" else self.load(stream.operators, now)
            n = len(stream.operators)
            per_operator = sum(loads.values()) / n if n else 0.0
            self.samples.append((now, sid, n, loads))
            want = self.target_n(n, per_operator, s)
            if want == n or now - self._changed_at.get(sid, -math.inf) < s.cooldown:
                continue
            self._changed_at[sid] = now
            ops = list(s.pool[:want])
            reason = f"{per_operator:.0f} {SIGNAL_UNITS[s.signal]} per operator at N={n}"
            decisions.append(self.adapter.submit(
                Decision("elastic", sid, tuple(ops), reason),
                stream.model_copy(update={"operators": ops})))
        return decisions
