"""CEP by brute force: docs/cep.md's definitions read literally, with no state carried.

The oracle (``testbed.semantics.cep``) keeps windows as running buffers and
patterns as sets of partial matches.  These functions instead recompute
everything from the whole history at every event: an aggregate from the
list of all values seen, a match by trying every way to cut the events
since the last match into the pattern's steps.  They are exponential and
only for small inputs, which is what makes them easy to trust.
"""
from __future__ import annotations

from testbed.semantics.cep.language import (
    FIELD_TYPES,
    OPERATORS,
    Aggregate,
    Both,
    Comparison,
    CountIf,
    Either,
    FieldRef,
    Pattern,
)
from testbed.semantics.cep.oracle import ComplexEvent


def wrap(x: int, field: str) -> int:
    signed, _ = FIELD_TYPES[field]
    x %= 1 << 64
    return x - (1 << 64) if signed and x >= 1 << 63 else x


def operand_value(operand, history: list, event, windows: dict) -> int:
    """The operand at ``event``: its field, or an aggregate of the window's last ``size`` values
    among all events of the window's stream seen so far (``history``, this one included)."""
    if isinstance(operand, FieldRef):
        return getattr(event, operand.name)
    spec = windows[operand.window]
    values = [getattr(e, spec.field) for e in history if e.stream == spec.stream][-spec.size:]
    if isinstance(operand, CountIf):
        return len([v for v in values if OPERATORS[operand.op](v, operand.constant)])
    assert isinstance(operand, Aggregate)
    return {"sum": lambda: wrap(sum(values), spec.field), "min": lambda: min(values),
            "max": lambda: max(values), "count": lambda: len(values)}[operand.function]()


def predicate_holds(predicate, value_of) -> bool:
    if isinstance(predicate, Comparison):
        return OPERATORS[predicate.op](value_of(predicate.operand), predicate.constant)
    if isinstance(predicate, Both):
        return predicate_holds(predicate.left, value_of) and predicate_holds(predicate.right, value_of)
    assert isinstance(predicate, Either)
    return predicate_holds(predicate.left, value_of) or predicate_holds(predicate.right, value_of)


# -- matching: holds[e][j] is the set of step j's members that hold at event e (0-based) ---------
def _covered(kinds, sizes, holds, j: int, a: int, b: int) -> bool:
    """skip-till-next-match: step j is met by events a+1 .. b (every member by some event, or one)."""
    met = set().union(*(holds[x][j] for x in range(a, b)))
    return bool(met) if kinds[j] == "any" else len(met) == sizes[j]


def _strict_run_end(kinds, sizes, holds, j: int, a: int):
    """strict: where a run for step j that starts after event a ends (each event adding a member), or None."""
    matched: set = set()
    for x in range(a, len(holds)):
        new = holds[x][j] - matched
        if not new:
            return None
        matched |= new
        if kinds[j] == "any" or len(matched) == sizes[j]:
            return x + 1
    return None


def completes(kinds, sizes, strategy: str, holds, r: int, t: int) -> bool:
    """Whether events r+1 .. t hold a match of the pattern that ends at t (as the definition has it)."""
    steps = len(kinds)
    if strategy == "strict":
        def runs(j: int, a: int) -> bool:
            end = _strict_run_end(kinds, sizes, holds[:t], j, a)
            if end is None:
                return False
            return end == t if j == steps - 1 else runs(j + 1, end)
        return any(runs(0, s) for s in range(r, t))

    def cuts(j: int, a: int) -> bool:
        if j == steps - 1:
            return _covered(kinds, sizes, holds, j, a, t)
        return any(_covered(kinds, sizes, holds, j, a, b) and cuts(j + 1, b) for b in range(a + 1, t))
    return cuts(0, r)


def matches(kinds, sizes, strategy: str, holds) -> list[int]:
    """The events (1-based) that complete a match: each the first one after the last match that can."""
    found, last = [], 0
    for t in range(1, len(holds) + 1):
        if completes(kinds, sizes, strategy, holds, last, t):
            found.append(t)
            last = t
    return found


def shape(pattern: Pattern) -> tuple[list[str], list[int]]:
    return [s.kind for s in pattern.steps], [len(s.members) for s in pattern.steps]


def complex_events(windows: dict, patterns: list, events: list) -> list[ComplexEvent]:
    """Every complex event of ``patterns`` (PatternSpec) over ``events``, recomputed from scratch."""
    found = []
    for t, event in enumerate(events):
        history = events[:t + 1]
        for spec in patterns:              # declaration order (docs/cep.md, "The order of complex events")
            if spec.stream != event.stream:
                continue
            mine = [(i, e) for i, e in enumerate(history) if e.stream == spec.stream]
            holds = [tuple(frozenset(k for k, member in enumerate(step.members)
                                     if predicate_holds(member, lambda op, i=i, e=e: operand_value(
                                         op, events[:i + 1], e, windows)))
                           for step in spec.pattern.steps) for i, e in mine]
            ends = matches(*shape(spec.pattern), spec.strategy, holds)
            if ends and ends[-1] == len(mine):
                found.append(ComplexEvent(spec.id, len(ends), event.stream, event.seq, event.ts,
                                          operand_value(spec.returns, history, event, windows)))
    return found
