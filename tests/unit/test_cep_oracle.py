"""The CEP oracle (docs/cep.md) against brute force, and the switch's tables against the oracle.

- Matching: random pattern shapes and random truths of their basic events;
  the partial-match semantics (``matching.advance``) must find exactly the
  matches that trying every cut of the events finds (``support.cep_brute``).
- The whole oracle: random rules (windows, predicates with aggregates,
  patterns, return values) on random events of two streams, against the
  brute force that recomputes every aggregate from the full history.
- The compiled machine (``automaton.compile_pattern``): the same matches as
  the oracle for every event sequence, in as few states as the meaning allows.
- The worked examples of docs/cep.md, checked as written there.
"""
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import cep_brute
from testbed.semantics.cep.automaton import MAX_STATES, PatternTooLarge, compile_pattern
from testbed.semantics.cep.language import (
    Aggregate,
    Comparison,
    CountIf,
    FieldRef,
    Pattern,
    Step,
    parse_operand,
    parse_pattern,
)
from testbed.semantics.cep.lastn import WindowSpec, in_type
from testbed.semantics.cep.matching import STRATEGIES, advance, initial
from testbed.semantics.cep.oracle import BasicEvent, CepOracle, ComplexEvent, PatternSpec

pytestmark = pytest.mark.unit

OPS = ["<", "<=", "==", "!=", ">=", ">"]


def matches_by_advance(kinds, sizes, strategy, holds) -> list[int]:
    pattern = Pattern(tuple(Step(k, tuple(Comparison(FieldRef("value"), "==", m) for m in range(n)))
                            for k, n in zip(kinds, sizes)))
    partials, found = initial(strategy), []
    for t, holds_now in enumerate(holds, 1):
        partials, matched = advance(pattern, strategy, partials, holds_now)
        if matched:
            found.append(t)
    return found


@st.composite
def shapes_and_truths(draw):
    steps = draw(st.integers(1, 3))
    kinds = [draw(st.sampled_from(["any", "all"])) for _ in range(steps)]
    sizes = [draw(st.integers(1, 3)) for _ in range(steps)]
    events = draw(st.integers(0, 12))
    holds = [tuple(frozenset(draw(st.sets(st.integers(0, sizes[j] - 1), max_size=sizes[j])))
                   for j in range(steps)) for _ in range(events)]
    return kinds, sizes, holds


@settings(max_examples=600, deadline=None)
@given(shapes_and_truths(), st.sampled_from(STRATEGIES))
def test_partial_matches_find_what_every_cut_of_the_events_finds(case, strategy):
    kinds, sizes, holds = case
    assert matches_by_advance(kinds, sizes, strategy, holds) == cep_brute.matches(kinds, sizes, strategy, holds)


# -- random rules on random events -------------------------------------------------------
WINDOWS = {"a": WindowSpec("a", 1, "value", 3), "b": WindowSpec("b", 1, "key", 1),
           "c": WindowSpec("c", 2, "value", 4)}


@st.composite
def operands(draw, stream: int):
    mine = [w for w, spec in WINDOWS.items() if spec.stream == stream]
    kind = draw(st.sampled_from(["field", "aggregate", "count_if"]))
    if kind == "field":
        return FieldRef(draw(st.sampled_from(["value", "key", "seq"])))
    window = draw(st.sampled_from(mine))
    if kind == "aggregate":
        return Aggregate(draw(st.sampled_from(["sum", "min", "max", "count"])), window)
    return CountIf(window, draw(st.sampled_from(OPS)), draw(st.integers(-2, 3)))


@st.composite
def predicates(draw, stream: int, depth: int = 0):
    if depth < 2 and draw(st.booleans()):
        from testbed.semantics.cep.language import Both, Either
        glue = draw(st.sampled_from([Both, Either]))
        return glue(draw(predicates(stream, depth + 1)), draw(predicates(stream, depth + 1)))
    return Comparison(draw(operands(stream)), draw(st.sampled_from(OPS)), draw(st.integers(-3, 6)))


@st.composite
def pattern_specs(draw, pattern_id: int):
    stream = draw(st.sampled_from([1, 2]))
    steps = tuple(Step(draw(st.sampled_from(["any", "all"])),
                       tuple(draw(predicates(stream)) for _ in range(draw(st.integers(1, 2)))))
                  for _ in range(draw(st.integers(1, 3))))
    return PatternSpec(pattern_id, stream, Pattern(steps), draw(st.sampled_from(STRATEGIES)),
                       draw(operands(stream)))


@st.composite
def event_lists(draw):
    n = draw(st.integers(0, 14))
    seqs = {1: 0, 2: 0}
    events = []
    for _ in range(n):
        stream = draw(st.sampled_from([1, 2]))
        events.append(BasicEvent(stream, seqs[stream], draw(st.integers(0, 5)), draw(st.integers(0, 3)),
                                 draw(st.integers(-3, 4))))
        seqs[stream] += 1
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True).flatmap(
    lambda ids: st.tuples(*(pattern_specs(i) for i in ids))), event_lists())
def test_the_oracle_is_the_definition_recomputed_from_the_whole_history(patterns, events):
    oracle = CepOracle(WINDOWS.values(), patterns)
    assert oracle.run(events) == cep_brute.complex_events(WINDOWS, list(patterns), events)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern_specs(1), event_lists())
def test_the_compiled_table_matches_where_the_oracle_does(spec, events):
    try:
        machine = compile_pattern(spec.pattern, spec.strategy)
    except PatternTooLarge:
        return                                   # refused by validation; nothing to install
    oracle = CepOracle(WINDOWS.values(), [spec])
    expected, symbols = [], []
    for event in events:
        found = oracle.step(event)
        if event.stream != spec.stream:
            continue
        expected.append(bool(found))
        truth = {c: oracle_truth(oracle, c, event) for c in machine.comparisons}
        symbols.append(machine.symbol(truth))
    assert machine.run(symbols) == expected


def oracle_truth(oracle: CepOracle, c: Comparison, event: BasicEvent) -> bool:
    from testbed.semantics.cep.language import OPERATORS
    return OPERATORS[c.op](oracle.value(c.operand, event), c.constant)


def test_the_table_is_no_larger_than_the_pattern_needs():
    # A sequence of k single events, skipping, needs k states: waiting for step 1 .. k.  Strict
    # runs overlap (an event may end one run and begin or continue others), and the table
    # cannot know that value == 0 and value == 1 exclude each other: a state per set of
    # steps some run has reached, at most 2^(k-1).
    for k in range(1, 6):
        text = "; ".join(f"[value == {i}]" for i in range(k))
        assert compile_pattern(parse_pattern(text), "skip-till-next-match").states == k
        assert k <= compile_pattern(parse_pattern(text), "strict").states <= 2 ** (k - 1)
    # A conjunction of m members needs a state per subset matched short of all of them.
    both = parse_pattern("[value == 1] && [key == 2] && [seq == 3]")
    assert compile_pattern(both, "skip-till-next-match").states == 2 ** 3 - 1


def test_a_pattern_the_table_cannot_hold_is_refused_with_the_limit():
    nine = " && ".join(f"[value == {i}]" for i in range(9))
    with pytest.raises(PatternTooLarge, match="9 distinct comparisons"):
        compile_pattern(parse_pattern(nine), "strict")
    six = " && ".join(f"[value == {i}]" for i in range(6))      # 2^6 - 1 subsets: over 32 states
    with pytest.raises(PatternTooLarge, match=f"more than the {MAX_STATES}"):
        compile_pattern(parse_pattern(six), "skip-till-next-match")


def test_sum_wraps_at_64_bits_in_the_fields_type():
    big = (1 << 63) - 1
    assert in_type(big + 1, "value") == -(1 << 63)
    assert in_type(big + 1, "key") == 1 << 63
    oracle = CepOracle([WindowSpec("w", 1, "value", 2)])
    for seq, v in enumerate([big, 1]):
        oracle.step(BasicEvent(1, seq, 0, 0, v))
    assert oracle.value(parse_operand("sum(w)"), None) == -(1 << 63)


# -- docs/cep.md's worked examples --------------------------------------------------------
def run_example(pattern: str, strategy: str, values: list[int], returns: str = "value",
                windows=(WindowSpec("last3", 7, "value", 3),)) -> list[ComplexEvent]:
    spec = PatternSpec(1, 7, parse_pattern(pattern), strategy, parse_operand(returns))
    return CepOracle(windows, [spec]).run([BasicEvent(7, i, 10 * i, 0, v) for i, v in enumerate(values)])


def test_worked_example_sequence_skip_till_next_match():
    found = run_example("[value > 5]; [value < 0]", "skip-till-next-match", [7, 1, 9, -2, -4, 8, 3, -1])
    assert [(c.match, c.seq, c.value) for c in found] == [(1, 3, -2), (2, 7, -1)]


def test_worked_example_sequence_strict():
    found = run_example("[value > 5]; [value < 0]", "strict", [7, 1, 9, -2, -4, 8, 3, -1])
    assert [(c.match, c.seq) for c in found] == [(1, 3)]


def test_worked_example_strict_overlapping_starts():
    # 1 1 1 2: the run that completes begins at the second event, not the first.
    found = run_example("[value == 1]; [value == 1]; [value == 2]", "strict", [1, 1, 1, 2])
    assert [c.seq for c in found] == [3]


def test_worked_example_conjunction_and_window():
    found = run_example("([value > 5] && [count(last3 < 0) >= 2]); [sum(last3) > 20]",
                        "skip-till-next-match", [-1, -2, 6, 3, 9, 10, 4], returns="sum(last3)")
    assert [(c.seq, c.value) for c in found] == [(5, 22)]


def test_worked_example_one_event_meets_every_member_it_satisfies():
    found = run_example("[value > 5] && [value < 9]", "strict", [7])
    assert [c.seq for c in found] == [0]
    # Two members, one event each, in either order; a repeat of a met member breaks a strict run.
    assert [c.seq for c in run_example("[value > 5] && [value < 0]", "strict", [7, 8, -1])] == [2]
    assert [c.seq for c in run_example("[value > 5] && [value < 0]", "skip-till-next-match",
                                       [-1, 0, 7])] == [2]


def test_a_step_is_never_met_by_the_event_that_met_the_step_before():
    assert run_example("[value > 5]; [value > 5]", "skip-till-next-match", [7, 8, 9, 10]) == \
        run_example("[value > 5]; [value > 5]", "skip-till-next-match", [7, 8, 9, 10])
    assert [c.seq for c in run_example("[value > 5]; [value > 5]", "skip-till-next-match", [7, 8, 9, 10])] == [1, 3]


def test_patterns_of_one_event_report_in_slot_order_and_number_their_matches():
    def spec(i):
        return PatternSpec(i, 7, parse_pattern("[value > 0]"), "strict", parse_operand("seq"))

    oracle = CepOracle([], [spec(3), spec(1)])          # declared 3, then 1: slots 0 and 1
    found = oracle.run([BasicEvent(7, s, 0, 0, 1) for s in range(2)])
    assert [(c.pattern, c.match, c.seq) for c in found] == [(3, 1, 0), (1, 1, 0), (3, 2, 1), (1, 2, 1)]
    oracle.install(spec(3))                             # replaced: keeps slot 0, counts from 1 again
    oracle.remove(1)
    oracle.install(spec(9))                             # the lowest free slot: 1
    oracle.install(spec(2))                             # none free: a new slot 2
    oracle.remove(3)
    oracle.install(spec(5))                             # slot 0 again, so first although installed last
    found = oracle.run([BasicEvent(7, 2, 0, 0, 1)])
    assert [(c.pattern, c.match) for c in found] == [(5, 1), (9, 1), (2, 1)]
    assert oracle.slots == [5, 9, 2]


def test_a_pattern_installed_later_starts_afresh_and_one_removed_stops():
    spec = PatternSpec(1, 7, parse_pattern("[value == 1]; [value == 2]"), "skip-till-next-match",
                       parse_operand("seq"))
    oracle = CepOracle([], [spec])
    events = [BasicEvent(7, i, 0, 0, v) for i, v in enumerate([1, 2, 1, 1, 2])]
    assert [c.seq for c in oracle.run(events[:3])] == [1]
    oracle.install(spec)                     # replaced: the partial match begun at seq 2 is gone
    assert oracle.run(events[3:]) == [ComplexEvent(1, 1, 7, 4, 0, 4)]
    oracle.remove(1)
    assert oracle.run(events) == []


def test_all_members_of_every_step_shape_compile_under_the_limit():
    for kinds in itertools.product(["any", "all"], repeat=2):
        text = "; ".join("(" + (" && " if k == "all" else " || ").join(f"[value == {3 * j + i}]"
                                                                        for i in range(2)) + ")"
                         for j, k in enumerate(kinds))
        for strategy in STRATEGIES:
            assert compile_pattern(parse_pattern(text), strategy).states <= MAX_STATES
