"""Changes of a sliding stream's operators while its events flow, on each target.

A cbsw1-like stream (n=5, δ=1) changes between 6 and 3 operators, again and
again, mid-stream.  Per change: the control-plane time to install it, the
time from arming it to the boundary event's first copy leaving the switch,
and the time until the controller saw it applied.  Per target: every copy
that left held to the epoch-aware oracle, given the boundaries the switch
reported (events lost, events with wrong copies).
"""
from __future__ import annotations

import threading
import time

import pandas as pd
from pydantic import Field

from testbed.dataplane.control import Controller
from testbed.emulation.veth import StampedTaps, VethRig, send_frames
from testbed.experiments.base import live_switch
from testbed.experiments.bench.costs import TEMPLATE, one_stream
from testbed.rundir import ExperimentDir
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import MAX_MEASURED_EVENTS, Rate, Repeats, StrictModel
from testbed.semantics.topology import parse_topology

#: The wide configuration's operators, on switch ports 2..7.
OPERATORS = 6
TIMEOUT_S = 5


class ReconfigParams(StrictModel):

    events: int = Field(default=6000, ge=100, le=MAX_MEASURED_EVENTS)
    rate: Rate = Field(default=2000, description="events per second")
    changes: Repeats = 10


def reconfigure(target: str, expdir: ExperimentDir, params: ReconfigParams) -> tuple[list[dict], dict]:
    """One row per change applied on ``target``, and the target's summary."""
    topo = parse_topology(one_stream(5, 1, OPERATORS, events=params.events, rate=params.rate))
    wide = topo.streams[0]
    narrow = wide.model_copy(update={"operators": wide.operators[1:6:2]})
    frames = [TEMPLATE.frame(seq, seq) for seq in range(params.events)]
    plan = SplitterPlan(topo)
    ports = list(range(2, 2 + OPERATORS))
    with VethRig(1 + OPERATORS) as rig, live_switch(target, expdir, f"reconf-{target}", rig) as (_proc, api):
        ctl = Controller(api)
        ctl.install(plan)
        taps = StampedTaps({}, {p: rig.switch_ends[p] for p in ports}, rig.namespace.path)
        sender = threading.Thread(target=send_frames, args=(rig.host_ends[1], frames, params.rate))
        applied = []
        try:
            sender.start()
            time.sleep(0.2)      # let the stream get going: changes land mid-stream
            for i in range(params.changes):
                if not sender.is_alive():
                    break
                change = ctl.change(plan, narrow if i % 2 == 0 else wide, timeout=TIMEOUT_S)
                applied.append(ctl.wait_applied(change, timeout=TIMEOUT_S))
                ctl.wait_settled(1, timeout=TIMEOUT_S)
            sender.join()
            stamps = taps.drain(1.0)
            counters = ctl.stream_counters([1], ports)["streams"][1]
        finally:
            taps.close()
    host_of = plan.host_of_port()
    got: dict[int, set] = {}
    left: dict[int, int] = {}        # seq -> when its first copy left (kernel clock, ns)
    for _direction, port, _sid, seq, ns in stamps:
        got.setdefault(seq, set()).add(host_of[port])
        left[seq] = min(ns, left.get(seq, ns))
    oracle = wide.oracle([(c.boundary, wide.config(None, c.new.operators)) for c in applied])
    wrong = sum(1 for seq in range(params.events) if got.get(seq, set()) != set(oracle.step(seq, seq).operators))
    rows = [{"target": target, "epoch": c.epoch, "N": len(c.new.operators), "install_ms": c.install_s * 1000,
             "operations": c.operations,
             # the boundary event's first copy leaving, against the moment of arming
             # (both CLOCK_REALTIME); the controller's own poll only bounds it
             "arm_to_boundary_ms": (left[c.boundary] / 1e9 - c.armed_at) * 1000 if c.boundary in left else None,
             "arm_to_seen_ms": (c.applied_at - c.armed_at) * 1000, "boundary": c.boundary} for c in applied]
    summary = {"target": target, "changes": len(applied), "events": params.events, "rate": params.rate,
               "accepted": counters["in"], "dropped": counters["dropped"], "events_with_wrong_copies": wrong}
    return rows, summary


def reconfigurations(targets: list[str], expdir: ExperimentDir, params: ReconfigParams) -> tuple[pd.DataFrame, list]:
    """Every target's changes (one row each) and summaries."""
    rows, summaries = [], []
    for target in targets:
        changes, summary = reconfigure(target, expdir, params)
        rows += changes
        summaries.append(summary)
    return pd.DataFrame(rows, columns=["target", "epoch", "N", "install_ms", "operations", "arm_to_boundary_ms",
                                       "arm_to_seen_ms", "boundary"]), summaries
