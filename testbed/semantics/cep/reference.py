"""A rule set's complex events over a table of events, in the shape both references share.

The run's check (``testbed.analysis.cepcheck``) and the Spark job's
centralized reference (``operators/window_job.py``) both compute the complex
events of the events a switch saw with ``complex_events``, and both read
them per sink with ``per_sink``: one frame of complex events per completing
event, in send order, and inside a frame in the oracle's order, which is
the switch's slot order (declaration order while the rules do not change;
docs/cep.md, "The order of complex events").  Patterns and windows are of one stream
each, so a table of one stream's events gives that stream's complex events,
which is what lets Spark compute them per stream, in parallel.
"""
from __future__ import annotations

from typing import Optional

import pandas as pd

from testbed.semantics.cep.changes import CepTimeline, apply_to_oracle
from testbed.semantics.cep.lastn import in_type
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.cep.rules import CepRules

#: The columns of a table of complex events; ``rank`` is the complex event's place among
#: those its completing event yields (0 first), the order the switch sends them in.
COLUMNS = ("pattern", "match", "stream", "seq", "ts", "value", "send_ns", "rank")
#: A complex event as a sink's record and a reference are compared: pattern, match, stream, seq, value.
Key = tuple[int, int, int, int, int]
U64 = (1 << 64) - 1


def complex_events(rules: CepRules, events: pd.DataFrame, timeline: Optional[CepTimeline] = None) -> pd.DataFrame:
    """The complex events of ``events`` (columns stream, seq, ts, key, value,
    send_ns, and optionally seen) under ``rules``, stepped in send order.  The
    value is in the wire's type (the signed ``value`` field).

    ``timeline`` is the schedule's changes (``CepTimeline``): each applies before
    its stream's event number ``after`` in send order.  An event counts for that
    number whether or not the switch saw it, so ``events`` holds every event sent
    and ``seen`` (True where absent) says which ones the switch took; only those
    move the rules."""
    oracle = CepOracle(rules.window_specs(), rules.pattern_specs())
    pending = {} if timeline is None else {c.stream: [] for c in timeline.changes}
    for change in timeline.changes if timeline is not None else ():
        pending[change.stream].append(change)
    position: dict[int, int] = {}
    rows = []
    sent = events.sort_values("send_ns", kind="stable")
    seen = sent["seen"].tolist() if "seen" in sent.columns else [True] * len(sent)
    for (stream, seq, ts, key, value, send_ns), took in zip(zip(*(sent[c].tolist() for c in (
            "stream", "seq", "ts", "key", "value", "send_ns"))), seen):
        number = position[stream] = position.get(stream, -1) + 1
        waiting = pending.get(stream)
        while waiting and waiting[0].after <= number:
            apply_to_oracle(oracle, waiting.pop(0))
        if not took:
            continue
        for rank, c in enumerate(oracle.step(BasicEvent(stream, seq, ts, key & U64, value))):
            rows.append((c.pattern, c.match, c.stream, c.seq, c.ts, in_type(c.value, "value"), send_ns, rank))
    return pd.DataFrame(rows, columns=list(COLUMNS), dtype="int64")


def per_sink(rules: CepRules, found: pd.DataFrame, timeline: Optional[CepTimeline] = None) -> dict[str, list[Key]]:
    """Per sink named by the rules (those the schedule installs included), the complex
    events of ``found`` (a ``complex_events`` table) it must receive, in the order it
    must receive them."""
    # Within one stream the rows are in the oracle's order already; streams
    # interleave by send time (a table Spark gathered per stream comes in any order).
    ordered = found.sort_values(["send_ns", "stream", "rank"], kind="stable")
    keys = list(zip(*(ordered[c].tolist() for c in ("pattern", "match", "stream", "seq", "value"))))
    every = timeline.rules_ever(rules) if timeline is not None else list(rules.complex_events)
    out: dict[str, list[Key]] = {h: [] for r in every for h in r.sinks}
    # An id keeps its sinks for the whole run (``changes.plan_changes`` refuses otherwise).
    sinks = {r.id: r.sinks for r in every}
    for key in keys:
        for sink in sinks.get(key[0], ()):
            out[sink].append(key)
    return out
