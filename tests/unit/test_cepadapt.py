"""cepadapt's oracle side: the changes are a topology's schedule entries, applied at
their points as the switch applies them."""
import pytest

from testbed.experiments.cepadapt import CepAdaptParams, adapt_topology, oracle_events
from testbed.semantics.cep.oracle import BasicEvent

pytestmark = pytest.mark.unit

A = {"name": "a", "id": 1, "stream": 7, "pattern": "[value == 5]", "returns": "seq", "sinks": ["h3"]}


def entry(after, **cep):
    return {"after": {"stream": 7, "events": after}, "cep": cep}


def run(values, lost=()):
    p = CepAdaptParams(events=len(values), patterns=[A], schedule=[
        entry(3, add=dict(A, name="b", id=2)), entry(6, remove=1)])
    events = [BasicEvent(7, s, s, 0, v) for s, v in enumerate(values) if s not in lost]
    return [(c["pattern"], c["match"], c["seq"]) for c in oracle_events(adapt_topology(p), events)]


def test_a_change_takes_effect_at_its_point_in_slot_order():
    assert run([5, 0, 5, 5, 0, 5, 5, 5]) == [(1, 1, 0), (1, 2, 2), (1, 3, 3), (2, 1, 3), (1, 4, 5), (2, 2, 5),
                                              (2, 3, 6), (2, 4, 7)]


def test_a_change_whose_event_never_reached_the_switch_applies_at_the_next_one():
    assert run([5, 0, 5, 5, 0, 5, 5, 5], lost={3, 6}) == [(1, 1, 0), (1, 2, 2), (1, 3, 5), (2, 1, 5), (2, 2, 7)]


def test_slots_are_counted_by_what_is_installed_at_once():
    """Four patterns at once, five over the run (issue 47: once refused as five definitions)."""
    patterns = [dict(A, name=f"p{i}", id=i) for i in (1, 2, 3, 4)]
    p = CepAdaptParams(events=10, patterns=patterns, schedule=[
        entry(2, replace=dict(A, name="p1", pattern="[value == 6]")), entry(4, remove=2),
        entry(5, add=dict(A, name="p5", id=5))])
    assert [(c.kind, c.slot) for c in adapt_topology(p).cep_timeline().changes] == \
        [("replace", 0), ("remove", 1), ("add", 1)]


def test_changes_are_refused_in_one_line_where_the_switch_or_the_stream_cannot_take_them():
    with pytest.raises(ValueError, match=r"schedule\[0\].after.events: stream 7 sends 10 events"):
        CepAdaptParams(events=10, schedule=[entry(10, remove=1)])
    with pytest.raises(ValueError, match=r"schedule\[1\].cep.add: all 4 pattern slots are in use"):
        CepAdaptParams(patterns=[dict(A, name=f"p{i}", id=i) for i in (1, 2, 3)],
                       schedule=[entry(5, add=dict(A, name="p4", id=4)), entry(6, add=dict(A, name="p5", id=5))])
