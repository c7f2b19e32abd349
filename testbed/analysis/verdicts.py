"""A run's verdicts: every event accounted for, and the checks, into ``verdicts.json``.

The run writes the facts (``run.json``); this module reads them with the
raw data and writes what follows from them, in a file of its own, so that
``testbed check`` can judge a run again without touching what the run
recorded:

- ``account`` says where every event went: sent, received by each
  operator, dropped at the switch and why, lost and where;
- ``evaluate`` runs the frame check (and the window check) and writes
  ``verdicts.json``;
- ``verdict_summary`` is what a person reads: one line per stream, and why
  a check could not be made.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from testbed.analysis.check import (
    StreamCheck,
    WindowCheck,
    check_frames,
    check_windows,
    failed_operators_windows,
    read_link_drops,
    summary_lines,
    window_summary_lines,
)
from testbed.rundir import RunDir, RunRecord, RunVerdicts, read_json
from testbed.runs.progress import exit_text


def account(record: RunRecord, rundir: RunDir, sources: pd.DataFrame, deliveries: pd.DataFrame,
            results: dict[int, StreamCheck]) -> dict[str, Any]:
    """Every event: sent, received by each operator, dropped and why, lost and where."""
    received = deliveries.groupby(["stream", "operator"]).size()
    sent_per_stream = sources["stream"].value_counts()
    distinct_per_stream = sources.groupby("stream")["seq"].nunique()
    switch = record.switch
    receivers = {host: read_json(rundir.raw_receiver_status(host)).get("kernel_drops", {})
                 for host in record.operator_hosts}
    out: dict[str, Any] = {"streams": {}, "receiver_kernel_drops": receivers,
                           "switch_socket": switch.socket if switch else {},
                           "non_event_frames_at_switch": switch.non_event if switch else 0}
    for sid_text, stream in record.streams.items():
        sid = int(sid_text)
        r = results[sid]
        counters = switch.streams.get(sid_text) if switch else None
        sent = int(sent_per_stream.get(sid, 0))
        per_operator = {op: int(received.get((sid, op), 0)) for op in stream["operators"]}
        seen: Optional[int] = None
        if counters is not None:
            seen = counters.accepted + sum(counters.dropped.values()) + r.lost_on_link
        out["streams"][sid_text] = {
            "planned": stream["events"],
            # A perturbed source withholds some events and repeats others on purpose.
            "withheld_at_source": stream["events"] - int(distinct_per_stream.get(sid, 0)),
            "sent": sent,
            "received_per_operator": per_operator,
            "switch_accepted": counters.accepted if counters else None,
            "switch_copies_out": counters.out if counters else None,
            "dropped_at_switch": counters.dropped if counters else {},
            "undelivered_by_design": r.by_design,
            # Where events went: dropped by a link relay, never counted by the
            # switch (lost on the way in), dropped by the switch (by reason,
            # too_late among them), and copies the switch sent that no
            # operator recorded.  Events lost before the switch count once:
            # the check numbers count windows over the events the switch saw.
            "lost_on_link": r.lost_on_link,
            "lost_before_switch": None if seen is None else sent - seen,
            "lost_after_switch": None if counters is None else counters.out - sum(per_operator.values()),
            "lost": r.missing,
            "lost_events": r.lost,
            "lost_per_operator": r.missing_by_operator,
        }
    dead = {f.what.rsplit(" ", 1)[-1] for f in record.faults if f.what.startswith("receiver")}
    if dead:
        # A receiver that died recorded nothing after its death: what its operator
        # misses is lost there, not in the network.
        out["lost_at_dead_receivers"] = {host: sum(s["lost_per_operator"].get(host, 0)
                                                   for s in out["streams"].values()) for host in sorted(dead)}
    return out


@dataclass
class Verdicts:
    """The checks of a finished run, as the analysis made them."""

    frames: dict[int, StreamCheck]
    windows: dict[int, WindowCheck] = field(default_factory=dict)
    #: Why the windows were not checked, when the run asked for them.
    windows_not_computed: Optional[str] = None
    #: Schedule entries that never took effect, each with why.
    not_applied: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (all(r.ok for r in self.frames.values()) and all(w.ok for w in self.windows.values())
                and self.windows_not_computed is None)


def frame_check(record: RunRecord, rundir: RunDir) -> dict[int, StreamCheck]:
    """The frame check of a collected run, per stream."""
    return check_frames(record, pd.read_parquet(rundir.sources), pd.read_parquet(rundir.deliveries),
                        read_link_drops(rundir))


def evaluate(record: RunRecord, rundir: RunDir, with_windows: bool,
             frames: Optional[dict[int, StreamCheck]] = None) -> Verdicts:
    """Check the run's deliveries (and windows, ``with_windows``) and write
    ``verdicts.json``; ``frames`` is the frame check if it was already made.

    A run that asked for windows whose Spark application failed is not
    ``ok``: its windows were never checked."""
    sources, deliveries = pd.read_parquet(rundir.sources), pd.read_parquet(rundir.deliveries)
    verdicts = Verdicts(frames if frames is not None else
                        check_frames(record, sources, deliveries, read_link_drops(rundir)))
    failure = record.spark_failed()
    if with_windows and failure is None:
        # Windows a failed operator owned are the failure's: named, not failures of the splitter.
        verdicts.windows = check_windows(rundir, record, failed_operators_windows(verdicts.frames))
    elif with_windows:
        verdicts.windows_not_computed = f"the Spark application failed: {failure.splitlines()[0]}"
    verdicts.not_applied = not_applied(record)
    rundir.write_verdicts(RunVerdicts(
        checked_at=time.time(), ok=verdicts.ok, not_applied=verdicts.not_applied,
        accounting=account(record, rundir, sources, deliveries, verdicts.frames),
        check={str(k): v.as_json() for k, v in verdicts.frames.items()},
        window_check={str(k): v.as_json() for k, v in verdicts.windows.items()},
        windows_not_computed=verdicts.windows_not_computed))
    return verdicts


def not_applied(record: RunRecord) -> list[str]:
    """``schedule[i] (action): not applied: why`` for each entry of the schedule
    that did not take effect: its point or time never came before the stream
    ended, or its change found no boundary.  The events are judged all the same."""
    adaptation = record.adaptation or {}
    lines = [f"schedule[{e['entry']}] ({e['action']}): not applied: {e['why']}"
             for e in adaptation.get("not_applied", [])]
    lines += [f"{d['reason']} (change): not applied: {d['error']}" for d in adaptation.get("decisions", [])
              if d.get("policy") == "schedule" and d.get("error")]
    return lines


def verdict_summary(record: RunRecord, verdicts: Verdicts) -> list[str]:
    """The lines a person reads: per stream, the checks; why windows were not
    checked; and each process that ended during the run."""
    lines = summary_lines(verdicts.frames) + window_summary_lines(verdicts.windows)
    if verdicts.windows_not_computed:
        lines.append(f"windows: not computed ({verdicts.windows_not_computed})")
    for fault in record.faults:
        cause = "as the schedule asked" if fault.planned else f"during the {fault.phase}"
        lines.append(f"{fault.what} {exit_text(fault.exit)} {cause}; its missing events are counted lost there")
    return lines + verdicts.not_applied
