"""``testbed check``: deliveries of a run held against the oracle.

Every sent event must reach exactly the operators the window definition
names: none missing, none extra, none twice.  Events the definition sends
nowhere (gaps, before the origin, out of order) must reach nobody.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from testbed.runs.rundir import RunDir
from testbed.semantics.topology import Stream


@dataclass
class StreamCheck:
    stream: int
    sent: int = 0
    expected: int = 0          # (event, operator) deliveries the oracle asks for
    delivered: int = 0         # distinct (event, operator) pairs received
    missing: int = 0
    extra: int = 0
    duplicates: int = 0
    by_design: dict[str, int] = field(default_factory=dict)   # events sent to nobody, per reason
    missing_by_operator: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0 and self.duplicates == 0

    def as_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "expected_deliveries": self.expected, "delivered": self.delivered,
                "missing": self.missing, "missing_by_operator": self.missing_by_operator,
                "extra": self.extra, "duplicates": self.duplicates,
                "undelivered_by_design": self.by_design, "ok": self.ok, "examples": self.examples[:10]}


def expected_deliveries(stream: Stream, sent: pd.DataFrame) -> tuple[set, Counter]:
    """``{(seq, operator)}`` the oracle asks for, and the by-design drop counts.

    ``sent`` must be in send order; for one source per stream over one link
    that is the order the splitter receives them in.
    """
    oracle = stream.oracle()
    pairs: set = set()
    dropped: Counter = Counter()
    for seq, ts in zip(sent["seq"].tolist(), sent["ts"].tolist()):
        verdict = oracle.step(seq, ts)
        if verdict.dropped:
            dropped[verdict.dropped] += 1
        for op in verdict.operators:
            pairs.add((seq, op))
    return pairs, dropped


def check_frames(streams: dict[str, dict[str, Any]], sources: pd.DataFrame,
                 deliveries: pd.DataFrame) -> dict[int, StreamCheck]:
    """Per stream (``streams`` as run.json keeps them), the deliveries against the oracle."""
    results: dict[int, StreamCheck] = {}
    # Split once: filtering the whole table per stream is quadratic in the number of streams.
    sent_by = dict(tuple(sources.sort_values("send_ns", kind="stable").groupby("stream", sort=False)))
    got_by = dict(tuple(deliveries.groupby("stream", sort=False)))
    for sid_text, record in streams.items():
        sid = int(sid_text)
        sent = sent_by.get(sid, sources.iloc[:0])
        got = got_by.get(sid, deliveries.iloc[:0])
        expected, dropped = expected_deliveries(Stream.from_record(record), sent)
        counts = Counter(zip(got["seq"].tolist(), got["operator"].tolist()))
        res = StreamCheck(sid, sent=len(sent), expected=len(expected), by_design=dict(dropped))
        res.delivered = sum(1 for pair in counts if pair in expected)
        res.duplicates = sum(n - 1 for n in counts.values() if n > 1)
        extra = [p for p in counts if p not in expected]
        missing = [p for p in expected if p not in counts]
        res.extra, res.missing = len(extra), len(missing)
        res.missing_by_operator = dict(sorted(Counter(op for _, op in missing).items()))
        for seq, op in sorted(missing)[:5]:
            res.examples.append(f"missing: seq {seq} at {op}")
        for seq, op in sorted(extra)[:5]:
            res.examples.append(f"extra: seq {seq} at {op}")
        for (seq, op), n in list(counts.items()):
            if n > 1 and len(res.examples) < 10:
                res.examples.append(f"duplicate: seq {seq} at {op} x{n}")
        results[sid] = res
    return results


def check_run(rundir: RunDir) -> dict[int, StreamCheck]:
    return check_frames(rundir.read_record()["streams"], pd.read_parquet(rundir.sources),
                        pd.read_parquet(rundir.deliveries))


def summary_lines(results: dict[int, StreamCheck]) -> list[str]:
    lines = []
    for sid, r in sorted(results.items()):
        design = ", ".join(f"{k}={v}" for k, v in sorted(r.by_design.items())) or "none"
        lines.append(f"stream {sid}: {'OK  ' if r.ok else 'FAIL'} sent={r.sent} expected={r.expected} "
                     f"delivered={r.delivered} missing={r.missing} extra={r.extra} "
                     f"duplicates={r.duplicates} undelivered-by-design: {design}")
        lines += [f"    {e}" for e in r.examples]
    return lines


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
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.matching == self.reference and not (self.mismatched or self.incomplete
                                                        or self.missing or self.extra)

    def as_json(self) -> dict[str, Any]:
        return {"reference_windows": self.reference, "produced_windows": self.produced,
                "matching": self.matching, "mismatched": self.mismatched, "incomplete": self.incomplete,
                "missing": self.missing, "extra": self.extra, "ok": self.ok, "examples": self.examples[:10]}


def compare_windows(produced: pd.DataFrame, reference: pd.DataFrame) -> dict[int, WindowCheck]:
    """Window by window: (stream, window, key) must agree on operator, events and result."""
    keys = ["stream", "window", "key"]
    p = produced.assign(key=produced["key"].fillna(-1).astype("int64"))
    r = reference.assign(key=reference["key"].fillna(-1).astype("int64"))
    merged = r.merge(p, on=keys, how="outer", suffixes=("_ref", ""), indicator=True)
    out: dict[int, WindowCheck] = {}
    for sid, rows in merged.groupby("stream"):
        res = WindowCheck(int(sid))
        res.reference = int((rows["_merge"] != "right_only").sum())
        res.produced = int((rows["_merge"] != "left_only").sum())
        res.missing = int((rows["_merge"] == "left_only").sum())
        res.extra = int((rows["_merge"] == "right_only").sum())
        both = rows[rows["_merge"] == "both"]
        short = both["n_events"] < both["n_events_ref"]
        tolerance = 1e-9 * both["result_ref"].abs().clip(lower=1)
        wrong = ~short & ((both["n_events"] != both["n_events_ref"])
                          | ((both["result"] - both["result_ref"]).abs() > tolerance)
                          | (both["operator"] != both["operator_ref"]))
        res.incomplete, res.mismatched = int(short.sum()), int(wrong.sum())
        res.matching = len(both) - res.incomplete - res.mismatched
        for _, row in both[short | wrong].head(5).iterrows():
            res.examples.append(f"window {row['window']} key {row['key']}: got {row['result']} from "
                                f"{row['n_events']} events at {row['operator']}, reference {row['result_ref']} "
                                f"from {row['n_events_ref']} at {row['operator_ref']}")
        for _, row in rows[rows["_merge"] != "both"].head(5).iterrows():
            res.examples.append(f"window {row['window']} key {row['key']}: "
                                f"{'missing' if row['_merge'] == 'left_only' else 'extra'}")
        out[int(sid)] = res
    return out


def check_windows(rundir: RunDir) -> dict[int, WindowCheck]:
    return compare_windows(pd.read_parquet(rundir.windows), pd.read_parquet(rundir.windows_reference))


def window_summary_lines(results: dict[int, WindowCheck]) -> list[str]:
    lines = []
    for sid, r in sorted(results.items()):
        lines.append(f"stream {sid} windows: {'OK  ' if r.ok else 'FAIL'} reference={r.reference} "
                     f"produced={r.produced} matching={r.matching} mismatched={r.mismatched} "
                     f"incomplete={r.incomplete} missing={r.missing} extra={r.extra}")
        lines += [f"    {e}" for e in r.examples]
    return lines
