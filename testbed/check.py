"""``testbed check``: deliveries of a run held against the oracle.

Every sent event must reach exactly the operators the window definition
names: none missing, none extra, none twice.  Events the definition sends
nowhere (gaps, before the origin, out of order) must reach nobody.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .windows import StreamOracle, make_assigner


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
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0 and self.duplicates == 0

    def as_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "expected_deliveries": self.expected, "delivered": self.delivered,
                "missing": self.missing, "extra": self.extra, "duplicates": self.duplicates,
                "undelivered_by_design": self.by_design, "ok": self.ok, "examples": self.examples[:10]}


def expected_deliveries(spec: dict[str, Any], sent: pd.DataFrame) -> tuple[set, Counter]:
    """``{(seq, operator)}`` the oracle asks for, and the by-design drop counts.

    ``sent`` must be in send order; for one source per stream over one link
    that is the order the splitter receives them in.
    """
    w = spec["window"]
    oracle = StreamOracle(make_assigner(w["kind"], w["size"], w["slide"]), spec["operators"], w["origin"])
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
    results: dict[int, StreamCheck] = {}
    for sid_text, spec in streams.items():
        sid = int(sid_text)
        sent = sources[sources["stream"] == sid].sort_values("send_ns", kind="stable")
        got = deliveries[deliveries["stream"] == sid]
        expected, dropped = expected_deliveries(spec, sent)
        counts = Counter(zip(got["seq"].tolist(), got["operator"].tolist()))
        res = StreamCheck(sid, sent=len(sent), expected=len(expected), by_design=dict(dropped))
        res.delivered = sum(1 for pair in counts if pair in expected)
        res.duplicates = sum(n - 1 for n in counts.values() if n > 1)
        extra = [p for p in counts if p not in expected]
        missing = [p for p in expected if p not in counts]
        res.extra, res.missing = len(extra), len(missing)
        for seq, op in sorted(missing)[:5]:
            res.examples.append(f"missing: seq {seq} at {op}")
        for seq, op in sorted(extra)[:5]:
            res.examples.append(f"extra: seq {seq} at {op}")
        for (seq, op), n in list(counts.items()):
            if n > 1 and len(res.examples) < 10:
                res.examples.append(f"duplicate: seq {seq} at {op} x{n}")
        results[sid] = res
    return results


def check_run(run_dir: Path) -> dict[int, StreamCheck]:
    run = json.loads((run_dir / "run.json").read_text())
    sources = pd.read_parquet(run_dir / "sources.parquet")
    deliveries = pd.read_parquet(run_dir / "deliveries.parquet")
    return check_frames(run["streams"], sources, deliveries)


def summary_lines(results: dict[int, StreamCheck]) -> list[str]:
    lines = []
    for sid, r in sorted(results.items()):
        design = ", ".join(f"{k}={v}" for k, v in sorted(r.by_design.items())) or "none"
        lines.append(f"stream {sid}: {'OK  ' if r.ok else 'FAIL'} sent={r.sent} expected={r.expected} "
                     f"delivered={r.delivered} missing={r.missing} extra={r.extra} "
                     f"duplicates={r.duplicates} undelivered-by-design: {design}")
        lines += [f"    {e}" for e in r.examples]
    return lines
