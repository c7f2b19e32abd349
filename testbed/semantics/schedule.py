"""What a topology asks to happen during a run: its ``schedule`` and ``adapt`` sections.

``schedule`` is a list of actions, each placed either ``at`` seconds after
the streams start, or ``after`` a point of one stream in the stream's own
terms (``{stream, events}``: once its source has sent that many events;
``{stream, ts}``: once it has sent its first event stamped ``ts`` or later).
A point in stream terms holds that stream's source at the point until the
action has taken effect, so its outcome does not depend on how fast the
machine is.  Each entry carries exactly one of:

- ``change: {stream, window?, operators?}``: a new window spec and/or
  operator list, taking effect at the stream's next window boundary
  (docs/windows.md, "Reconfiguration");
- ``rate: {stream, rate, ramp?}``: the source's rate from then on, reached
  linearly over ``ramp`` seconds;
- ``fail: {host, how}``: an operator host fails: its receiver is killed
  (``kill``) or its link goes down (``link``);
- ``cep: {add | replace | remove | add_window | replace_window | remove_window}``:
  the CEP rules change (``testbed.semantics.cep.changes``; docs/cep.md,
  "Changing rules mid-stream"), placed ``after`` a point of the changed
  pattern's or window's own stream;
- ``recover: {host}``: a failed operator host comes back: a new receiver
  starts (after ``kill``) or its link comes up (after ``link``), and its
  heartbeats resume.  With ``adapt.failover`` the controller gives it back
  its streams at their next boundaries.

A ``fail`` or ``recover`` entry placed ``after`` a point may also say
``hold: failover``: its source is then held until the failover policy has
acted on it (the failure detected and the host's removal armed, or the host
heard again and its place given back and armed), so the removal and the
return begin at the first boundary after their points, however long
detection took on the machine.

``adapt`` turns on controller policies: ``failover`` (detect failed
operators from heartbeats and remove them) and ``elastic`` (scale a
stream's N from its operators' load).

The models here check each entry on its own; ``topology.check_schedule`` checks them
against the topology (streams, hosts, the chain of changes).  Both report
one field, so a bad entry is one line naming it.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from testbed.semantics.cep.changes import CepChange
from testbed.semantics.limits import HEARTBEAT_INTERVAL_S, MAX_EVENTS, MAX_INT64, MAX_RATE, MAX_SCHEDULE_S, MIN_RATE
from testbed.semantics.strict import FieldError, StrictModel

#: Seconds of one step of a rate ramp: sources change pace in steps this long.
RAMP_STEP_S = 0.25


_Strict = StrictModel


class ScheduleError(ValueError):
    """A schedule entry that does not fit the topology: ``field`` names it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class ChangeAction(_Strict):
    stream: int = Field(ge=0)
    window: Optional[dict[str, Any]] = None
    operators: Optional[list[str]] = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _something(self):
        if self.window is None and self.operators is None:
            raise ValueError("a change needs a window, operators, or both")
        return self


class RateAction(_Strict):
    stream: int = Field(ge=0)
    rate: float = Field(ge=MIN_RATE, le=MAX_RATE, description="events per second")
    ramp: float = Field(default=0.0, ge=0, le=MAX_SCHEDULE_S, description="seconds")


class FailAction(_Strict):
    host: str
    how: Literal["kill", "link"] = "kill"


class RecoverAction(_Strict):
    host: str


#: The actions a schedule entry may carry, exactly one per entry.
ACTIONS = ("change", "rate", "fail", "recover", "cep")


class StreamPoint(_Strict):
    """A point of one stream in its own terms: once its source has sent
    ``events`` events (every frame it sends counts), or once it has sent its
    first event whose timestamp is ``ts`` or later."""

    stream: int = Field(ge=0)
    events: Optional[int] = Field(default=None, ge=1, le=MAX_EVENTS)
    ts: Optional[int] = Field(default=None, ge=0, le=MAX_INT64)

    @model_validator(mode="after")
    def _one_measure(self):
        if (self.events is None) == (self.ts is None):
            raise ValueError("a point is either events or ts, not both and not neither")
        return self


class ScheduleEntry(_Strict):
    at: Optional[float] = Field(default=None, ge=0, le=MAX_SCHEDULE_S, description="seconds after the streams start")
    after: Optional[StreamPoint] = None
    change: Optional[ChangeAction] = None
    rate: Optional[RateAction] = None
    fail: Optional[FailAction] = None
    recover: Optional[RecoverAction] = None
    cep: Optional[CepChange] = None
    #: What a source held at ``after`` waits for: the action itself (the host
    #: failed or back), or also the failover policy's answer to it.
    hold: Literal["action", "failover"] = "action"

    @model_validator(mode="after")
    def _one_action(self):
        given = [name for name in ACTIONS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"an entry has exactly one of {', '.join(ACTIONS)} (got {', '.join(given) or 'none'})")
        if (self.at is None) == (self.after is None):
            raise ValueError("an entry is placed by exactly one of at (seconds) and after (a stream's point)")
        if self.rate is not None and self.after is not None:
            raise ValueError("a rate entry is placed by at: a source's pace is set in seconds")
        if self.cep is not None and self.after is None:
            # A point of the stream holds its source until the change is in: the change
            # then begins at one event exactly, which the check and Spark's reference apply.
            raise ValueError("a cep entry is placed by after (a point of its stream), where it begins exactly")
        if self.hold == "failover":
            if self.fail is None and self.recover is None:
                raise FieldError("hold", "only a fail or recover entry waits for failover")
            if self.after is None:
                raise FieldError("hold", "only an entry placed by after holds its source: an at entry holds nothing")
        return self

    @property
    def action(self) -> str:
        return next(name for name in ACTIONS if getattr(self, name) is not None)


def last_send(profile: list[tuple[float, float]], n: int) -> float:
    """When the last of ``n`` events is due under ``profile``: ``send_offsets(profile, n)[-1]``
    in time independent of ``n``."""
    t, left = 0.0, n
    bounds = [start for start, _ in profile[1:]] + [math.inf]
    for (start, rate), end in zip(profile, bounds):
        t = max(t, start)
        fits = math.inf if end == math.inf else max(0, math.ceil((end - t) * rate))
        if left <= fits:
            return t + (left - 1) / rate
        left -= fits
        t += fits / rate
    return t


class ElasticPolicySpec(_Strict):
    """``adapt.elastic[i]``: the elastic policy for one stream."""

    stream: int = Field(ge=0)
    pool: list[str] = Field(min_length=1, description="operator hosts in the order they are added")
    min: int = Field(default=1, ge=1)
    max: int = Field(default=8, ge=1)
    #: ``copies``: copies/s per operator, from the switch's counters; ``lag``: copies
    #: per operator that its receiver holds and Spark has not processed yet.
    signal: Literal["copies", "lag"] = "copies"
    high: float = Field(gt=0, allow_inf_nan=False, description="signal per operator above which N grows")
    low: float = Field(ge=0, allow_inf_nan=False, description="signal per operator below which N shrinks")
    cooldown: float = Field(default=2.0, ge=0, le=MAX_SCHEDULE_S, allow_inf_nan=False,
                            description="seconds between changes")
    period: float = Field(default=0.5, gt=0, le=MAX_SCHEDULE_S, allow_inf_nan=False,
                          description="seconds between decisions")

    @field_validator("pool")
    @classmethod
    def _distinct(cls, pool: list[str]) -> list[str]:
        twice = sorted(host for host, count in Counter(pool).items() if count > 1)
        if twice:
            raise ValueError(f"hosts listed twice: {', '.join(twice)}")
        return pool

    @model_validator(mode="after")
    def _bounds(self):
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        if self.low >= self.high:
            raise ValueError(f"low {self.low:g} must be below high {self.high:g}")
        if self.max > len(self.pool):
            raise ValueError(f"max {self.max} needs that many hosts in pool, which has {len(self.pool)}")
        return self


class Adapt(_Strict):
    failover: bool = False
    #: Silence after which an operator counts as failed (seconds), stretched on a
    #: busy machine by its peers' late heartbeats (``testbed.dataplane.liveness``).
    detect_timeout: float = Field(default=0.3, gt=0, le=10, allow_inf_nan=False)
    elastic: list[ElasticPolicySpec] = []

    @field_validator("detect_timeout")
    @classmethod
    def _heard_between_heartbeats(cls, timeout: float) -> float:
        # Shorter, it passes between two heartbeats of a healthy operator, which
        # failover then removes and puts back without end.
        if timeout < HEARTBEAT_INTERVAL_S:
            raise ValueError(f"{timeout:g} s is shorter than the {HEARTBEAT_INTERVAL_S:g} s between two "
                             f"heartbeats: every operator would count as failed")
        return timeout

    @model_validator(mode="after")
    def _one_policy_per_stream(self):
        # Two policies would each resize the stream from their own view of it, undoing each other's changes.
        first: dict[int, int] = {}
        for i, policy in enumerate(self.elastic):
            j = first.setdefault(policy.stream, i)
            if j != i:
                raise FieldError(f"elastic[{i}].stream", f"stream {policy.stream} already has a policy "
                                                         f"(elastic[{j}]); a stream has one elastic policy")
        return self


def rate_profile(stream, schedule: list[ScheduleEntry]) -> list[tuple[float, float]]:
    """The stream's pace as ``(from second, events/s)`` steps, first at 0.

    A ramp over ``r`` seconds becomes steps of ``RAMP_STEP_S`` that reach
    the new rate at ``at + r``.
    """
    steps = [(0.0, float(stream.rate))]
    current = float(stream.rate)
    for entry in sorted((e for e in schedule if e.rate is not None and e.rate.stream == stream.id),
                        key=lambda e: e.at):        # rate entries are placed by at only
        target, ramp = entry.rate.rate, entry.rate.ramp
        n = max(1, math.ceil(ramp / RAMP_STEP_S)) if ramp else 1
        for k in range(1, n + 1):
            steps.append((entry.at + (k - 1) * (ramp / n if ramp else 0), current + (target - current) * k / n))
        current = target
    return steps


def send_offsets(profile: list[tuple[float, float]], n: int) -> list[float]:
    """When, in seconds after the start, each of ``n`` events is due under ``profile``."""
    out, t, i = [], 0.0, 0
    bounds = [start for start, _ in profile[1:]] + [math.inf]
    for (start, rate), end in zip(profile, bounds):
        t = max(t, start)
        while i < n and t < end:
            out.append(t)
            i += 1
            t += 1.0 / rate
        if i == n:
            break
    return out
