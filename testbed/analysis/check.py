"""``testbed check``: deliveries of a run held against the oracle.

The oracle knows the stream's epochs: run.json's ``changes`` records each
change the switch applied and where on the axis it did, so a run with
reconfigurations is checked against the same definition, event by event.
Every event the switch saw must reach exactly the operators the window
definition names: none missing, none extra, none twice.  Events the
definition sends nowhere (gaps, before the origin, too late) must reach
nobody.  Events lost before the switch count once, as lost.  The window
check compares the operators' results with a centralized run and names the
windows that differ because an event in them was too late.
"""
from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np
import pandas as pd

from testbed.rundir import RunDir, RunDirError, RunRecord
from testbed.semantics.completion import live_differences
from testbed.semantics.topology import Stream
from testbed.semantics.windows import TOO_LATE


@dataclass
class StreamCheck:
    stream: int
    sent: int = 0
    expected: int = 0          # (event, operator) copies the oracle asks for
    delivered: int = 0         # expected copies deliveries.parquet holds (each counted once)
    missing: int = 0           # expected copies that did not arrive (event reached the switch)
    extra: int = 0
    duplicates: int = 0
    lost_on_link: int = 0      # events a link relay dropped before the switch
    lost_before_switch: int = 0  # other events the switch never counted
    by_design: dict[str, int] = field(default_factory=dict)   # events sent to nobody, per reason
    missing_by_operator: dict[str, int] = field(default_factory=dict)
    lost_at_failed: int = 0    # copies a failed operator (schedule: fail) never recorded
    affected_windows: list[int] = field(default_factory=list)   # windows those copies belonged to
    unseen: list[int] = field(default_factory=list)             # seqs of the lost_before_switch events
    lost_on_link_seqs: list[int] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        """Events that never reached the switch: each counts once, whatever it would have started."""
        return self.lost_on_link + self.lost_before_switch

    @property
    def delivered_nothing(self) -> bool:
        """Events were expected and not one copy of them was recorded.  A loss
        can be explained (a lossy link, a failed operator), but a verdict
        needs evidence: a stream that delivered nothing has none."""
        return self.delivered == 0 and (self.expected > 0 or self.lost > 0)

    @property
    def ok(self) -> bool:
        """Every event the switch saw went where the definition says.  Events a
        lossy link dropped are named and explained; any other loss fails, and
        so does a stream that delivered nothing at all."""
        return not (self.missing or self.extra or self.duplicates or self.lost_before_switch
                    or self.delivered_nothing)

    def as_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "expected_deliveries": self.expected, "delivered": self.delivered,
                "missing": self.missing, "missing_by_operator": self.missing_by_operator,
                "extra": self.extra, "duplicates": self.duplicates,
                "lost_on_link": self.lost_on_link, "lost_before_switch": self.lost_before_switch,
                "lost_at_failed_operators": self.lost_at_failed, "windows_affected_by_failure": self.affected_windows,
                "undelivered_by_design": self.by_design, "ok": self.ok, "examples": self.examples[:10]}


@dataclass
class Expectation:
    """What the definition asks for, over the events the switch actually saw."""

    copies: Counter = field(default_factory=Counter)       # (seq, operator) -> copies
    by_design: Counter = field(default_factory=Counter)    # reason -> events
    lost_on_link: list[int] = field(default_factory=list)  # seqs
    unseen: list[int] = field(default_factory=list)        # seqs the switch never counted
    late_windows: set[int] = field(default_factory=set)    # windows a too_late event would have been in
    #: (seq, failed operator) -> the windows of that event the operator owns
    owned_by_failed: dict = field(default_factory=dict)


def expected_deliveries(stream: Stream, sent: pd.DataFrame, received: Optional[Counter] = None,
                        unseen: int = 0, link_drops: Iterable[int] = (),
                        changes: Optional[list[dict[str, Any]]] = None,
                        failed: Iterable[str] = ()) -> Expectation:
    """Walk the oracle over the events the switch saw, in send order.

    ``sent`` must be in send order; for one source per stream over one link
    that is the order the splitter receives them in.  Events a link relay
    dropped (``link_drops``, seqs) never reached the switch.  ``unseen`` more
    events went missing before the switch (its counters say how many but not
    which): those are taken to be the first events that no operator
    received although the definition sends them somewhere.  Count windows
    number only the events the switch saw, as the switch does, so a loss
    counts once instead of shifting every later window.  ``changes`` (as
    ``Stream.recorded_changes`` reads them) are the epochs the switch went through.
    For operators that ``failed``, each event's windows they own are kept,
    so that the windows a failure affected can be named.
    """
    oracle = stream.oracle(stream.recorded_changes(changes))
    out = Expectation()
    failed = set(failed)
    link = Counter(link_drops)
    keys = sent["key"].tolist() if "key" in sent else [0] * len(sent)
    for seq, ts, key in zip(sent["seq"].tolist(), sent["ts"].tolist(), keys):
        if link[seq]:
            link[seq] -= 1
            out.lost_on_link.append(seq)
            continue
        before = copy.copy(oracle) if unseen and received is not None and not received[seq] else None
        verdict = oracle.step(seq, ts, key)
        if before is not None and verdict.operators:
            oracle, unseen = before, unseen - 1
            out.unseen.append(seq)
            continue
        if verdict.dropped:
            out.by_design[verdict.dropped] += 1
            if verdict.dropped == TOO_LATE:
                out.late_windows.update(oracle.windows_at(ts - (oracle.origin or 0)))
        for op in verdict.operators:
            out.copies[(seq, op)] += 1
            if op in failed:
                out.owned_by_failed[(seq, op)] = tuple(w for w in verdict.windows if oracle.owner(w, key) == op)
    return out


def switch_unseen(record: RunRecord, sid: int, sent: int, link_lost: int) -> int:
    """Events of a stream that reached neither the switch's pipeline counters nor a
    link relay's drop records: sent - (accepted + dropped at the switch) - lost on a link.
    Without the switch's counters (a run that ended early) nothing is known unseen."""
    counters = record.switch.streams.get(str(sid)) if record.switch is not None else None
    if counters is None:
        return 0
    seen = counters.accepted + sum(counters.dropped.values())
    return max(0, sent - link_lost - seen)


class Columns:
    """Some rows of a table as numpy arrays by column: what the check reads of
    one stream's events or copies (``len``, ``in``, ``[column].tolist()``).
    Pandas makes a DataFrame per group slowly: minutes for 65,536 streams."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays

    def __getitem__(self, column: str) -> np.ndarray:
        return self.arrays[column]

    def __contains__(self, column: str) -> bool:
        return column in self.arrays

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.arrays)


def by_stream(table: pd.DataFrame) -> tuple[dict[int, Columns], Columns]:
    """``table``'s rows per stream, each stream's in the table's order, and no rows
    (for a stream without any): one stable sort and a slice per column."""
    streams = table["stream"].to_numpy()
    order = np.argsort(streams, kind="stable")
    keys = streams[order]
    columns = {c: table[c].to_numpy()[order] for c in table.columns}
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(keys)]
    split = {int(keys[a]): Columns({c: v[a:b] for c, v in columns.items()})
             for a, b in zip(starts.tolist(), ends.tolist())}
    return split, Columns({c: v[:0] for c, v in columns.items()})


def check_frames(record: RunRecord, sources: pd.DataFrame, deliveries: pd.DataFrame,
                 link_drops: Optional[pd.DataFrame] = None) -> dict[int, StreamCheck]:
    """Per stream of the run, the deliveries against the oracle.

    The record brings the streams, the switch's counters, the changes and
    failures, and ``link_drops`` (stream, seq) the events link relays
    dropped; with them the check knows which events the switch saw
    (``expected_deliveries``).
    """
    results: dict[int, StreamCheck] = {}
    failed = record.failed_hosts()
    # Split once: filtering the whole table per stream is quadratic in the number of streams.
    sent_by, no_sent = by_stream(sources.sort_values("send_ns", kind="stable"))
    got_by, no_got = by_stream(deliveries)
    drops_by = {} if link_drops is None else dict(tuple(link_drops.groupby("stream", sort=False)))
    for sid_text, stream_record in record.streams.items():
        sid = int(sid_text)
        sent = sent_by.get(sid, no_sent)
        got = got_by.get(sid, no_got)
        dropped = drops_by[sid]["seq"].tolist() if sid in drops_by else []
        counts = Counter(zip(got["seq"].tolist(), got["operator"].tolist()))
        unseen = switch_unseen(record, sid, len(sent), len(dropped))
        exp = expected_deliveries(Stream.from_record(stream_record), sent, Counter(got["seq"].tolist()),
                                  unseen, dropped, record.stream_changes(sid), failed)
        res = StreamCheck(sid, sent=len(sent), expected=sum(exp.copies.values()), by_design=dict(exp.by_design),
                          lost_on_link=len(exp.lost_on_link), lost_before_switch=len(exp.unseen),
                          unseen=exp.unseen, lost_on_link_seqs=exp.lost_on_link)
        missing = exp.copies - counts
        # Copies a failed operator never recorded while it was down are the
        # failure's, not the splitter's; one missing while it was up is not.
        outages = outage_spans(record, sent.frame(), got.frame()) if failed else {}
        at_failed = {pair: n for pair, n in missing.items()
                     if any(after < pair[0] < until for after, until in outages.get(pair[1], ()))}
        missing = missing - Counter(at_failed)
        res.lost_at_failed = sum(at_failed.values())
        res.affected_windows = sorted({w for pair in at_failed for w in exp.owned_by_failed.get(pair, ())})
        surplus = counts - exp.copies
        extra = {pair: n for pair, n in surplus.items() if pair not in exp.copies}
        twice = {pair: n for pair, n in surplus.items() if pair in exp.copies}
        res.missing, res.extra, res.duplicates = sum(missing.values()), sum(extra.values()), sum(twice.values())
        res.missing_by_operator = dict(sorted(Counter(op for (_, op), n in missing.items()
                                                      for _ in range(n)).items()))
        # What was recorded, not what the oracle asked for less what is unexplained:
        # copies excused by a failure were not delivered either.
        res.delivered = sum((exp.copies & counts).values())
        if res.delivered_nothing:
            res.examples.append(f"nothing delivered: {res.expected} copies expected, none recorded"
                                + (f"; {res.lost} events lost before the switch" if res.lost else ""))
        res.examples += [f"missing: seq {seq} at {op}" for seq, op in sorted(missing)[:5]]
        res.examples += [f"extra: seq {seq} at {op}" for seq, op in sorted(extra)[:5]]
        res.examples += [f"duplicate: seq {seq} at {op} x{counts[(seq, op)]}" for seq, op in sorted(twice)[:5]]
        for label, seqs in (("lost on the link", exp.lost_on_link), ("never reached the switch", exp.unseen)):
            if seqs:
                res.examples.append(f"{label}: {len(seqs)} events, first seqs {', '.join(map(str, seqs[:5]))}")
        results[sid] = res
    return results


def outage_spans(record: RunRecord, sent: pd.DataFrame,
                 got: pd.DataFrame) -> dict[str, list[tuple[float, float]]]:
    """Per failed operator, the seqs of one stream its failures explain, as
    open spans: from the last copy it recorded before it came back (before
    the end, if it never did) to the first copy it recorded after.

    An operator records its copies in the order the source sent them (one
    source, one switch, one link), so a copy missing before the last one it
    recorded ahead of its failure was lost while it was up: the splitter's
    or the network's doing, and not excused."""
    adaptation = record.adaptation or {}
    recoveries = adaptation.get("recoveries", [])
    send_ns = dict(zip(sent["seq"].tolist(), sent["send_ns"].tolist()))
    recorded_by = {host: sorted(set(seqs)) for host, seqs in got.groupby("operator")["seq"]}
    spans: dict[str, list[tuple[float, float]]] = {}
    for failure in adaptation.get("failures", []):
        host = failure["host"]
        back = min((r["at"] for r in recoveries if r["host"] == host and r["at"] >= failure["at"]), default=None)
        recorded = recorded_by.get(host, [])
        until = math.inf if back is None else next(
            (seq for seq in recorded if send_ns.get(seq, -1) >= back * 1e9), math.inf)
        after = max((seq for seq in recorded if seq < until), default=-1)
        spans.setdefault(host, []).append((after, until))
    return spans


def events_the_switch_never_saw(results: dict[int, StreamCheck]) -> dict[str, list[int]]:
    """Per stream, the seqs of events lost on a link or before the switch:
    the centralized reference leaves them out, as the switch's windows did,
    so a loss counts once (in the frame check) and not again in every
    count window after it."""
    return {str(sid): sorted(r.unseen + r.lost_on_link_seqs) for sid, r in results.items()
            if r.unseen or r.lost_on_link_seqs}


def failed_operators_windows(results: dict[int, StreamCheck]) -> dict[int, set[int]]:
    """Per stream, the windows a failed operator owned (for ``check_windows``)."""
    return {sid: set(r.affected_windows) for sid, r in results.items() if r.affected_windows}


def require_run(rundir: RunDir, tables: tuple[str, ...], analysis: bool = False) -> RunRecord:
    """The record of a run whose files the tools can read (``RunDir.require``),
    whose streams are valid topology streams and name every stream of its raw
    data; else ``RunDirError`` naming the file and the key."""
    from pydantic import ValidationError

    from testbed.semantics.topology import describe

    record = rundir.require(tables, analysis)
    for sid, stream in record.streams.items():
        try:
            Stream.from_record(stream)
        except ValidationError as err:
            raise RunDirError(f"{rundir.record}: streams.{sid}.{describe(err)}") from None
    # Events of a stream the record does not name would go unjudged, and a damaged record pass.
    for table in ("sources", "deliveries"):
        path = getattr(rundir, table)
        ids = set(pd.read_parquet(path, columns=["stream"])["stream"].unique().tolist())
        unknown = sorted(ids - {int(s) for s in record.streams})
        if unknown:
            raise RunDirError(f"{path}: stream {unknown[0]} is not among {rundir.record.name}'s streams "
                              f"({', '.join(record.streams) or 'none'})")
    return record


#: The tables every collected run writes, with Spark or without.
RUN_TABLES = ("sources", "deliveries")


def spark_tables(record: RunRecord, rundir: RunDir) -> tuple[str, ...]:
    """The tables of the Spark application a run's check reads: the windows and
    their reference, and with ``cep:`` rules Spark's complex events.  Whenever
    the record says the application finished (``RunRecord.spark_computed``)
    they are part of the run; windows found without that fact (a hand-made
    run) are judged all the same."""
    computed = record.spark_computed()
    tables = ("windows", "windows_reference") if computed or rundir.windows.exists() else ()
    return tables + (("complex_events_reference",) if computed and (record.topology or {}).get("cep") else ())


def promised_but_missing(path: Path) -> RunDirError:
    """A table the Spark application wrote by the record's word, and that is not there."""
    return RunDirError(f"{path}: missing, though run.json says the Spark application finished and wrote it")


def require_evidence(rundir: RunDir) -> RunRecord:
    """``require_run`` with every table the run's record says it wrote: a run
    whose windows are gone is refused, not judged as a run without Spark."""
    record = require_run(rundir, RUN_TABLES)
    tables = spark_tables(record, rundir)
    if record.spark_computed():
        for table in tables:
            if not getattr(rundir, table).exists():
                raise promised_but_missing(getattr(rundir, table))
    rundir.require(tables)
    return record


def check_run(rundir: RunDir, record: Optional[RunRecord] = None) -> dict[int, StreamCheck]:
    """The frame check of a collected run (its record read from ``rundir`` unless given)."""
    record = record if record is not None else rundir.read_record()
    return check_frames(record, pd.read_parquet(rundir.sources), pd.read_parquet(rundir.deliveries),
                        read_link_drops(rundir))


def read_link_drops(rundir: RunDir) -> Optional[pd.DataFrame]:
    """(stream, seq) of events link relays dropped on their way to the switch, if any relay ran."""
    return pd.read_parquet(rundir.link_drops) if rundir.link_drops.exists() else None


#: Past this many streams the summary counts those that pass and shows at most
#: this many that do not: 65,536 streams' lines took minutes to print.
SUMMARY_STREAMS = 64


def verdict_lines(results: dict, headline) -> list[str]:
    """Per stream, ``headline(sid, result)`` and then the result's examples, indented.

    Many streams: how many pass, then the first ``SUMMARY_STREAMS`` that do
    not (``verdicts.json`` holds every stream's)."""
    lines = []
    many = len(results) > SUMMARY_STREAMS
    passed = shown = 0
    for sid, r in sorted(results.items()):
        if many and r.ok and not r.examples:
            passed += 1
            continue
        shown += 1
        if many and shown > SUMMARY_STREAMS:
            continue
        lines.append(headline(sid, r))
        lines += [f"    {e}" for e in r.examples]
    if many:
        failing = len(results) - passed
        others = f"; the first {min(failing, SUMMARY_STREAMS)} of the {failing:,} others:" if failing else ""
        lines.insert(0, f"{passed:,} of {len(results):,} streams OK; each stream's counts are in verdicts.json"
                        + others)
    return lines


def summary_lines(results: dict[int, StreamCheck]) -> list[str]:
    def headline(sid: int, r: StreamCheck) -> str:
        design = ", ".join(f"{k}={v}" for k, v in sorted(r.by_design.items())) or "none"
        return (f"stream {sid}: {'OK  ' if r.ok else 'FAIL'} sent={r.sent} expected={r.expected} "
                f"delivered={r.delivered} missing={r.missing} extra={r.extra} "
                f"duplicates={r.duplicates} lost-on-link={r.lost_on_link} "
                f"lost-before-switch={r.lost_before_switch} undelivered-by-design: {design}"
                + (f" lost-at-failed-operators={r.lost_at_failed} windows-affected={len(r.affected_windows)}"
                   if r.lost_at_failed else ""))
    return verdict_lines(results, headline)


# ---------------------------------------------------------------------------
# end to end: the operators' windowed results against a centralized run
# ---------------------------------------------------------------------------
@dataclass
class WindowCheck:
    stream: int
    reference: int = 0       # windows (per key) the centralized job produced
    produced: int = 0
    matching: int = 0
    mismatched: int = 0      # same events counted, different result, or wrong operator
    incomplete: int = 0      # fewer events than the reference window holds
    missing: int = 0
    extra: int = 0
    #: Windows that are short or missing because events in them were too
    #: late: the splitter dropped them as the definition says, so these are
    #: explained, not failures.
    too_late: int = 0
    #: Windows that are short or missing because an operator that owned them
    #: failed during the run (the frame check names them): the failure's, not
    #: the splitter's.
    failed: int = 0
    #: Windows the live merger emitted as complete with another result than
    #: their final one (docs/spark.md): a completion rule that fired early.
    live_differs: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.matching + self.too_late + self.failed == self.reference
                and not (self.mismatched or self.incomplete or self.missing or self.extra or self.live_differs))

    def as_json(self) -> dict[str, Any]:
        return {"reference_windows": self.reference, "produced_windows": self.produced,
                "matching": self.matching, "mismatched": self.mismatched, "incomplete": self.incomplete,
                "missing": self.missing, "extra": self.extra, "affected_by_lateness": self.too_late,
                "affected_by_failure": self.failed, "live_differs": self.live_differs,
                "ok": self.ok, "examples": self.examples[:10]}


def unequal(a: pd.Series, b: pd.Series) -> pd.Series:
    """Where two columns differ.  A missing value or NaN equals nothing, not
    even itself: a result nobody computed must never pass for the reference's."""
    return ~(a == b).fillna(False).astype(bool)


def results_differ(got: pd.Series, ref: pd.Series) -> pd.Series:
    """Where two window results differ by more than rounding (relative 1e-9).
    Only finite numbers can agree: NaN differs from everything, and an
    infinite reference would otherwise stretch the tolerance over any result."""
    got, ref = got.astype(float), ref.astype(float)
    close = np.isfinite(got) & np.isfinite(ref) & ((got - ref).abs() <= 1e-9 * ref.abs().clip(lower=1))
    return ~close


#: How ``compare_windows`` words its examples: the produced side, the
#: reference side, a window only the reference has, one only produced.
CHECK_LABELS = ("got", "reference", "missing", "extra")


def in_windows(rows: pd.DataFrame, windows: Optional[dict[int, set[int]]]) -> pd.Series:
    """Whether each row's (stream, window) is among ``windows`` (per stream)."""
    pairs = [(sid, w) for sid, ws in (windows or {}).items() for w in ws]
    if not pairs:
        return pd.Series(False, index=rows.index)
    named = pd.MultiIndex.from_tuples(pairs)
    return pd.Series(pd.MultiIndex.from_arrays([rows["stream"].astype("int64"), rows["window"].astype("int64")])
                     .isin(named), index=rows.index)


def compare_windows(produced: pd.DataFrame, reference: pd.DataFrame,
                    late_windows: Optional[dict[int, set[int]]] = None,
                    labels: tuple[str, str, str, str] = CHECK_LABELS,
                    failed_windows: Optional[dict[int, set[int]]] = None) -> dict[int, WindowCheck]:
    """Window by window: (stream, window, key) must agree on operator, events and result.

    ``late_windows`` names, per stream, the windows a too_late event would
    have been in; a short or missing window among them is explained.  So is
    one among ``failed_windows``, per stream the windows that an operator
    owned when it failed.
    ``testbed compare`` uses it on two runs' windows, with its own ``labels``.
    """
    got, ref, only_ref, only_got = labels
    keys = ["stream", "window", "key"]
    # Nullable counts, so the outer merge keeps them integers.
    p = produced.assign(key=produced["key"].fillna(-1).astype("int64"), n_events=produced["n_events"].astype("Int64"))
    r = reference.assign(key=reference["key"].fillna(-1).astype("int64"),
                         n_events=reference["n_events"].astype("Int64"))
    merged = r.merge(p, on=keys, how="outer", suffixes=("_ref", ""), indicator=True).reset_index(drop=True)
    # Every test is a mask over all streams' rows at once, then counted per
    # stream: a loop per stream took minutes at thousands of streams.
    left, right = merged["_merge"] == "left_only", merged["_merge"] == "right_only"
    both = merged["_merge"] == "both"
    fewer = (merged["n_events"] < merged["n_events_ref"]).fillna(False).astype(bool)
    # A window short of events may come out under another key than the
    # whole one (the key of a maximum, say): a row with fewer events than
    # its window had is that short window, not an extra one.
    whole = merged.groupby(["stream", "window"])["n_events_ref"].transform("sum")
    short_elsewhere = right & (merged["n_events"] < whole).fillna(False).astype(bool)
    late = in_windows(merged, late_windows)
    failed = in_windows(merged, failed_windows)
    late_short = late & short_elsewhere
    alive = ~late_short
    explained = alive & late & (left | (both & fewer))
    alive &= ~explained
    failed_short = alive & failed & short_elsewhere
    alive &= ~failed_short
    lost = alive & failed & (left | (both & fewer))
    alive &= ~lost
    kept = alive & both
    wrong = kept & ~fewer & (unequal(merged["n_events"], merged["n_events_ref"])
                             | results_differ(merged["result"], merged["result_ref"])
                             | unequal(merged["operator"], merged["operator_ref"]))
    short = kept & fewer
    masks = pd.DataFrame({"stream": merged["stream"], "reference": ~right, "produced": ~left,
                          "missing": left & ~explained & ~lost, "extra": right & ~late_short & ~failed_short,
                          "too_late": explained, "failed": lost, "incomplete": short, "mismatched": wrong,
                          "kept": kept})
    counts = masks.groupby("stream").sum()
    out: dict[int, WindowCheck] = {}
    for sid, c in counts.iterrows():
        res = WindowCheck(int(sid), reference=int(c["reference"]), produced=int(c["produced"]),
                          missing=int(c["missing"]), extra=int(c["extra"]), too_late=int(c["too_late"]),
                          failed=int(c["failed"]), incomplete=int(c["incomplete"]),
                          mismatched=int(c["mismatched"]))
        res.matching = int(c["kept"]) - res.incomplete - res.mismatched
        out[int(sid)] = res
    for _, row in merged[explained].groupby("stream").head(3).iterrows():
        arrived = row["n_events"] if row["_merge"] == "both" else 0
        out[int(row["stream"])].examples.append(f"window {row['window']} key {row['key']}: "
                                                f"{row['n_events_ref'] - arrived} of {row['n_events_ref']} "
                                                f"events were too late")
    for _, row in merged[short | wrong].groupby("stream").head(5).iterrows():
        out[int(row["stream"])].examples.append(
            f"window {row['window']} key {row['key']}: {got} {row['result']} from {row['n_events']} events at "
            f"{row['operator']}, {ref} {row['result_ref']} from {row['n_events_ref']} at {row['operator_ref']}")
    for _, row in merged[alive & ~both].groupby("stream").head(5).iterrows():
        out[int(row["stream"])].examples.append(f"window {row['window']} key {row['key']}: "
                                                f"{only_ref if row['_merge'] == 'left_only' else only_got}")
    return out


def check_windows(rundir: RunDir, record: Optional[RunRecord] = None,
                  failed_windows: Optional[dict[int, set[int]]] = None) -> dict[int, WindowCheck]:
    """Per stream, the operators' windows against a centralized computation.
    ``record`` is the run's record (read from the run directory if not
    given); ``failed_windows`` are, per stream, the windows a failed operator
    owned (``StreamCheck.affected_windows``)."""
    record = record if record is not None else rundir.read_record()
    sources = pd.read_parquet(rundir.sources)
    late: dict[int, set[int]] = {}
    by_stream = dict(iter(sources.groupby("stream", sort=False)))
    for sid_text, stream_record in record.streams.items():
        sent = by_stream.get(int(sid_text), sources.iloc[:0]).sort_values("send_ns", kind="stable")
        late[int(sid_text)] = expected_deliveries(Stream.from_record(stream_record), sent,
                                                  changes=record.stream_changes(sid_text)).late_windows
    windows = pd.read_parquet(rundir.windows)
    results = compare_windows(windows, pd.read_parquet(rundir.windows_reference), late, failed_windows=failed_windows)
    for sid, differs in live_differences(windows).items():
        if sid in results:
            results[sid].live_differs = len(differs)
            results[sid].examples += [f"window {w}: emitted live as complete, then changed" for w in differs[:3]]
    return results


def window_summary_lines(results: dict[int, WindowCheck]) -> list[str]:
    return verdict_lines(results, lambda sid, r: (
        f"stream {sid} windows: {'OK  ' if r.ok else 'FAIL'} reference={r.reference} "
        f"produced={r.produced} matching={r.matching} mismatched={r.mismatched} "
        f"incomplete={r.incomplete} missing={r.missing} extra={r.extra} affected-by-lateness={r.too_late}"
        + (f" affected-by-failure={r.failed}" if r.failed else "")
        + (f" live-differs={r.live_differs}" if r.live_differs else "")))
