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

import pandas as pd

from testbed.semantics.cep.lastn import in_type
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.cep.rules import CepRules

#: The columns of a table of complex events; ``rank`` is the complex event's place among
#: those its completing event yields (0 first), the order the switch sends them in.
COLUMNS = ("pattern", "match", "stream", "seq", "ts", "value", "send_ns", "rank")
#: A complex event as a sink's record and a reference are compared: pattern, match, stream, seq, value.
Key = tuple[int, int, int, int, int]
U64 = (1 << 64) - 1


def complex_events(rules: CepRules, events: pd.DataFrame) -> pd.DataFrame:
    """The complex events of ``events`` (columns stream, seq, ts, key, value,
    send_ns: the events the switch saw) under ``rules``, stepped in send
    order.  The value is in the wire's type (the signed ``value`` field)."""
    oracle = CepOracle(rules.window_specs(), rules.pattern_specs())
    rows = []
    sent = events.sort_values("send_ns", kind="stable")
    for stream, seq, ts, key, value, send_ns in zip(*(sent[c].tolist() for c in
                                                      ("stream", "seq", "ts", "key", "value", "send_ns"))):
        for rank, c in enumerate(oracle.step(BasicEvent(stream, seq, ts, key & U64, value))):
            rows.append((c.pattern, c.match, c.stream, c.seq, c.ts, in_type(c.value, "value"), send_ns, rank))
    return pd.DataFrame(rows, columns=list(COLUMNS), dtype="int64")


def per_sink(rules: CepRules, found: pd.DataFrame) -> dict[str, list[Key]]:
    """Per sink named by the rules, the complex events of ``found`` (a
    ``complex_events`` table) it must receive, in the order it must receive them."""
    # Within one stream the rows are in the oracle's order already; streams
    # interleave by send time (a table Spark gathered per stream comes in any order).
    ordered = found.sort_values(["send_ns", "stream", "rank"], kind="stable")
    keys = list(zip(*(ordered[c].tolist() for c in ("pattern", "match", "stream", "seq", "value"))))
    out: dict[str, list[Key]] = {h: [] for r in rules.complex_events for h in r.sinks}
    sinks = {r.id: r.sinks for r in rules.complex_events}
    for key in keys:
        for sink in sinks.get(key[0], ()):
            out[sink].append(key)
    return out
