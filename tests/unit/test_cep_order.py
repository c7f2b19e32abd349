"""One order for the complex events one event completes (docs/cep.md, "The order of complex events").

Four patterns declared with ids 40, 7, 300 and 1, each met by every event:
the embedded switch, the oracle, the reference as Spark's job computes it
(per stream, gathered in any order) and ``testbed check`` must all put one
event's complex events in declaration order, 40, 7, 300, 1, neither
ascending nor descending by id.  The bmv2 program is held to the model on
the same rules by tests/integration/test_bmv2.py
(``test_cep_complex_events_of_one_event_come_in_declaration_order``).
"""
import pandas as pd
import pytest

from testbed.analysis.cepcheck import cep_summary_lines, held_to
from testbed.dataplane.cep import CepControl
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import CEP_UDP_PORT, EVENT_OFFSET, FrameTemplate, parse_complex_events
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.cep.reference import complex_events, per_sink
from testbed.semantics.cep.rules import CepRules

pytestmark = pytest.mark.unit

IDS = [40, 7, 300, 1]
SINKS = {"h5": 5}
RULES = CepRules.model_validate({"complex_events": [
    {"name": f"p{i}", "id": i, "stream": 3, "pattern": "[value >= 0]", "returns": "seq", "sinks": ["h5"]}
    for i in IDS]})
EVENTS = [BasicEvent(3, seq, 10 * seq, 0, seq) for seq in range(3)]


def switch_frames() -> list[list[tuple]]:
    switch = SplitterPipeline()
    switch.table_add("egress_rewrite", "rewrite_dst", [5, 0], ["02:00:00:00:00:05", "10.0.0.5", 5])
    CepControl(switch, SINKS).install(RULES)
    template = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 3)
    return [parse_complex_events(copy[EVENT_OFFSET:]) for e in EVENTS
            for _port, copy in switch.process(template.frame(e.seq, e.ts, e.key, e.value), 1)
            if int.from_bytes(copy[36:38], "big") == CEP_UDP_PORT]


def test_the_switch_sends_one_events_complex_events_in_declaration_order():
    frames = switch_frames()
    assert [[c[0] for c in frame] for frame in frames] == [IDS] * len(EVENTS)


def test_the_oracle_reports_them_in_declaration_order():
    oracle = CepOracle(RULES.window_specs(), RULES.pattern_specs())
    assert [[c.pattern for c in oracle.step(e)] for e in EVENTS] == [IDS] * len(EVENTS)


def sources() -> pd.DataFrame:
    return pd.DataFrame({"stream": [e.stream for e in EVENTS], "seq": [e.seq for e in EVENTS],
                         "ts": [e.ts for e in EVENTS], "key": [e.key for e in EVENTS],
                         "value": [e.value for e in EVENTS], "send_ns": [1000 * e.seq for e in EVENTS]})


def test_the_reference_as_spark_gathers_it_keeps_declaration_order():
    # Spark's job computes each stream's table on an executor and gathers the rows
    # in any order; per_sink must put them back by send time and rank alone.
    found = complex_events(RULES, sources()).sample(frac=1, random_state=3)
    got = per_sink(RULES, found)["h5"]
    assert [k[0] for k in got] == IDS * len(EVENTS)
    assert [k[3] for k in got] == [seq for seq in range(len(EVENTS)) for _ in IDS]


def received(frames: list[list[tuple]]) -> pd.DataFrame:
    rows = [{"sink": "h5", "recv_ns": n, "at": i, "pattern": p, "match": m, "stream": s, "seq": q, "value": v}
            for n, frame in enumerate(frames) for i, (p, m, s, q, _ts, v) in enumerate(frame)]
    return pd.DataFrame(rows)


def test_check_passes_the_switchs_order_and_fails_ascending_ids_naming_where():
    want = per_sink(RULES, complex_events(RULES, sources()))
    frames = switch_frames()
    assert held_to(want, received(frames))["h5"].ok
    by_id = [sorted(frame) for frame in frames]           # what "ascending pattern id" would send
    verdict = held_to(want, received(by_id))["h5"]
    assert verdict.out_of_order and not verdict.missing and not verdict.extra and not verdict.ok
    assert verdict.examples[0] == ("out of order: stream 3, complex event 1: received pattern 1 match 1 (seq 0), "
                                   "expected pattern 40 match 1 (seq 0)")
    lines = cep_summary_lines({"h5": verdict})
    assert lines[0].endswith("out-of-order") and lines[1].strip().startswith("out of order: stream 3")


def test_two_streams_at_one_sink_may_interleave_but_each_keeps_its_order():
    rules = CepRules.model_validate({"complex_events": [
        {"name": f"s{s}", "id": s, "stream": s, "pattern": "[value >= 0]", "returns": "seq", "sinks": ["h5"]}
        for s in (3, 4)]})
    events = pd.DataFrame({"stream": [3, 4, 3, 4], "seq": [0, 0, 1, 1], "ts": [0] * 4, "key": [0] * 4,
                           "value": [1] * 4, "send_ns": [0, 1, 2, 3]})
    want = per_sink(rules, complex_events(rules, events))

    def at_sink(order):
        return pd.DataFrame([{"sink": "h5", "recv_ns": n, "at": 0, "pattern": s, "match": q + 1, "stream": s,
                              "seq": q, "value": q} for n, (s, q) in enumerate(order)])

    # stream 4's events overtook stream 3's on the way to the switch: still in order
    assert held_to(want, at_sink([(4, 0), (4, 1), (3, 0), (3, 1)]))["h5"].ok
    swapped = held_to(want, at_sink([(3, 1), (4, 0), (3, 0), (4, 1)]))["h5"]
    assert swapped.out_of_order and swapped.examples[0].startswith("out of order: stream 3, complex event 1:")
