"""The CEP oracle: the complex events a rule set yields for the events a switch saw.

It applies docs/cep.md's definitions one event at a time, in the switch's
order: the event enters its stream's windows, then every installed pattern
of its stream moves (``matching.advance``), in slot order, and each one
that completes emits a ``ComplexEvent``.  Every target's CEP stage is held
to it, as the window oracle holds the splitter.  Rules can be installed,
replaced and removed between two events (``install``, ``remove``), which is
what a change at run time does.

Slots are the one order of the complex events an event completes
(docs/cep.md, "The order of complex events"): the switch emits them by
slot, so the oracle keeps the same slots by the same rule as the control
plane (``testbed.dataplane.cep``): the rules declared take slots 0, 1, ...
in declaration order, an added pattern the lowest free slot, a replaced
one keeps its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Optional

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
        #: pattern id -> its slot: the order its complex events are reported in
        self.slot_of: dict[int, int] = {}
        for spec in patterns:
            self.install(spec)

    @property
    def slots(self) -> list[Optional[int]]:
        """The pattern id in each slot up to the last taken, None for a free one."""
        out: list[Optional[int]] = [None] * (max(self.slot_of.values(), default=-1) + 1)
        for pattern_id, slot in self.slot_of.items():
            out[slot] = pattern_id
        return out

    def install(self, spec: PatternSpec, slot: Optional[int] = None) -> int:
        """Install ``spec``: it starts afresh with the next event, its match count from 0.
        A pattern of the same id is replaced and its slot kept; a new one takes ``slot``
        or else the lowest free slot.  Returns the slot.  (A schedule's changes come
        with their slots assigned in the run's order, ``changes.plan_changes``, as the
        oracle may meet two streams' changes in another order.)"""
        if spec.id in self.slot_of:
            slot = self.slot_of[spec.id]
        elif slot is None:
            taken = set(self.slot_of.values())
            slot = next(s for s in range(len(taken) + 1) if s not in taken)
        self.slot_of[spec.id] = slot
        self.patterns[spec.id] = PatternState(spec)
        return slot

    def remove(self, pattern_id: int) -> None:
        self.patterns.pop(pattern_id)
        self.slot_of.pop(pattern_id)

    def install_window(self, spec: WindowSpec) -> None:
        """Install window ``spec``, empty (replacing a window of the same name, whose values go)."""
        self.windows[spec.name] = LastN(spec)

    def remove_window(self, name: str) -> None:
        self.windows.pop(name)

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
        for pattern_id in sorted(self.patterns, key=self.slot_of.__getitem__):
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
