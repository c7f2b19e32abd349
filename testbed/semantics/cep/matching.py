"""Which events complete a pattern: the partial matches a pattern keeps (docs/cep.md, "Patterns").

A partial match is ``(step, matched)``: the step of the sequence it is in
and the members of that step that events have matched so far.  Each event
moves every partial match at once (``advance``), and a match completes when
a partial match gets past the last step; the pattern then starts afresh
after that event.

The two selection strategies differ in what an event that does not move a
partial match does to it:

- ``skip-till-next-match`` ignores the event: the partial match stays, so a
  match may have any events between its steps.  A partial match that is
  further on completes no later than one behind it, so only the foremost
  is kept (``dominates``): the one that moved greedily.
- ``strict`` ends that partial match: a match is a run of consecutive
  events, every one of which moves it.  A run may begin at any event after
  the last match, so every event also starts a new partial match.
"""
from __future__ import annotations

from typing import Callable

from testbed.semantics.cep.language import Comparison, Pattern, holds

SKIP_TILL_NEXT_MATCH = "skip-till-next-match"
STRICT = "strict"
STRATEGIES = (SKIP_TILL_NEXT_MATCH, STRICT)

#: ``(step index, members of that step matched)``.
Partial = tuple[int, frozenset[int]]
START: Partial = (0, frozenset())


def initial(strategy: str) -> frozenset[Partial]:
    """The partial matches before the first event, and again after each match."""
    return frozenset([START]) if strategy == SKIP_TILL_NEXT_MATCH else frozenset()


def holding(pattern: Pattern, truth: Callable[[Comparison], bool]) -> tuple[frozenset[int], ...]:
    """Per step, the members whose predicate holds, given each comparison's truth."""
    known: dict[Comparison, bool] = {}

    def once(c: Comparison) -> bool:          # a comparison reads a window aggregate: once per event
        if c not in known:
            known[c] = truth(c)
        return known[c]

    return tuple(frozenset(i for i, member in enumerate(step.members) if holds(member, once))
                 for step in pattern.steps)


def advance(pattern: Pattern, strategy: str, partials: frozenset[Partial],
            holds_now: tuple[frozenset[int], ...]) -> tuple[frozenset[Partial], bool]:
    """The partial matches after an event for which ``holds_now`` members hold,
    and whether the event completed a match (the partial matches then restart)."""
    moving = partials | {START} if strategy == STRICT else partials
    after: set[Partial] = set(partials) if strategy == SKIP_TILL_NEXT_MATCH else set()
    last = len(pattern.steps) - 1
    for step_index, matched in moving:
        step = pattern.steps[step_index]
        new = holds_now[step_index] - matched
        if not new:
            continue
        if step.kind == "any" or len(matched | new) == len(step.members):
            if step_index == last:
                return initial(strategy), True
            after.add((step_index + 1, frozenset()))
        else:
            after.add((step_index, matched | new))
    if strategy == SKIP_TILL_NEXT_MATCH:
        after = {p for p in after if not any(dominates(q, p) for q in after)}
    return frozenset(after), False


def dominates(a: Partial, b: Partial) -> bool:
    """Whether ``a`` completes, skipping, no later than ``b`` whatever events follow:
    it is at a later step, or at the same step with more members matched.
    Skipping keeps only undominated partial matches, so it keeps one: the greedy one."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] > b[1])
