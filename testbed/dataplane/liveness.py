"""Failure detection from the switch's heartbeat counters.

Every operator host sends a small heartbeat frame to the splitter at a fixed
interval (``testbed.emulation.receiver``, docs/wire.md "Heartbeats"); the
data plane counts them per ingress port (counter ``heartbeats``) and drops
them.  ``HeartbeatMonitor`` polls those counters through the control API, as
a controller of a real deployment would, and declares an operator failed
when its count has not grown for ``timeout`` seconds, and the switch has
meanwhile counted ``timeout / interval - 1`` heartbeats from another of the
watched ports (``silence_beats``), if it counted any at all.  No process id,
file or other emulation shortcut is involved: a receiver that dies, a host
whose link goes down and a switch port that stops receiving look the same.

The second condition measures the silence on the switch's own counters: on
a machine too busy to run the heartbeat threads on time, every port's
heartbeats come late, and seconds alone once took a live operator for dead.
Its peers' heartbeats come late the same way, so the silence it takes to
declare a port failed stretches with them.  When no other port was heard at
all (one operator host, all of them failed at once, or a switch that counted
nothing), there is nothing to measure with and the seconds decide.

The worst-case detection time on an idle machine is ``timeout + interval +
poll``: the last heartbeat may leave just after the failure's moment would
have sent one, and the monitor notices at its next poll; the peers' count is
reached before that.  The defaults keep that under 500 ms.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from testbed.dataplane.contract import SwitchAPI

# The heartbeat interval is a limit validation holds detect_timeout to, so it is declared there.
from testbed.semantics.limits import HEARTBEAT_INTERVAL_S

#: Silence after which a port's operator counts as failed (seconds).
FAILURE_TIMEOUT_S = 0.3
#: How often the monitor reads the counters (seconds).
POLL_S = 0.025


def detection_bound(timeout: float = FAILURE_TIMEOUT_S, interval: float = HEARTBEAT_INTERVAL_S,
                    poll: float = POLL_S) -> float:
    """The longest a failure can go unnoticed with these settings."""
    return timeout + interval + poll


def silence_beats(timeout: float, interval: float = HEARTBEAT_INTERVAL_S) -> int:
    """Heartbeats another port must send while a port is silent before it may
    count as failed: one fewer than fit in ``timeout``, so that on an idle
    machine the seconds are reached first and detection takes as long as ever."""
    return max(1, round(timeout / interval) - 1)


@dataclass
class PortLiveness:
    """What the monitor knows about one operator port."""

    port: int
    count: int = 0                          # heartbeats counted so far
    last_change: Optional[float] = None     # monotonic time the count last grew
    failed_at: Optional[float] = None       # monotonic time the monitor declared it failed
    #: every watched port's count at the poll that saw this one's count grow last
    counts_then: dict[int, int] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.last_change is not None and self.failed_at is None


@dataclass
class Detection:
    """One declared failure: which port, when its last heartbeat was seen and when it was declared."""

    port: int
    last_heartbeat: float     # monotonic
    detected: float           # monotonic
    wall_clock: float = field(default_factory=time.time)
    #: most heartbeats the switch counted from one other port meanwhile
    others_beats: int = 0


class HeartbeatMonitor:
    """Polls ``heartbeats[port]`` for a set of operator ports.

    A port is watched from its first heartbeat on, so an operator host that
    is still starting is not a failure.  ``on_failure`` runs in the monitor's
    thread once per failure; a port whose heartbeats resume is alive again
    (``on_recovery``).
    """

    def __init__(self, api: SwitchAPI, ports: Iterable[int], timeout: float = FAILURE_TIMEOUT_S,
                 poll: float = POLL_S, on_failure: Optional[Callable[[Detection], None]] = None,
                 on_recovery: Optional[Callable[[int], None]] = None,
                 clock: Callable[[], float] = time.monotonic):
        self.api = api
        self.ports = {p: PortLiveness(p) for p in ports}
        self.timeout = timeout
        self.beats = silence_beats(timeout)
        self.poll_s = poll
        self.on_failure = on_failure
        self.on_recovery = on_recovery
        self.clock = clock
        self.detections: list[Detection] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.lock = threading.Lock()
        #: Why the monitor stopped before it was asked to, if it did.
        self.error: Optional[str] = None

    def poll(self) -> list[Detection]:
        """Read every watched counter once; returns the failures declared by this poll."""
        now = self.clock()
        # One snapshot per poll, shared by the ports that grew in it: nothing is copied per port.
        counts = {port: self.api.counter_read("heartbeats", port)[1] for port in self.ports}
        found = []
        for state in self.ports.values():
            count = counts[state.port]
            if count != state.count:
                state.count = count
                state.last_change = now
                state.counts_then = counts
                if state.failed_at is not None:
                    state.failed_at = None
                    if self.on_recovery:
                        self.on_recovery(state.port)
            elif state.alive and now - state.last_change > self.timeout:
                others = max((counts[p] - state.counts_then.get(p, 0) for p in counts if p != state.port), default=0)
                if others and others < self.beats:
                    continue        # its peers were late too: the machine, not the port, was slow
                state.failed_at = now
                found.append(Detection(state.port, state.last_change, now, others_beats=others))
        with self.lock:
            self.detections.extend(found)
        for detection in found:
            if self.on_failure:
                self.on_failure(detection)
        return found

    def failed(self) -> list[int]:
        return sorted(p for p, s in self.ports.items() if s.failed_at is not None)

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "HeartbeatMonitor":
        self._thread = threading.Thread(target=self._run, name="heartbeat-monitor", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as err:     # noqa: BLE001 - each target's client raises its own kinds
                # The switch stopped answering: the run's watch on the switch
                # process reports that; the monitor only stops watching.
                self.error = f"{type(err).__name__}: {err}"
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "HeartbeatMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
