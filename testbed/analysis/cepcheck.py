"""The CEP stage's complex events at each sink, against the oracle (docs/cep.md).

The oracle (``testbed.semantics.cep``) runs over the events the switch
saw, in the order their sources sent them: every event sent but those the
frame check found never reached the switch.  Patterns and windows are of
one stream each, so the order across streams does not matter.  Each sink
must have received exactly the complex events of the patterns that name
it, in order: one frame per completing event, its complex events in the
switch's slot order (docs/cep.md, "The order of complex events").  "In
order" is per stream: two streams' events reach the switch in an order
their two sources do not fix, so a sink fed by both may interleave them
either way.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from testbed.analysis.check import StreamCheck, events_the_switch_never_saw
from testbed.rundir import RunRecord
from testbed.semantics.cep.changes import CepTimeline
from testbed.semantics.cep.reference import Key, complex_events, per_sink
from testbed.semantics.cep.rules import CepRules
from testbed.semantics.topology import parse_topology


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


def timeline_of(record: RunRecord) -> Optional[CepTimeline]:
    """The schedule's CEP changes, from the topology as run (None without any):
    recomputed by validation, as the run applied them."""
    topo = record.topology or {}
    if not any(isinstance(e, dict) and e.get("cep") is not None for e in topo.get("schedule") or ()):
        return None
    return parse_topology(topo, "run.json topology", plan_only=True).cep_timeline()


def expected_complex_events(rules: CepRules, sources: pd.DataFrame, frames: dict[int, StreamCheck],
                            timeline: Optional[CepTimeline] = None) -> dict[str, list[Key]]:
    """Per sink, the oracle's complex events over the events the switch saw,
    the schedule's changes applied at their points."""
    return per_sink(rules, complex_events(rules, events_the_switch_saw(sources, frames), timeline), timeline)


def events_the_switch_saw(sources: pd.DataFrame, frames: dict[int, StreamCheck]) -> pd.DataFrame:
    """Every event sent, with ``seen``: whether it reached the switch.  The ones that
    did not still count for the points where the schedule's changes begin."""
    never = {(int(sid), seq) for sid, seqs in events_the_switch_never_saw(frames).items() for seq in seqs}
    seen = [(st, sq) not in never for st, sq in zip(sources["stream"].tolist(), sources["seq"].tolist())]
    return sources.assign(seen=seen)


def check_complex_events(rules: CepRules, sources: pd.DataFrame, frames: dict[int, StreamCheck],
                         received: Optional[pd.DataFrame], timeline: Optional[CepTimeline] = None
                         ) -> dict[str, SinkCheck]:
    """Per sink: the complex events it recorded against the oracle's."""
    return held_to(expected_complex_events(rules, sources, frames, timeline), received)


def check_against_spark(rules: CepRules, reference: pd.DataFrame, received: Optional[pd.DataFrame],
                        timeline: Optional[CepTimeline] = None) -> dict[str, SinkCheck]:
    """Per sink: the complex events it recorded against the ones the Spark
    job computed from the stream (``complex_events_reference.parquet``)."""
    return held_to(per_sink(rules, reference, timeline), received)


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
        res.out_of_order = not missing and not extra and any(
            of_stream(got, s) != of_stream(expected, s) for s in {k[2] for k in expected})
        res.examples += out_of_order_examples(expected, got) if res.out_of_order else []
        res.examples += [f"missing: pattern {p} match {m} (stream {s} seq {q})" for p, m, s, q, _v in sorted(missing)]
        res.examples += [f"extra: pattern {p} match {m} (stream {s} seq {q})" for p, m, s, q, _v in sorted(extra)]
        results[sink] = res
    return results


def of_stream(keys: list[Key], stream: int) -> list[Key]:
    return [k for k in keys if k[2] == stream]


def out_of_order_examples(expected: list[Key], got: list[Key], per_stream: int = 3) -> list[str]:
    """Where each stream's complex events first part from the expected order, as
    received against expected, ``per_stream`` places at most per stream."""
    out = []
    for stream in sorted({k[2] for k in expected}):
        want, have = of_stream(expected, stream), of_stream(got, stream)
        wrong = [i for i, (a, b) in enumerate(zip(have, want)) if a != b][:per_stream]
        out += [f"out of order: stream {stream}, complex event {i + 1}: received pattern {have[i][0]} match "
                f"{have[i][1]} (seq {have[i][3]}), expected pattern {want[i][0]} match {want[i][1]} "
                f"(seq {want[i][3]})" for i in wrong]
    return out


def cep_summary_lines(results: dict[str, SinkCheck], against: str = "") -> list[str]:
    """A line per sink; ``against`` names a reference other than the oracle."""
    lines = []
    for sink, r in sorted(results.items()):
        lines.append(f"complex events at {sink}{against}: {'OK' if r.ok else 'FAILED'} received={r.received} "
                     f"expected={r.expected}"
                     + (f" missing={r.missing} extra={r.extra}" if r.missing or r.extra else "")
                     + (" out-of-order" if r.out_of_order else ""))
        lines += [f"    {e}" for e in r.examples[:10]]     # what failed, as the stream checks show it
    return lines
