"""The CEP stage's complex events at each sink, against the oracle (docs/cep.md).

The oracle (``testbed.semantics.cep``) runs over the events the switch
saw, in the order their sources sent them: every event sent but those the
frame check found never reached the switch.  Patterns and windows are of
one stream each, so the order across streams does not matter.  Each sink
must have received exactly the complex events of the patterns that name
it, in order: one frame per completing event, its complex events in the
order the patterns were installed (the switch's slots).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from testbed.analysis.check import StreamCheck, events_the_switch_never_saw
from testbed.rundir import RunRecord
from testbed.semantics.cep.reference import Key, complex_events, per_sink
from testbed.semantics.cep.rules import CepRules


@dataclass
class SinkCheck:
    expected: int = 0
    received: int = 0
    missing: int = 0
    extra: int = 0
    out_of_order: bool = False
    examples: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.out_of_order)

    def as_json(self) -> dict[str, Any]:
        return {"expected": self.expected, "received": self.received, "missing": self.missing,
                "extra": self.extra, "out_of_order": self.out_of_order, "ok": self.ok,
                "examples": self.examples[:10]}


def rules_of(record: RunRecord) -> Optional[CepRules]:
    cep = (record.topology or {}).get("cep")
    return CepRules.model_validate(cep) if cep else None


def expected_complex_events(rules: CepRules, sources: pd.DataFrame,
                            frames: dict[int, StreamCheck]) -> dict[str, list[Key]]:
    """Per sink, the oracle's complex events over the events the switch saw."""
    return per_sink(rules, complex_events(rules, events_the_switch_saw(sources, frames)))


def events_the_switch_saw(sources: pd.DataFrame, frames: dict[int, StreamCheck]) -> pd.DataFrame:
    never = {(int(sid), seq) for sid, seqs in events_the_switch_never_saw(frames).items() for seq in seqs}
    if not never:
        return sources
    seen = [(st, sq) not in never for st, sq in zip(sources["stream"].tolist(), sources["seq"].tolist())]
    return sources[seen]


def check_complex_events(rules: CepRules, sources: pd.DataFrame, frames: dict[int, StreamCheck],
                         received: Optional[pd.DataFrame]) -> dict[str, SinkCheck]:
    """Per sink: the complex events it recorded against the oracle's."""
    return held_to(expected_complex_events(rules, sources, frames), received)


def check_against_spark(rules: CepRules, reference: pd.DataFrame,
                        received: Optional[pd.DataFrame]) -> dict[str, SinkCheck]:
    """Per sink: the complex events it recorded against the ones the Spark
    job computed from the stream (``complex_events_reference.parquet``)."""
    return held_to(per_sink(rules, reference), received)


def held_to(want: dict[str, list[Key]], received: Optional[pd.DataFrame]) -> dict[str, SinkCheck]:
    """Per sink of ``want``: what it recorded (``received``, the sinks' table) against what it should have."""
    results = {}
    for sink, expected in want.items():
        got: list[Key] = []
        if received is not None and len(received):
            mine = received[received["sink"] == sink].sort_values(["recv_ns", "at"], kind="stable")
            got = list(zip(mine["pattern"].tolist(), mine["match"].tolist(), mine["stream"].tolist(),
                           mine["seq"].tolist(), mine["value"].tolist()))
        missing, extra = Counter(expected) - Counter(got), Counter(got) - Counter(expected)
        res = SinkCheck(expected=len(expected), received=len(got), missing=sum(missing.values()),
                        extra=sum(extra.values()))
        res.out_of_order = not missing and not extra and got != expected
        res.examples += [f"missing: pattern {p} match {m} (stream {s} seq {q})" for p, m, s, q, _v in sorted(missing)]
        res.examples += [f"extra: pattern {p} match {m} (stream {s} seq {q})" for p, m, s, q, _v in sorted(extra)]
        results[sink] = res
    return results


def cep_summary_lines(results: dict[str, SinkCheck], against: str = "") -> list[str]:
    """A line per sink; ``against`` names a reference other than the oracle."""
    return [f"complex events at {sink}{against}: {'OK' if r.ok else 'FAILED'} received={r.received} "
            f"expected={r.expected}"
            + (f" missing={r.missing} extra={r.extra}" if r.missing or r.extra else "")
            + (" out-of-order" if r.out_of_order else "")
            for sink, r in sorted(results.items())]
