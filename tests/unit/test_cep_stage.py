"""The embedded model's CEP stage (p4/cep.p4's twin) against the CEP oracle.

Random rule sets are installed through the control plane
(``testbed.dataplane.cep``) into a model switch, random events of two
streams go through it as frames, and every sink port must receive exactly
the complex events the oracle (``testbed.semantics.cep``) yields: per
basic event one frame per sink, holding that sink's matches in slot order,
byte for byte as docs/wire.md lays them out.  The differential tests on
bmv2 (tests/integration/test_bmv2.py) hold the P4 program to this model.
"""
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from testbed.dataplane.cep import CEP_MGID, CepControl, CepControlError
from testbed.dataplane.contract import CEP_SESSION
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import CEP_UDP_PORT, EVENT_OFFSET, FrameTemplate, parse_complex_events
from testbed.semantics.cep.automaton import PatternTooLarge, compile_pattern
from testbed.semantics.cep.language import Aggregate, Both, Comparison, CountIf, Either, FieldRef, Pattern, Step
from testbed.semantics.cep.matching import STRATEGIES
from testbed.semantics.cep.oracle import BasicEvent, CepOracle
from testbed.semantics.cep.rules import CepRules

pytestmark = pytest.mark.unit

OPS = ["<", "<=", "==", "!=", ">=", ">"]
#: name -> (stream, field, size, the one comparison its count(w op c) counts)
WINDOWS = {"a": (1, "value", 3, (">", 0)), "b": (1, "key", 2, ("==", 1)), "c": (2, "value", 4, ("<", 2)),
           "d": (2, "seq", 32, (">=", 5))}
SINKS = {"h5": 5, "h6": 6}


@st.composite
def operands(draw, stream: int):
    mine = [w for w, spec in WINDOWS.items() if spec[0] == stream]
    kind = draw(st.sampled_from(["field", "aggregate", "count_if"]))
    if kind == "field":
        return FieldRef(draw(st.sampled_from(["value", "key", "seq", "ts"])))
    window = draw(st.sampled_from(mine))
    if kind == "aggregate":
        return Aggregate(draw(st.sampled_from(["sum", "min", "max", "count"])), window)
    op, constant = WINDOWS[window][3]
    return CountIf(window, op, constant)


@st.composite
def predicates(draw, stream: int, depth: int = 0):
    if depth < 1 and draw(st.booleans()):
        glue = draw(st.sampled_from([Both, Either]))
        return glue(draw(predicates(stream, depth + 1)), draw(predicates(stream, depth + 1)))
    operand = draw(operands(stream))
    if isinstance(operand, CountIf) or (isinstance(operand, Aggregate) and operand.function == "count"):
        low, high = 0, WINDOWS[operand.window][2]        # a count lies in 0 .. n
    elif (isinstance(operand, FieldRef) and operand.name != "value") or \
            (isinstance(operand, Aggregate) and WINDOWS[operand.window][1] != "value"):
        low, high = 0, 6
    else:
        low, high = -3, 6
    return Comparison(operand, draw(st.sampled_from(OPS)), draw(st.integers(low, high)))


@st.composite
def rule_sets(draw):
    rules = []
    for pattern_id in draw(st.lists(st.integers(1, 9), min_size=1, max_size=4, unique=True)):
        stream = draw(st.sampled_from([1, 2]))
        steps = tuple(Step(draw(st.sampled_from(["any", "all"])),
                           tuple(draw(predicates(stream)) for _ in range(draw(st.integers(1, 2)))))
                      for _ in range(draw(st.integers(1, 3))))
        pattern, strategy = Pattern(steps), draw(st.sampled_from(STRATEGIES))
        try:
            compile_pattern(pattern, strategy)
        except PatternTooLarge:
            assume(False)
        rules.append({"name": f"p{pattern_id}", "id": pattern_id, "stream": stream, "pattern": str(pattern),
                      "strategy": strategy, "returns": str(draw(operands(stream))),
                      "sinks": draw(st.lists(st.sampled_from(sorted(SINKS)), min_size=1, max_size=2, unique=True))})
    windows = [{"name": n, "stream": s, "field": f, "size": size} for n, (s, f, size, _t) in WINDOWS.items()]
    return CepRules.model_validate({"windows": windows, "complex_events": rules})


@st.composite
def event_lists(draw):
    seqs = {1: 0, 2: 0}
    events = []
    for _ in range(draw(st.integers(0, 40))):
        stream = draw(st.sampled_from([1, 2]))
        value = draw(st.one_of(st.integers(-3, 4), st.sampled_from([-(2**63), 2**63 - 1])))
        events.append(BasicEvent(stream, seqs[stream], draw(st.integers(0, 2**64 - 1)) if draw(st.booleans())
                                 else draw(st.integers(0, 5)), draw(st.integers(0, 3)), value))
        seqs[stream] += 1
    return events


def sink_switch(rules: CepRules) -> SplitterPipeline:
    switch = SplitterPipeline()
    for host, port in SINKS.items():
        switch.table_add("egress_rewrite", "rewrite_dst", [port, 0],
                         [f"02:00:00:00:00:0{port}", f"10.0.0.{port}", port])
    CepControl(switch, SINKS).install(rules)
    return switch


def signed(x: int) -> int:
    """A return value as the wire's signed 64 bits carry it."""
    return x - (1 << 64) if x >= 1 << 63 else x


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(rule_sets(), event_lists())
def test_every_sink_gets_exactly_the_oracles_complex_events(rules, events):
    switch = sink_switch(rules)
    oracle = CepOracle(rules.window_specs(), rules.pattern_specs())
    sinks_of = {r.id: {SINKS[h] for h in r.sinks} for r in rules.complex_events}
    templates = {s: FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", s)
                 for s in (1, 2)}
    for event in events:
        frame = templates[event.stream].frame(event.seq, event.ts, event.key, event.value)
        got = {port: parse_complex_events(copy[EVENT_OFFSET:]) for port, copy in switch.process(frame, 1)
               if int.from_bytes(copy[36:38], "big") == CEP_UDP_PORT}
        found = oracle.step(event)           # in its own order, which must be the switch's
        want = {}
        for c in found:
            for port in sinks_of[c.pattern]:
                want.setdefault(port, []).append((c.pattern, c.match, c.stream, c.seq, c.ts, signed(c.value)))
        assert got == want, (event, rules.complex_events)
    assert switch.mirror_sessions == {CEP_SESSION: CEP_MGID}


def test_a_pattern_installed_while_events_flow_starts_afresh_and_a_removed_one_is_silent():
    rules = CepRules.model_validate({"windows": [], "complex_events": [
        {"name": "up", "id": 3, "stream": 1, "pattern": "[value == 1]; [value == 2]", "returns": "seq",
         "sinks": ["h5"]}]})
    switch = SplitterPipeline()
    switch.table_add("egress_rewrite", "rewrite_dst", [5, 0], ["02:00:00:00:00:05", "10.0.0.5", 5])
    control = CepControl(switch, SINKS)
    control.install(rules)
    template = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)

    def sent(seq, value):
        return [parse_complex_events(c[EVENT_OFFSET:]) for _p, c in switch.process(template.frame(seq, 0, 0, value), 1)]

    assert sent(0, 1) == [] and sent(1, 2) == [[(3, 1, 1, 1, 0, 1)]]
    assert sent(2, 1) == []
    control.remove_pattern(3)                       # half a match (seq 2) goes with it
    assert sent(3, 2) == []
    second = rules.complex_events[0].model_copy(update={"id": 4})
    assert control.add_pattern(second) == 0         # the slot is free again
    assert sent(4, 2) == [] and sent(5, 1) == [] and sent(6, 2) == [[(4, 1, 1, 6, 0, 6)]]
    with pytest.raises(CepControlError, match="installed already"):
        control.add_pattern(second)


def test_a_window_counts_one_comparison_and_the_rules_say_so():
    from testbed.semantics.topology import TopologyError, parse_topology
    topo = {"name": "t", "hosts": {"h1": {}, "h2": {}, "h5": {}},
            "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 2, "slide": 2},
                         "operators": ["h2"], "events": 5, "rate": 10}],
            "cep": {"windows": [{"name": "w", "stream": 1, "field": "value", "size": 4}],
                    "complex_events": [{"name": "x", "id": 1, "stream": 1, "sinks": ["h5"],
                                        "pattern": "[count(w > 1) >= 2]; [count(w < 0) == 1]"}]}}
    with pytest.raises(TopologyError, match=r"cep.complex_events\[0\].pattern: count\(w < 0\): window 'w' "
                                            r"already counts w > 1"):
        parse_topology(topo, plan_only=True)


def test_a_sum_of_seqs_goes_past_32_bits_on_the_switch_as_in_the_oracle():
    """The sum register is 64 bits whatever the field: sum over seq never wraps (docs/cep.md)."""
    rules = CepRules.model_validate({"windows": [{"name": "s", "stream": 1, "field": "seq", "size": 2}],
                                     "complex_events": [{"name": "far", "id": 1, "stream": 1, "sinks": ["h5"],
                                                         "pattern": "[sum(s) > 4294967295]", "returns": "sum(s)"}]})
    switch = sink_switch(rules)
    template = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)
    got = [parse_complex_events(c[EVENT_OFFSET:]) for seq in (2**32 - 2, 2**32 - 1)
           for _p, c in switch.process(template.frame(seq, 0, 0, 0), 1)
           if int.from_bytes(c[36:38], "big") == CEP_UDP_PORT]
    oracle = CepOracle(rules.window_specs(), rules.pattern_specs())
    want = [c for seq in (2**32 - 2, 2**32 - 1) for c in oracle.step(BasicEvent(1, seq, 0, 0, 0))]
    assert got == [[(1, 1, 1, 2**32 - 1, 0, 2**33 - 3)]]
    assert [(c.pattern, c.match, c.seq, c.value) for c in want] == [(1, 1, 2**32 - 1, 2**33 - 3)]


def test_a_pattern_added_later_reads_the_count_its_window_kept_from_its_install():
    """A window counts, from its install, the comparison a pattern added later reads
    (docs/cep.md): the added pattern sees the count over every value held, as the oracle does."""
    window = {"name": "w", "stream": 1, "field": "value", "size": 3}
    later = {"name": "neg", "id": 2, "stream": 1, "sinks": ["h5"], "pattern": "[count(w < 0) >= 2]",
             "returns": "count(w < 0)"}
    first = {"name": "any", "id": 1, "stream": 1, "sinks": ["h5"], "pattern": "[value == 99]"}
    initial = CepRules.model_validate({"windows": [window], "complex_events": [first]})
    every = CepRules.model_validate({"windows": [window], "complex_events": [first, later]})
    switch = SplitterPipeline()
    switch.table_add("egress_rewrite", "rewrite_dst", [5, 0], ["02:00:00:00:00:05", "10.0.0.5", 5])
    control = CepControl(switch, SINKS)
    control.install(initial, every.window_tests())
    oracle = CepOracle(initial.window_specs(), initial.pattern_specs())
    template = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)
    got, want = [], []
    for seq, value in enumerate([-1, -2, 5, -3, 4]):
        if seq == 2:                            # the two negatives are in the window already
            control.add_pattern(every.complex_events[1])
            oracle.install(every.complex_events[1].spec())
        got += [parse_complex_events(c[EVENT_OFFSET:]) for _p, c in switch.process(template.frame(seq, 0, 0, value), 1)
                if int.from_bytes(c[36:38], "big") == CEP_UDP_PORT]
        want += [[(c.pattern, c.match, c.stream, c.seq, c.ts, c.value)] for c in oracle.step(BasicEvent(1, seq, 0, 0,
                                                                                                          value))]
    assert got == want == [[(2, 1, 1, 2, 0, 2)], [(2, 2, 1, 3, 0, 2)]]
