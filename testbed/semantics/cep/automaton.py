"""A pattern as the switch holds it: a transition table keyed by (state, symbol).

The switch cannot keep a set of partial matches, but it can keep one state
number per pattern and look ``(state, symbol)`` up in a table, as P4CEP's
state machines do (§3.2).  The symbol is the truth of the pattern's
comparisons as a bit vector: bit i is comparison i
(``language.pattern_comparisons``), which the switch's predicate tables
compute.  ``compile_pattern`` builds that table from the definition in
``matching``: every set of partial matches reachable from the start
becomes a state (the subset construction), then states that no event
sequence can tell apart are merged (partition refinement), so that a
pattern needs as few table entries as its meaning allows.

A row is ``(next state, match)``; a match sends the pattern back to
state 0, as the definition restarts it.
"""
from __future__ import annotations

from dataclasses import dataclass

from testbed.semantics.cep.language import Comparison, Pattern, pattern_comparisons
from testbed.semantics.cep.matching import Partial, advance, holding, initial

#: Comparisons one pattern may test: the symbol is this many bits.
MAX_COMPARISONS = 8
#: States one pattern's machine may have: the transition table's share per pattern.
MAX_STATES = 32
#: Sets of partial matches explored before giving up on a pattern that cannot fit.
_EXPLORE_LIMIT = 4096


class PatternTooLarge(ValueError):
    """A pattern whose machine the switch's tables cannot hold; ``str()`` says which limit."""


@dataclass(frozen=True)
class Automaton:
    """``transitions[state][symbol] = (next state, match)``; state 0 is the start."""

    comparisons: tuple[Comparison, ...]
    transitions: tuple[tuple[tuple[int, bool], ...], ...]

    @property
    def states(self) -> int:
        return len(self.transitions)

    def symbol(self, truth: dict[Comparison, bool]) -> int:
        return sum(1 << i for i, c in enumerate(self.comparisons) if truth[c])

    def run(self, symbols: list[int]) -> list[bool]:
        """Whether each event completes a match, for events of these symbols."""
        state, out = 0, []
        for symbol in symbols:
            state, matched = self.transitions[state][symbol]
            out.append(matched)
        return out


def compile_pattern(pattern: Pattern, strategy: str) -> Automaton:
    """The smallest transition table equivalent to ``pattern`` under ``strategy``."""
    comparisons = tuple(pattern_comparisons(pattern))
    if len(comparisons) > MAX_COMPARISONS:
        raise PatternTooLarge(f"{len(comparisons)} distinct comparisons, more than the {MAX_COMPARISONS} "
                              f"a pattern's symbol holds")
    n_symbols = 1 << len(comparisons)
    # Which members hold depends only on the symbol: work it out once per symbol.
    holds_by_symbol = [holding(pattern, lambda c, s=s: bool(s >> comparisons.index(c) & 1))
                       for s in range(n_symbols)]
    start = initial(strategy)
    number: dict[frozenset[Partial], int] = {start: 0}
    order = [start]
    rows: list[list[tuple[int, bool]]] = []
    for partials in order:                      # grows while it is walked: breadth first
        row = []
        for symbol in range(n_symbols):
            after, matched = advance(pattern, strategy, partials, holds_by_symbol[symbol])
            if after not in number:
                if len(order) >= _EXPLORE_LIMIT:
                    raise PatternTooLarge(f"more than {_EXPLORE_LIMIT} sets of partial matches before "
                                          f"merging; at most {MAX_STATES} states fit")
                number[after] = len(order)
                order.append(after)
            row.append((number[after], matched))
        rows.append(row)
    automaton = Automaton(comparisons, minimized(rows))
    if automaton.states > MAX_STATES:
        raise PatternTooLarge(f"its state machine needs {automaton.states} states, more than the "
                              f"{MAX_STATES} a pattern's transition table holds")
    return automaton


def minimized(rows: list[list[tuple[int, bool]]]) -> tuple[tuple[tuple[int, bool], ...], ...]:
    """The same machine with indistinguishable states merged (Moore's refinement),
    renumbered in breadth-first order from state 0."""
    block = [0] * len(rows)
    while True:
        signatures: dict[tuple, int] = {}
        refined = [signatures.setdefault((block[s], tuple((block[n], m) for n, m in row)), len(signatures))
                   for s, row in enumerate(rows)]
        if len(signatures) == len(set(block)):
            break
        block = refined
    # One representative per block, numbered as a breadth-first walk from the start meets them.
    number = {block[0]: 0}
    order = [0]
    for s in order:
        for n, _ in rows[s]:
            if block[n] not in number:
                number[block[n]] = len(order)
                order.append(n)
    return tuple(tuple((number[block[n]], m) for n, m in rows[s]) for s in order)
