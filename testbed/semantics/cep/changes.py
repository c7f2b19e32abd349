"""CEP rules changed mid-stream: a topology's ``schedule`` entries with ``cep:`` (docs/cep.md,
"Changing rules mid-stream").

An entry adds, replaces or removes a pattern or a window, placed ``after`` a
point of that pattern's or window's own stream: the stream's first k events
meet the rules before the change, every later one the rules after it, on
the switch (the source is held at the point until the change is in) as in
the oracle.  ``plan_changes`` walks the entries in the order the run applies
them and gives each its slot, as the control plane will take it, and each
window the one comparison it counts from its install; every change the
switch could not take (a fifth pattern installed at once, a window some
installed pattern still reads, a count the window does not keep) is
refused there, naming the entry's field, before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from pydantic import Field, model_validator

from testbed.semantics.cep.language import CountIf, operand_windows
from testbed.semantics.cep.oracle import CepOracle
from testbed.semantics.cep.rules import (
    MAX_CEP_WINDOWS,
    MAX_PATTERN_ID,
    MAX_PATTERNS,
    CepRules,
    CepWindow,
    ComplexEventRule,
    RuleName,
    check_rule_set,
)
from testbed.semantics.strict import FieldError, StrictModel

#: What one ``cep:`` entry does; exactly one per entry.
KINDS = ("add", "replace", "remove", "add_window", "replace_window", "remove_window")


class CepChange(StrictModel):
    """``schedule[i].cep``: one change of the rules in force."""

    add: Optional[ComplexEventRule] = Field(default=None, description="a pattern, into the lowest free slot")
    replace: Optional[ComplexEventRule] = Field(default=None, description="the installed pattern of its id, "
                                                                          "in its slot, starting afresh")
    remove: Optional[int] = Field(default=None, ge=1, le=MAX_PATTERN_ID, description="the id of a pattern to remove")
    add_window: Optional[CepWindow] = None
    replace_window: Optional[CepWindow] = Field(default=None, description="the installed window of its name, "
                                                                          "in its slot, empty")
    remove_window: Optional[RuleName] = Field(default=None, description="the name of a window to remove")

    @model_validator(mode="after")
    def _one(self):
        given = [k for k in KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a cep entry has exactly one of {', '.join(KINDS)} (got {', '.join(given) or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)


class TimedChange(StrictModel):
    """A change as the run and the references apply it: before the stream's event
    number ``after`` (from 0, in send order), into ``slot``."""

    entry: int = Field(description="the schedule entry")
    stream: int
    after: int = Field(description="events of the stream sent under the rules before the change")
    kind: Literal[KINDS]  # type: ignore[valid-type]
    rule: Optional[ComplexEventRule] = None
    window: Optional[CepWindow] = None
    pattern_id: Optional[int] = None
    window_name: Optional[str] = None
    slot: int = Field(description="the pattern or window slot it takes, keeps or frees")
    #: For a window installed: the comparison it counts from its install (``count(w op c)``), if any.
    test_op: Optional[str] = None
    test_constant: Optional[int] = None

    def test(self) -> Optional[CountIf]:
        return None if self.test_op is None else CountIf(self.window.name, self.test_op, self.test_constant)


class CepTimeline(StrictModel):
    """The initial rules' window tests and every change, in the order the run applies them."""

    initial_tests: dict[str, Optional[tuple[str, int]]] = {}
    changes: list[TimedChange] = []

    def tests(self) -> dict[str, Optional[CountIf]]:
        return {w: None if t is None else CountIf(w, t[0], t[1]) for w, t in self.initial_tests.items()}

    def rules_ever(self, rules: CepRules) -> list[ComplexEventRule]:
        """Every pattern the run ever installs: the initial ones, then the schedule's."""
        return list(rules.complex_events) + [c.rule for c in self.changes if c.rule is not None]

    def of_stream(self, stream: int) -> list[TimedChange]:
        return [c for c in self.changes if c.stream == stream]


def apply_to_oracle(oracle: CepOracle, change: TimedChange) -> None:
    """``change`` in the oracle, as the control plane makes it in the switch."""
    if change.kind in ("add", "replace"):
        oracle.install(change.rule.spec(), change.slot)
    elif change.kind == "remove":
        oracle.remove(change.pattern_id)
    elif change.kind in ("add_window", "replace_window"):
        oracle.install_window(change.window.spec())
    else:
        oracle.remove_window(change.window_name)


@dataclass
class _Generation:
    """One window from its install to its replacement or removal: what it counts, and who first read it."""

    test: Optional[tuple[str, int]] = None
    where: str = ""


def plan_changes(rules: CepRules, entries: list[tuple[int, int, int, CepChange]]) -> CepTimeline:
    """``entries`` are ``(schedule index, stream of the point, events before the point, change)``
    in the order the run applies them.  ``FieldError`` naming ``schedule[i].cep...`` for the
    first one the switch cannot take."""
    windows: dict[str, CepWindow] = {w.name: w for w in rules.windows}
    wslot = {w.name: i for i, w in enumerate(rules.windows)}
    gens = {w.name: _Generation() for w in rules.windows}
    patterns: dict[int, ComplexEventRule] = {r.id: r for r in rules.complex_events}
    pslot = {r.id: i for i, r in enumerate(rules.complex_events)}
    sinks_of = {r.id: r.sinks for r in rules.complex_events}
    first = dict(gens)          # the declared windows' generations: what they count from the start
    for i, r in enumerate(rules.complex_events):
        _reads(r, gens, f"cep.complex_events[{i}]")
    out: list[tuple[dict, Optional[_Generation]]] = []
    for index, stream, after, change in entries:
        where = f"schedule[{index}].cep.{change.kind}"
        kind, gen = change.kind, None
        rec: dict = {"entry": index, "stream": stream, "after": after, "kind": kind}
        if kind in ("add", "replace"):
            rule: ComplexEventRule = getattr(change, kind)
            installed = patterns.get(rule.id)
            if kind == "add" and installed is not None:
                raise FieldError(f"{where}.id", f"pattern {rule.id} is installed then: replace it, or remove it first")
            if kind == "replace" and installed is None:
                raise FieldError(f"{where}.id", f"no pattern {rule.id} is installed then, so there is none to replace")
            if kind == "replace" and installed.stream != rule.stream:
                raise FieldError(f"{where}.stream", f"pattern {rule.id} is over stream {installed.stream}: a replace "
                                                    f"keeps the stream, so that one point of it places the change")
            _placed(where, rule.stream, stream)
            before = sinks_of.setdefault(rule.id, rule.sinks)
            if sorted(before) != sorted(rule.sinks):
                raise FieldError(f"{where}.sinks", f"pattern {rule.id} sends to {', '.join(before)} earlier in the "
                                                   f"run; an id keeps its sinks for the run (a sink's complex events "
                                                   f"are told apart by id): give this pattern another id")
            if kind == "add" and len(patterns) == MAX_PATTERNS:
                raise FieldError(where, f"all {MAX_PATTERNS} pattern slots are in use then (patterns "
                                        f"{', '.join(map(str, patterns))}): remove one before")
            slot = pslot[rule.id] if kind == "replace" else min(set(range(MAX_PATTERNS)) - set(pslot.values()))
            patterns[rule.id], pslot[rule.id] = rule, slot
            rec |= {"rule": rule, "slot": slot}
        elif kind == "remove":
            if change.remove not in patterns:
                raise FieldError(where, f"no pattern {change.remove} is installed then")
            _placed(where, patterns[change.remove].stream, stream)
            rec |= {"pattern_id": change.remove, "slot": pslot.pop(change.remove)}
            patterns.pop(change.remove)
        elif kind in ("add_window", "replace_window"):
            window: CepWindow = getattr(change, kind)
            old = windows.get(window.name)
            if kind == "add_window" and old is not None:
                raise FieldError(f"{where}.name", f"window {window.name!r} is installed then: replace it, or "
                                                  f"remove it first")
            if kind == "replace_window":
                if old is None:
                    raise FieldError(f"{where}.name", f"no window {window.name!r} is installed then")
                if (old.stream, old.field) != (window.stream, window.field):
                    raise FieldError(where, f"window {window.name!r} is over stream {old.stream}'s {old.field}: a "
                                            f"replace keeps both (patterns reading it hold constants of its field); "
                                            f"remove it and add another to change them")
            _placed(where, window.stream, stream)
            if kind == "add_window" and len(windows) == MAX_CEP_WINDOWS:
                raise FieldError(where, f"all {MAX_CEP_WINDOWS} window slots are in use then "
                                        f"({', '.join(windows)}): remove one before")
            slot = wslot[window.name] if old is not None else min(set(range(MAX_CEP_WINDOWS)) - set(wslot.values()))
            windows[window.name], wslot[window.name] = window, slot
            gen = gens[window.name] = _Generation()
            rec |= {"window": window, "slot": slot}
        else:
            name = change.remove_window
            if name not in windows:
                raise FieldError(where, f"no window {name!r} is installed then")
            _placed(where, windows[name].stream, stream)
            readers = [r.id for r in patterns.values() if any(name in operand_windows(o) for o in r.operands())]
            if readers:
                raise FieldError(where, f"pattern {readers[0]} still reads window {name!r}: remove it before")
            rec |= {"window_name": name, "slot": wslot.pop(name)}
            windows.pop(name)
            gens.pop(name)
        if kind in ("add", "replace"):
            _reads(rec["rule"], gens, where)
        _in_force(where, kind, rec, windows, patterns)
        out.append((rec, gen))
    # A window counts from its install the comparison that any pattern reads while it is installed.
    changes = [TimedChange(**rec, **({"test_op": gen.test[0], "test_constant": gen.test[1]}
                                     if gen is not None and gen.test else {})) for rec, gen in out]
    return CepTimeline(initial_tests={name: gen.test for name, gen in first.items()}, changes=changes)


def _placed(where: str, own: int, point: int) -> None:
    if own != point:
        raise FieldError(where, f"it is over stream {own}, and the entry is placed after a point of stream {point}: "
                                f"a change is placed in its own stream's terms, where it begins exactly")


def _reads(rule: ComplexEventRule, gens: dict[str, _Generation], where: str) -> None:
    """Mark what ``rule`` counts in each window it reads; refuse a second comparison."""
    for operand in rule.operands():
        if not isinstance(operand, CountIf) or operand.window not in gens:
            continue                # a window not installed: the rules in force say so next
        gen = gens[operand.window]
        test = (operand.op, operand.constant)
        if gen.test is None:
            gen.test, gen.where = test, where
        elif gen.test != test:
            raise FieldError(f"{where}.pattern",
                             f"{operand}: window {operand.window!r} counts {operand.window} {gen.test[0]} "
                             f"{gen.test[1]} since its install ({gen.where}); a window keeps one running count "
                             f"from its install: replace the window, or declare another")


def _in_force(where: str, kind: str, rec: dict, windows: dict[str, CepWindow],
              patterns: dict[int, ComplexEventRule]) -> None:
    """The rules in force after the change must fit together as a ``cep:`` section must."""
    wl, pl = list(windows.values()), list(patterns.values())
    try:
        check_rule_set(wl, pl)
    except FieldError as err:
        mine = None
        if kind in ("add", "replace"):
            mine = f"complex_events[{pl.index(rec['rule'])}]"
        elif kind in ("add_window", "replace_window"):
            mine = f"windows[{wl.index(rec['window'])}]"
        if mine is not None and err.field.startswith(mine):
            raise FieldError(where + err.field[len(mine):], err.message) from None
        index = int(err.field.split("[")[1].split("]")[0])
        other = (f"pattern {pl[index].id}" if err.field.startswith("complex_events")
                 else f"window {wl[index].name!r}")
        raise FieldError(where, f"it leaves {other} invalid: {err.message}") from None
