"""A topology's ``cep:`` section: window operators and complex events, checked before anything runs.

The rules are YAML close to P4CEP's Listing 1 (docs/cep.md, "Rules"): a
window names a stream, a field and a size; a complex event names a
stream, a pattern, a selection strategy, a return value and the sink hosts
that receive it.  Validation parses every pattern and return value,
resolves every window they name, keeps every constant within the type it
is compared with, and compiles every pattern into the transition table the
switch would hold, so a rule set the switch cannot carry is refused with
one line that names the field.  Cross-references to the topology (streams,
sink hosts) are checked by ``Topology``.
"""
from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from testbed.semantics.cep.automaton import Automaton, PatternTooLarge, compile_pattern
from testbed.semantics.cep.language import (
    FIELD_TYPES,
    Aggregate,
    CountIf,
    FieldRef,
    Operand,
    Pattern,
    RuleSyntaxError,
    operand_windows,
    parse_operand,
    parse_pattern,
    pattern_comparisons,
)
from testbed.semantics.cep.lastn import MAX_CEP_WINDOW, WindowSpec, operand_range
from testbed.semantics.cep.matching import SKIP_TILL_NEXT_MATCH, STRATEGIES
from testbed.semantics.cep.oracle import PatternSpec
from testbed.semantics.strict import FieldError, StrictModel

#: Window operators the switch holds at once (register ring buffers).
MAX_CEP_WINDOWS = 4
#: Complex events installed at once (state registers and transition-table shares).
MAX_PATTERNS = 4
#: Complex event ids are 16 bits in the complex event header; 0 means none.
MAX_PATTERN_ID = (1 << 16) - 1
_RULE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,31}")


def _rule_name(name: str) -> str:
    # The rule's own words, not the regex: names key windows in rule text, whose grammar reads these.
    if not _RULE_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a rule name: 1 to 32 characters, each a lowercase letter, "
                         f"a digit or _, the first not a digit")
    return name


RuleName = Annotated[str, AfterValidator(_rule_name)]


class CepWindow(StrictModel):
    """The last ``size`` values of ``field`` over the events of ``stream``."""

    name: RuleName
    stream: int = Field(ge=0, le=MAX_PATTERN_ID)
    field: Literal[tuple(FIELD_TYPES)]  # type: ignore[valid-type]
    size: int = Field(ge=1, le=MAX_CEP_WINDOW, description="values held; the ring buffers are this deep")

    def spec(self) -> WindowSpec:
        return WindowSpec(self.name, self.stream, self.field, self.size)


class ComplexEventRule(StrictModel):
    """A pattern over one stream's events, and what a match sends to the sinks."""

    name: RuleName
    id: int = Field(ge=1, le=MAX_PATTERN_ID)
    stream: int = Field(ge=0, le=MAX_PATTERN_ID)
    pattern: str
    strategy: Literal[STRATEGIES] = SKIP_TILL_NEXT_MATCH  # type: ignore[valid-type]
    returns: str = "value"
    sinks: list[str] = Field(min_length=1)

    @field_validator("pattern", "returns")
    @classmethod
    def _parses(cls, text: str, info: ValidationInfo) -> str:
        try:
            (parse_pattern if info.field_name == "pattern" else parse_operand)(text)
        except RuleSyntaxError as err:
            raise ValueError(str(err)) from None
        return text

    @cached_property
    def parsed(self) -> Pattern:
        return parse_pattern(self.pattern)

    @cached_property
    def returned(self) -> Operand:
        return parse_operand(self.returns)

    def operands(self) -> list[Operand]:
        """Every operand the rule reads: its comparisons', then its return value."""
        return [c.operand for c in pattern_comparisons(self.parsed)] + [self.returned]

    def spec(self) -> PatternSpec:
        return PatternSpec(self.id, self.stream, self.parsed, self.strategy, self.returned)


class CepRules(StrictModel):
    """Every window and complex event of a topology, consistent with each other."""

    windows: list[CepWindow] = Field(default=[], max_length=MAX_CEP_WINDOWS)
    complex_events: list[ComplexEventRule] = Field(min_length=1, max_length=MAX_PATTERNS)

    @model_validator(mode="after")
    def _consistent(self) -> "CepRules":
        check_rule_set(self.windows, self.complex_events)
        return self

    # -- what the oracle and the control plane take ----------------------------------
    def window_specs(self) -> list[WindowSpec]:
        return [w.spec() for w in self.windows]

    def pattern_specs(self) -> list[PatternSpec]:
        return [rule.spec() for rule in self.complex_events]

    def automata(self) -> dict[int, Automaton]:
        return {rule.id: compile_pattern(rule.parsed, rule.strategy) for rule in self.complex_events}

    def window_tests(self) -> dict[str, Optional[CountIf]]:
        """Per window, the one comparison its rules count (``count(w op c)``), or None
        (validation refuses two different ones on one window)."""
        tests: dict[str, Optional[CountIf]] = {w.name: None for w in self.windows}
        for rule in self.complex_events:
            for operand in rule.operands():
                if isinstance(operand, CountIf):
                    tests[operand.window] = operand
        return tests

    def streams(self) -> set[int]:
        return {w.stream for w in self.windows} | {rule.stream for rule in self.complex_events}


def check_rule_set(window_list: list[CepWindow], rules: list[ComplexEventRule]) -> None:
    """``FieldError`` (``windows[i]...`` or ``complex_events[i]...``) for the first thing
    in these windows and rules that does not fit together: the rules in a topology's
    ``cep:``, and the rules in force after each change of its schedule."""
    windows: dict[str, CepWindow] = {}
    for i, w in enumerate(window_list):
        if w.name in windows:
            raise FieldError(f"windows[{i}].name", f"window {w.name!r} is declared twice")
        windows[w.name] = w
    ids: dict[int, int] = {}
    names: dict[str, int] = {}
    tests: dict[str, tuple[tuple[str, int], str]] = {}     # window -> its count-if test, and where
    for i, rule in enumerate(rules):
        at = f"complex_events[{i}]"
        if rule.id in ids:
            raise FieldError(f"{at}.id", f"id {rule.id} is also complex_events[{ids[rule.id]}]'s")
        if rule.name in names:
            raise FieldError(f"{at}.name", f"{rule.name!r} is also complex_events[{names[rule.name]}]'s name")
        ids[rule.id], names[rule.name] = i, i
        for operand in rule.operands():
            where = f"{at}.{'returns' if operand is rule.returned else 'pattern'}"
            for name in operand_windows(operand):
                if name not in windows:
                    raise FieldError(where, f"{operand} names no declared window "
                                            f"(declared: {', '.join(windows) or 'none'})")
                if windows[name].stream != rule.stream:
                    raise FieldError(where, f"{operand}: window {name!r} is over stream "
                                            f"{windows[name].stream}, the pattern over stream {rule.stream}")
        for operand in rule.operands():
            if isinstance(operand, CountIf):
                test = (operand.op, operand.constant)
                counted = tests.setdefault(operand.window, (test, at))
                if counted[0] != test:
                    raise FieldError(f"{at}.{'returns' if operand is rule.returned else 'pattern'}",
                                     f"{operand}: window {operand.window!r} already counts "
                                     f"{operand.window} {counted[0][0]} {counted[0][1]} ({counted[1]}); "
                                     f"a window keeps one running count, so declare a second window")
        for c in pattern_comparisons(rule.parsed):
            _in_range(f"{at}.pattern", c.operand, c.constant, str(c), windows)
            if isinstance(c.operand, CountIf):
                _in_range(f"{at}.pattern", FieldRef(windows[c.operand.window].field),
                  c.operand.constant, str(c.operand), windows)
        try:
            compile_pattern(rule.parsed, rule.strategy)
        except PatternTooLarge as err:
            raise FieldError(f"{at}.pattern", f"the switch cannot hold it: {err}") from None


def _in_range(where: str, operand: Operand, constant: int, text: str, windows: dict[str, CepWindow]) -> None:
    lo, hi = value_range(operand, windows)
    if not lo <= constant <= hi:
        raise FieldError(where, f"{text}: {constant} is outside {operand}'s range {lo} .. {hi}, "
                                f"so the comparison cannot be compiled")


def value_range(operand: Operand, windows: dict[str, CepWindow]) -> tuple[int, int]:
    """The values ``operand`` can take: its field's type, or 0 .. size for a count."""
    if isinstance(operand, FieldRef):
        return operand_range(operand.name)
    window = windows[operand.window]
    if isinstance(operand, CountIf) or (isinstance(operand, Aggregate) and operand.function == "count"):
        return 0, window.size
    if isinstance(operand, Aggregate) and operand.function == "sum" and window.field == "seq":
        # a sum is kept in 64 bits: one of 32-bit seqs never wraps, and reaches size * (2^32 - 1)
        return 0, window.size * operand_range("seq")[1]
    return operand_range(window.field)
