"""CEP rules changed by a topology's schedule (docs/cep.md, "Changing rules mid-stream").

- What ``validate`` refuses: one line naming the file and the field, exit 2.
- The worked examples of docs/cep.md, as written there, through the oracle
  with the schedule's changes (the references' path) and through the
  embedded switch with the control plane applying the same changes at the
  same points (the run's path).  bmv2 is held to the model on the same
  examples by tests/integration/test_bmv2.py.
"""
import copy

import pandas as pd
import pytest

from support import topologies
from testbed.dataplane.cep import CepControl
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import CEP_UDP_PORT, EVENT_OFFSET, FrameTemplate, parse_complex_events
from testbed.semantics.cep.reference import complex_events, per_sink
from testbed.semantics.topology import parse_topology

pytestmark = pytest.mark.unit


def topology(windows, patterns, schedule, events=6):
    return {"name": "t", "hosts": {"h1": {}, "h2": {}, "h3": {}, "h4": {}},
            "streams": [{"id": 7, "source": "h1", "operators": ["h2"], "events": events, "rate": 100,
                         "window": {"kind": "count", "size": 2, "slide": 2}},
                        {"id": 8, "source": "h1", "operators": ["h2"], "events": events, "rate": 100,
                         "window": {"kind": "count", "size": 2, "slide": 2}}],
            "cep": {"windows": windows, "complex_events": patterns}, "schedule": schedule}


def pattern(pid, text, returns="seq", sinks=("h3",), name=None, stream=7):
    return {"name": name or f"p{pid}", "id": pid, "stream": stream, "pattern": text, "returns": returns,
            "sinks": list(sinks)}


def after(n, stream=7):
    return {"stream": stream, "events": n}


# -- the worked examples of docs/cep.md -------------------------------------------------
REPLACE = (topology([], [pattern(1, "[value == 5]; [value == 5]")],
                    [{"after": after(3), "cep": {"replace": pattern(1, "[value == 5]; [value == 0]")}}]),
           [5, 5, 5, 5, 0, 5], [(1, 1, 1), (1, 1, 4)])
WINDOW = (topology([{"name": "w", "stream": 7, "field": "value", "size": 3}],
                   [pattern(2, "[count(w) >= 2]", returns="sum(w)")],
                   [{"after": after(3), "cep": {"replace_window": {"name": "w", "stream": 7, "field": "value",
                                                                   "size": 3}}}]),
          [1, 2, 3, 4, 5, 6], [(2, 1, 3), (2, 2, 6), (2, 3, 9), (2, 4, 15)])
SLOTS = (topology([], [pattern(1, "[value == 1]"), pattern(2, "[value >= 1]")],
                  [{"after": after(2), "cep": {"remove": 1}},
                   {"after": after(4), "cep": {"add": pattern(3, "[value >= 1]")}}]),
         [1, 1, 1, 1, 1, 1], [(1, 1, 0), (2, 1, 0), (1, 2, 1), (2, 2, 1), (2, 3, 2), (2, 4, 3),
                              (3, 1, 4), (2, 5, 4), (3, 2, 5), (2, 6, 5)])
EXAMPLES = {"replace": REPLACE, "replace_window": WINDOW, "slots": SLOTS}


def sources(values, stream=7, lost=()):
    n = len(values)
    return pd.DataFrame({"stream": [stream] * n, "seq": list(range(n)), "ts": list(range(n)), "key": [0] * n,
                         "value": values, "send_ns": list(range(n)), "seen": [s not in lost for s in range(n)]})


def by_oracle(data, values, lost=()):
    topo = parse_topology(data)
    timeline = topo.cep_timeline()
    found = complex_events(topo.cep, sources(values, lost=lost), timeline)
    return [(p, m, v) for p, m, _s, _q, v in per_sink(topo.cep, found, timeline)["h3"]], found


def by_switch(data, values):
    topo = parse_topology(data)
    timeline = topo.cep_timeline()
    switch = SplitterPipeline()
    switch.table_add("egress_rewrite", "rewrite_dst", [3, 0], ["02:00:00:00:00:03", "10.0.0.3", 3])
    control = CepControl(switch, {"h3": 3})
    control.install(topo.cep, timeline.tests())
    template = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 7)
    got = []
    for seq, value in enumerate(values):
        for change in timeline.changes:
            if change.after == seq:
                control.apply(change)
        for _port, frame in switch.process(template.frame(seq, seq, 0, value), 1):
            if int.from_bytes(frame[36:38], "big") == CEP_UDP_PORT:
                got += [(p, m, v) for p, m, _s, _q, _t, v in parse_complex_events(frame[EVENT_OFFSET:])]
    return got


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_worked_examples_hold_on_the_oracle_and_the_switch(name):
    data, values, want = EXAMPLES[name]
    assert by_oracle(data, values)[0] == want
    assert by_switch(data, values) == want


def test_a_replaced_pattern_keeps_its_slot_and_an_added_one_takes_the_lowest_free():
    timeline = parse_topology(SLOTS[0]).cep_timeline()
    assert [(c.kind, c.slot) for c in timeline.changes] == [("remove", 0), ("add", 0)]
    assert [(c.kind, c.slot) for c in parse_topology(REPLACE[0]).cep_timeline().changes] == [("replace", 0)]


def test_a_change_begins_at_its_point_even_when_the_event_there_never_reached_the_switch():
    # Event 3 was lost: the replace still applies before event number 3 in send order,
    # so event 4 (value 0) meets the new definition's second step alone: no match.
    assert by_oracle(REPLACE[0], REPLACE[1], lost={3})[0] == [(1, 1, 1)]


def test_a_window_counts_from_its_install_what_a_pattern_added_later_reads():
    data = topology([{"name": "w", "stream": 7, "field": "value", "size": 3}], [pattern(1, "[value == 99]")],
                    [{"after": after(2), "cep": {"add": pattern(2, "[count(w < 0) >= 2]", returns="count(w < 0)")}}])
    topo = parse_topology(data)
    assert {w: (t.op, t.constant) for w, t in topo.cep_timeline().tests().items()} == {"w": ("<", 0)}
    values = [-1, -2, 5, -3, 4]
    assert by_oracle(data, values)[0] == by_switch(data, values) == [(2, 1, 2), (2, 2, 2)]


def test_four_patterns_at_once_but_more_over_the_run():
    schedule = [{"after": after(1), "cep": {"add": pattern(i, "[value > 0]")}} for i in (2, 3, 4)]
    schedule += [{"after": after(2), "cep": {"remove": 1}},
                 {"after": after(3), "cep": {"add": pattern(5, "[value > 0]")}}]
    topo = parse_topology(topology([], [pattern(1, "[value > 0]")], schedule))
    assert len(topo.cep_rules_ever()) == 5 and [c.slot for c in topo.cep_timeline().changes] == [1, 2, 3, 0, 0]


# -- what validate refuses ----------------------------------------------------------------
BASE = topology([{"name": "w", "stream": 7, "field": "value", "size": 3}],
                [pattern(1, "[count(w > 0) >= 1]")], [])


def with_schedule(*entries, base=BASE):
    data = copy.deepcopy(base)
    data["schedule"] = list(entries)
    return data


CASES = {
    "placed-by-seconds": (with_schedule({"at": 0.01, "cep": {"remove": 1}}), "schedule[0]",
                          "a cep entry is placed by after"),
    "another-streams-point": (with_schedule({"after": after(2, stream=8), "cep": {"remove": 1}}),
                              "schedule[0].cep.remove", "placed after a point of stream 8"),
    "fifth-at-once": (with_schedule(*({"after": after(1), "cep": {"add": pattern(i, "[value > 0]")}}
                                      for i in (2, 3, 4, 5))),
                      "schedule[3].cep.add", "all 4 pattern slots are in use then (patterns 1, 2, 3, 4)"),
    "fifth-window": (with_schedule(*({"after": after(1), "cep": {"add_window": {"name": f"v{i}", "stream": 7,
                                                                                "field": "key", "size": 2}}}
                                     for i in range(4))),
                     "schedule[3].cep.add_window", "all 4 window slots are in use"),
    "window-still-read": (with_schedule({"after": after(2), "cep": {"remove_window": "w"}}),
                          "schedule[0].cep.remove_window", "pattern 1 still reads window 'w'"),
    "replace-nothing": (with_schedule({"after": after(2), "cep": {"replace": pattern(9, "[value > 0]")}}),
                        "schedule[0].cep.replace.id", "no pattern 9 is installed then"),
    "add-twice": (with_schedule({"after": after(2), "cep": {"add": pattern(1, "[value > 0]", name="q")}}),
                  "schedule[0].cep.add.id", "pattern 1 is installed then"),
    "second-count": (with_schedule({"after": after(2), "cep": {"add": pattern(2, "[count(w < 0) >= 1]")}}),
                     "schedule[0].cep.add.pattern", "window 'w' counts w > 0 since its install"),
    "window-field-changed": (with_schedule({"after": after(2), "cep": {"replace_window": {
        "name": "w", "stream": 7, "field": "key", "size": 3}}}), "schedule[0].cep.replace_window",
        "a replace keeps both"),
    "count-beyond-new-size": (with_schedule({"after": after(2), "cep": {"replace_window": {
        "name": "w", "stream": 7, "field": "value", "size": 2}}},
        base=topology([{"name": "w", "stream": 7, "field": "value", "size": 3}], [pattern(1, "[count(w) == 3]")],
                      [])),
        "schedule[0].cep.replace_window", "it leaves pattern 1 invalid: count(w) == 3: 3 is outside"),
    "sinks-changed": (with_schedule({"after": after(2), "cep": {"replace": pattern(1, "[value > 0]", sinks=["h4"])}}),
                      "schedule[0].cep.replace.sinks", "an id keeps its sinks for the run"),
    "unknown-sink": (with_schedule({"after": after(2), "cep": {"add": pattern(2, "[value > 0]", sinks=["h9"])}}),
                     "schedule[0].cep.add.sinks[0]", "unknown host 'h9'"),
    "undeclared-window": (with_schedule({"after": after(2), "cep": {"add": pattern(2, "[sum(x) > 0]")}}),
                          "schedule[0].cep.add.pattern", "sum(x) names no declared window"),
    "two-kinds": (with_schedule({"after": after(2), "cep": {"remove": 1, "remove_window": "w"}}),
                  "schedule[0].cep", "exactly one of add, replace, remove"),
    "no-cep-section": (dict(with_schedule({"after": after(2), "cep": {"remove": 1}}), cep=None), "schedule[0].cep",
                       "the topology has no cep: section"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_change_the_switch_cannot_take_is_one_line_naming_the_file_and_field(tmp_path, case):
    data, field, words = CASES[case]
    if data.get("cep") is None:
        data = {k: v for k, v in data.items() if k != "cep"}
    topologies.assert_validate_refuses(tmp_path, data, field, words)
