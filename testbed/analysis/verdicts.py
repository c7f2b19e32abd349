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

from testbed.analysis.cepcheck import (
    SinkCheck,
    cep_summary_lines,
    check_against_spark,
    check_complex_events,
    rules_of,
    timeline_of,
)
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
from testbed.analysis.operatorlag import summarize
from testbed.rundir import RunDir, RunRecord, RunVerdicts, SparkLag, read_json
from testbed.runs.progress import exit_text
from testbed.semantics.instances import host_of


def account(record: RunRecord, rundir: RunDir, sources: pd.DataFrame, deliveries: pd.DataFrame,
            results: dict[int, StreamCheck]) -> dict[str, Any]:
    """Every event: sent, received by each operator, dropped and why, lost and where."""
    received = deliveries.groupby(["stream", "operator"]).size()
    # a dict: a Series lookup per (stream, operator) costs a minute at 4,096 streams of 64
    received_by = {(int(sid), op): int(n) for (sid, op), n in received.items()}
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
        per_operator = {op: received_by.get((sid, op), 0) for op in stream["operators"]}
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
    if record.path is not None and switch is not None:
        out["where_lost"] = where_lost(record, out["streams"], receivers, received, dead)
    if dead:
        # A receiver that died recorded nothing after its death: what its operator
        # misses is lost there, not in the network.
        out["lost_at_dead_receivers"] = {host: lost_at_host(out["streams"], host) for host in sorted(dead)}
    return out


def where_lost(record: RunRecord, streams: dict[str, Any], receivers: dict[str, dict[str, int]],
               received: pd.Series, dead: set[str]) -> dict[str, Any]:
    """Per host, the events lost on its path and the places whose drop counters
    account for them, in path order (``attribute``).

    Before the switch, a source host's losses are its streams' events the
    switch never counted: its link end's drops, the switch's end, then the
    switch's packet socket.  After the switch, an operator host's losses are
    the copies the switch sent to its port that its receiver never recorded:
    the switch's send errors, the switch's link end, the operator's end, then
    its UDP socket.  Copies the check missed beyond those never left the
    switch (``never_left``).  A receiver that died lost what came after its death."""
    path, switch = record.path, record.switch
    socket_stats = switch.socket or {}
    sources: dict[str, Any] = {}
    for sid, acct in streams.items():
        host = record.streams[sid]["source"]
        if acct["lost_before_switch"] is not None:
            sources[host] = sources.get(host, 0) + acct["lost_before_switch"]
    out: dict[str, Any] = {"sources": {}, "operators": {}}
    for host, lost in sources.items():
        port = str(record.switch_ports[host])
        own, far = path.hosts.get(host), path.switch_ports.get(port)
        places = [("source link end", own.tx_dropped + own.tx_errors if own else 0),
                  ("switch link end", far.rx_dropped + far.rx_errors if far else 0),
                  ("switch socket", max(path.switch_sockets.get(port, 0),
                                        (socket_stats.get(port) or {}).get("rx_dropped", 0)))]
        out["sources"][host] = {"lost": lost, "where": attribute(lost, places, uncounted_on_the_way_in(record.target))}
    # The switch counts a port's copies; a host that runs several instances adds
    # theirs up, and the hosts of a rack, all behind one port, add up theirs.
    host_of_received = received.index.get_level_values("operator").map(host_of) if len(received) else None
    racks = {host: rack for rack, r in (record.topology.get("racks") or {}).items() for host in r["hosts"]}
    on_port: dict[str, list[str]] = {}
    for host in record.operator_hosts:
        on_port.setdefault(str(record.switch_ports[host]), []).append(host)
    for port, hosts in on_port.items():
        got = sum(int(received[host_of_received == host].sum()) for host in hosts) if len(received) else 0
        lost = max(0, switch.ports.get(port, 0) - got)
        inside = max(0, sum(lost_at_host(streams, host) for host in hosts) - lost)
        if lost + inside == 0:
            continue
        name = "+".join(hosts)       # a rack's hosts are one entry: the switch cannot tell their copies apart
        where = {never_left(record.target): inside} if inside else {}
        if set(hosts) & dead:
            where |= {"receiver died": lost} if lost else {}
        else:
            far, owns = path.switch_ports.get(port), [path.hosts.get(host) for host in hosts]
            rack = racks.get(hosts[0])
            places = [("switch send errors", (socket_stats.get(port) or {}).get("tx_errors", 0)),
                      ("switch link end", far.tx_dropped + far.tx_errors if far else 0),
                      *([("rack bridge", bridge_drops(path.racks.get(rack, {})))] if rack else []),
                      ("operator link end", sum(own.rx_dropped + own.rx_errors for own in owns if own)),
                      ("operator socket", sum((receivers.get(host) or {}).get("rcvbuf_errors", 0)
                                              for host in hosts))]
            where |= attribute(lost, places)
        out["operators"][name] = {"lost": lost + inside, "where": where}
    return out


def bridge_drops(ports: dict[str, Any]) -> int:
    """Frames a rack's bridge dropped: taking them in (the uplink) or sending them on (host ports)."""
    return sum(c.rx_dropped + c.rx_errors if name.endswith("-eth0") else c.tx_dropped + c.tx_errors
               for name, c in ports.items())


def lost_at_host(streams: dict[str, Any], host: str) -> int:
    """Copies the check missed at ``host``'s operator instances, over all streams."""
    return sum(n for s in streams.values() for op, n in s["lost_per_operator"].items() if host_of(op) == host)


def never_left(target: str) -> str:
    """Where a copy went that the check expected at an operator and the switch's
    egress never counted (``operator_out`` is counted in egress).  On bmv2 that
    is the egress queue: simple_switch drops a packet when its port's queue is
    full (64 packets by default) and counts it nowhere.  The model has no
    queue, so there it would be a fault of the pipeline itself."""
    return "switch egress queue (full)" if target == "bmv2" else "inside the switch"


def uncounted_on_the_way_in(target: str) -> str:
    """Where an event went that reached no drop counter on its way in and that
    the switch's pipeline never counted.  On bmv2 that is the libpcap ring
    between the port's socket and simple_switch: the kernel counts a full
    ring's drops only for the ring's owner (``tp_drops``), not in the socket's
    ``skmem`` that ``ss`` reads, and simple_switch does not report them (how
    many frames the ring holds: ``docs/p4.md``, "What a stopped switch keeps").
    The model reads its sockets directly and reports their drops, so there it
    stays unknown."""
    return "switch libpcap ring (no counter: the rest)" if target == "bmv2" else "unknown"


def attribute(lost: int, places: list[tuple[str, int]], rest: str = "unknown") -> dict[str, int]:
    """``lost`` events spread over ``places`` in path order, each taking at most
    what its counter says it dropped (counters count every frame, heartbeats
    too, so they bound rather than name); what no counter covers is ``rest``."""
    where: dict[str, int] = {}
    left = max(0, lost)
    for place, dropped in places:
        taken = min(left, max(0, dropped))
        if taken:
            where[place] = taken
        left -= taken
    if left:
        where[rest] = left
    return where


def where_lost_lines(accounting: dict[str, Any]) -> list[str]:
    """One line per host that lost events on its path, naming where."""
    lines = []
    for side, label in (("sources", "before the switch, from"), ("operators", "in or after the switch, to")):
        for host, entry in sorted((accounting.get("where_lost") or {}).get(side, {}).items()):
            if entry["lost"] > 0:
                where = ", ".join(f"{place} {n}" for place, n in entry["where"].items())
                lines.append(f"lost {label} {host}: {entry['lost']} ({where})")
    return lines


@dataclass
class Verdicts:
    """The checks of a finished run, as the analysis made them."""

    frames: dict[int, StreamCheck]
    windows: dict[int, WindowCheck] = field(default_factory=dict)
    #: Why the windows were not checked, when the run asked for them.
    windows_not_computed: Optional[str] = None
    #: Schedule entries that never took effect, each with why.
    not_applied: list[str] = field(default_factory=list)
    #: Per host that lost events on its path, where (``where_lost_lines``).
    where_lost: list[str] = field(default_factory=list)
    #: How far the Spark operators fell behind (runs whose Spark application finished).
    spark_lag: Optional[SparkLag] = None
    #: Per sink of the CEP stage, its complex events against the oracle (topologies with cep:).
    complex_events: dict[str, SinkCheck] = field(default_factory=dict)
    #: The same against the Spark job's centralized reference (with cep: and Spark).
    complex_events_spark: dict[str, SinkCheck] = field(default_factory=dict)
    #: Why Spark's complex events could not be compared, when the run computed windows with cep: rules.
    complex_events_spark_missing: Optional[str] = None

    @property
    def ok(self) -> bool:
        return (all(r.ok for r in self.frames.values()) and all(w.ok for w in self.windows.values())
                and self.windows_not_computed is None and self.complex_events_spark_missing is None
                and all(c.ok for c in [*self.complex_events.values(), *self.complex_events_spark.values()]))


def frame_check(record: RunRecord, rundir: RunDir) -> dict[int, StreamCheck]:
    """The frame check of a collected run, per stream."""
    return check_frames(record, pd.read_parquet(rundir.sources), pd.read_parquet(rundir.deliveries),
                        read_link_drops(rundir))


def why_no_windows(record: RunRecord) -> Optional[str]:
    """Why a run that started its Spark application has no windows to check:
    the application failed, or the run ended before it finished; ``None``
    when nothing in the record says they are missing."""
    failure = record.spark_failed()
    if failure is not None:
        return f"the Spark application failed: {failure.splitlines()[0]}"
    if record.spark_started() and record.spark is None:
        return "the run ended before its Spark application finished" + (f" ({record.error})" if record.error else "")
    return None


def evaluate(record: RunRecord, rundir: RunDir, with_windows: bool,
             frames: Optional[dict[int, StreamCheck]] = None) -> Verdicts:
    """Check the run's deliveries (and windows, ``with_windows``) and write
    ``verdicts.json``; ``frames`` is the frame check if it was already made.

    A run that asked for windows and has none (``why_no_windows``) is not
    ``ok``: its windows were never checked."""
    sources, deliveries = pd.read_parquet(rundir.sources), pd.read_parquet(rundir.deliveries)
    verdicts = Verdicts(frames if frames is not None else
                        check_frames(record, sources, deliveries, read_link_drops(rundir)))
    missing = why_no_windows(record) if with_windows else None
    if with_windows and missing is None:
        # Windows a failed operator owned are the failure's: named, not failures of the splitter.
        verdicts.windows = check_windows(rundir, record, failed_operators_windows(verdicts.frames))
    elif with_windows:
        verdicts.windows_not_computed = missing
    verdicts.not_applied = not_applied(record)
    rules = rules_of(record)
    if rules is not None:
        received = pd.read_parquet(rundir.complex_events) if rundir.complex_events.exists() else None
        timeline = timeline_of(record)
        verdicts.complex_events = check_complex_events(rules, sources, verdicts.frames, received, timeline)
        if with_windows and missing is None:
            reference = rundir.complex_events_reference
            if reference.exists():
                verdicts.complex_events_spark = check_against_spark(rules, pd.read_parquet(reference), received,
                                                                    timeline)
            else:
                verdicts.complex_events_spark_missing = f"{reference}: missing (the Spark job computed no reference)"
    accounting = account(record, rundir, sources, deliveries, verdicts.frames)
    verdicts.where_lost = where_lost_lines(accounting)
    if with_windows and missing is None and (record.spark or {}).get("live"):
        verdicts.spark_lag = spark_lag(summarize(record.spark, sources, deliveries), accounting)
    rundir.write_verdicts(RunVerdicts(
        checked_at=time.time(), ok=verdicts.ok, not_applied=verdicts.not_applied,
        accounting=accounting,
        check={str(k): v.as_json() for k, v in verdicts.frames.items()},
        window_check={str(k): v.as_json() for k, v in verdicts.windows.items()},
        windows_not_computed=verdicts.windows_not_computed, spark_lag=verdicts.spark_lag,
        complex_events={sink: c.as_json() for sink, c in verdicts.complex_events.items()} if rules else None,
        complex_events_spark={sink: c.as_json() for sink, c in verdicts.complex_events_spark.items()}
        if verdicts.complex_events_spark else None,
        complex_events_spark_missing=verdicts.complex_events_spark_missing))
    return verdicts


def spark_lag(live: dict[str, Any], accounting: dict[str, Any]) -> SparkLag:
    """The operators' lag over the run (``operatorlag.summarize``), and the events the switch lost meanwhile."""
    lost = sum(max(s.get("lost_before_switch") or 0, 0) + max(s.get("lost_after_switch") or 0, 0)
               for s in accounting.get("streams", {}).values())
    fields = [name for name in SparkLag.model_fields if name != "switch_lost"]
    return SparkLag(switch_lost=lost, **{name: live.get(name) for name in fields})


def fmt_s(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


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
    lines = (summary_lines(verdicts.frames) + window_summary_lines(verdicts.windows)
             + cep_summary_lines(verdicts.complex_events)
             + cep_summary_lines(verdicts.complex_events_spark, " against Spark's reference"))
    if verdicts.complex_events_spark_missing:
        lines.append(f"complex events against Spark's reference: not compared "
                     f"({verdicts.complex_events_spark_missing})")
    if verdicts.windows_not_computed:
        lines.append(f"windows: not computed ({verdicts.windows_not_computed})")
    lag = verdicts.spark_lag
    if lag is not None:
        lines.append(f"operators: Spark {'kept up' if lag.keeps_up else 'fell behind'} (lag up to "
                     f"{fmt_s(lag.max_lag_s)}, {lag.max_backlog_events or 0} copies; "
                     f"growth {fmt_s(lag.lag_growth)}/s); "
                     f"result latency p50 {fmt_s(lag.result_p50_s)}, p99 {fmt_s(lag.result_p99_s)}; "
                     f"{lag.switch_lost} events lost at the switch meanwhile")
    for fault in record.faults:
        cause = "as the schedule asked" if fault.planned else f"during the {fault.phase}"
        lines.append(f"{fault.what} {exit_text(fault.exit)} {cause}; its missing events are counted lost there")
    return lines + verdicts.where_lost + verdicts.not_applied
