"""cepadapt's oracle side: rule changes at points in the stream, applied as the switch applies them."""
import pytest

from testbed.experiments.cepadapt import CepAdaptParams, adapt_topology, oracle_events
from testbed.semantics.cep.oracle import BasicEvent

pytestmark = pytest.mark.unit


def run(values, lost=()):
    p = CepAdaptParams(events=len(values), changes=[
        {"after": 3, "action": "install", "pattern": {"name": "b", "id": 2, "stream": 7, "pattern": "[value == 5]",
                                                      "returns": "seq", "sinks": ["h3"]}},
        {"after": 6, "action": "remove", "id": 1}],
        patterns=[{"name": "a", "id": 1, "stream": 7, "pattern": "[value == 5]", "returns": "seq", "sinks": ["h3"]}])
    events = [BasicEvent(7, s, s, 0, v) for s, v in enumerate(values) if s not in lost]
    return [(c["pattern"], c["match"], c["seq"]) for c in oracle_events(adapt_topology(p).cep, p, events)]


def test_a_change_takes_effect_at_its_point_in_slot_order():
    assert run([5, 0, 5, 5, 0, 5, 5, 5]) == [(1, 1, 0), (1, 2, 2), (1, 3, 3), (2, 1, 3), (1, 4, 5), (2, 2, 5),
                                              (2, 3, 6), (2, 4, 7)]


def test_a_change_whose_event_never_reached_the_switch_applies_at_the_next_one():
    assert run([5, 0, 5, 5, 0, 5, 5, 5], lost={3, 6}) == [(1, 1, 0), (1, 2, 2), (1, 3, 5), (2, 1, 5), (2, 2, 7)]


def test_changes_are_refused_where_the_stream_cannot_reach_them():
    with pytest.raises(ValueError, match="the stream ends first"):
        CepAdaptParams(events=10, changes=[{"after": 10, "action": "remove", "id": 1}])
    with pytest.raises(ValueError, match="same event"):
        CepAdaptParams(changes=[{"after": 5, "action": "remove", "id": 1}, {"after": 5, "action": "remove", "id": 2}])
