"""The CEP oracle: the complex events a rule set yields for the events a switch saw.

It applies docs/cep.md's definitions one event at a time, in the switch's
order: the event enters its stream's windows, then every installed pattern
of its stream moves (``matching.advance``), in ascending pattern id, and
each one that completes emits a ``ComplexEvent``.  Every target's CEP stage
is held to it, as the window oracle holds the splitter.  Rules can be
installed and removed between two events (``install``, ``remove``), which is
what a change at run time does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple

from testbed.semantics.cep.language import OPERATORS, Comparison, FieldRef, Operand, Pattern
from testbed.semantics.cep.lastn import LastN, WindowSpec
from testbed.semantics.cep.matching import advance, holding, initial


class BasicEvent(NamedTuple):
    """An event as the switch parses it (the fields a rule can read)."""

    stream: int
    seq: int
    ts: int
    key: int
    value: int


@dataclass(frozen=True)
class PatternSpec:
    """A complex event's definition: which events of which stream match, and what it returns."""

    id: int
    stream: int
    pattern: Pattern
    strategy: str
    returns: Operand


@dataclass(frozen=True)
class ComplexEvent:
    """One match: the pattern's id, its number among that pattern's matches
    (from 1), the event that completed it, and the return value."""

    pattern: int
    match: int
    stream: int
    seq: int
    ts: int
    value: int


class PatternState:
    """An installed pattern: its partial matches and how many matches it made."""

    def __init__(self, spec: PatternSpec):
        self.spec = spec
        self.partials = initial(spec.strategy)
        self.matches = 0


class CepOracle:
    """Windows and patterns, stepped by the events of every stream in the switch's order."""

    def __init__(self, windows: Iterable[WindowSpec] = (), patterns: Iterable[PatternSpec] = ()):
        self.windows: dict[str, LastN] = {w.name: LastN(w) for w in windows}
        self.patterns: dict[int, PatternState] = {}
        for spec in patterns:
            self.install(spec)

    def install(self, spec: PatternSpec) -> None:
        """Install ``spec`` (replacing a pattern of the same id): it starts afresh with the next event."""
        self.patterns[spec.id] = PatternState(spec)

    def remove(self, pattern_id: int) -> None:
        self.patterns.pop(pattern_id)

    def value(self, operand: Operand, event: BasicEvent) -> int:
        if isinstance(operand, FieldRef):
            return getattr(event, operand.name)
        return self.windows[operand.window].aggregate(operand)

    def step(self, event: BasicEvent) -> list[ComplexEvent]:
        """The complex events ``event`` completes."""
        for window in self.windows.values():
            if window.spec.stream == event.stream:
                window.push(getattr(event, window.spec.field))

        def truth(c: Comparison) -> bool:
            return OPERATORS[c.op](self.value(c.operand, event), c.constant)

        out = []
        for pattern_id in sorted(self.patterns):
            state = self.patterns[pattern_id]
            spec = state.spec
            if spec.stream != event.stream:
                continue
            state.partials, matched = advance(spec.pattern, spec.strategy, state.partials,
                                              holding(spec.pattern, truth))
            if matched:
                state.matches += 1
                out.append(ComplexEvent(spec.id, state.matches, event.stream, event.seq, event.ts,
                                        self.value(spec.returns, event)))
        return out

    def run(self, events: Iterable[BasicEvent]) -> list[ComplexEvent]:
        return [found for event in events for found in self.step(event)]
