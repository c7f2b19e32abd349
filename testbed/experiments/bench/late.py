"""Time inside each target for in-order and late events of one time stream.

The switch is timed with ``stamps.time_in_switch`` (kernel timestamps on its
own interfaces), at a rate low enough that no queue forms.  In-order and
late events share one run, so a busy moment of the machine hits them alike.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import Field

from testbed.emulation.veth import VethRig
from testbed.experiments.bench.costs import TEMPLATE, one_stream
from testbed.experiments.stamps import copy_times, time_in_switch
from testbed.rundir import ExperimentDir
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.strict import EventCount, Rate, StrictModel
from testbed.semantics.topology import parse_topology

#: Operators of the stream, on switch ports 2..4.
OPERATORS = 3


class LateParams(StrictModel):

    events: EventCount = Field(default=800, ge=10)
    rate: Rate = Field(default=200, description="events per second")


def late_stream(events: int, slide: int = 100) -> tuple[SplitterPlan, list[bytes], dict[int, str]]:
    """One time stream allowing 4 slides of lateness, and its frames: every fifth
    event one to four slides behind the newest, the rest in order.  Returns the
    plan, the frames and what kind of event each seq is."""
    data = one_stream(200, slide, OPERATORS, kind="time", events=events)
    data["streams"][0]["window"]["lateness"] = 4 * slide
    frames, kind, newest = [], {}, 0
    for seq in range(events):
        if seq % 5 == 4 and newest >= 5 * slide:
            back = 1 + (seq // 5) % 4
            ts, kind[seq] = newest - back * slide, f"late, {back} slides back"
        else:
            newest += 20
            ts, kind[seq] = newest, "in order"
        frames.append(TEMPLATE.frame(seq, ts))
    return SplitterPlan(parse_topology(data)), frames, kind


def late_in_switch(targets: list[str], expdir: ExperimentDir, params: LateParams) -> pd.DataFrame:
    """One row per copy out of each target: which kind of event it was and its time in the switch."""
    plan, frames, kind = late_stream(params.events)
    parts = []
    with VethRig(1 + OPERATORS) as rig:
        for target in targets:
            rows = time_in_switch(target, expdir, rig, f"late-{target}", frames, params.rate,
                                  set(range(2, 2 + OPERATORS)), plan=plan)
            copies = copy_times(rows).dropna(subset=["in_ns"])
            parts.append(copies.assign(target=target, event=copies["seq"].map(kind)))
    columns = ["target", "event", "stream", "seq", "port", "copy", "in_ns", "out_ns", "latency_ns"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def summarize(copies: pd.DataFrame) -> list[dict[str, Any]]:
    """Per target and kind of event: copies, and the median, mean and 90th percentile in microseconds."""
    out = []
    for (target, event), part in copies.groupby(["target", "event"]):
        us = part["latency_ns"] / 1000
        out.append({"target": target, "event": event, "copies": len(us), "us_p50": round(float(us.median()), 3),
                    "us_mean": round(float(us.mean()), 3), "us_p90": round(float(us.quantile(0.9)), 3)})
    return out
