"""The CEP stage's control plane: a rule set as register values and table entries.

``CepControl`` writes a topology's ``cep:`` rules (``CepRules``) into any
target through the contract's control API, and installs and removes
patterns while events flow (docs/cep.md; docs/p4.md, "The CEP stage").
Windows take slots 0.. in the order the rules declare them, patterns the
free slot with the lowest number, and a replaced pattern keeps its slot.
The slot is the order a frame carries the complex events of one event in
(docs/cep.md, "The order of complex events"), and the oracle
(``testbed.semantics.cep.oracle``) assigns slots by the same rule.  A pattern is switched on last, after
its comparisons, its transition table and its state are in place, and off
first when it goes, so no event ever sees half of one: that is all a
change at run time needs, with no recompile and no restart.

Values are written order-encoded (``encode``), as the stage compares them:
a signed value has its sign bit flipped, so one unsigned comparison orders it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from testbed.dataplane.contract import (
    CEP_COMPARISONS,
    CEP_FIELD_CODES,
    CEP_OP_CODES,
    CEP_OPERAND_CODES,
    CEP_PATTERNS,
    CEP_SESSION,
    CEP_SIGN,
    CEP_WINDOW_STATE,
    CEP_WINDOWS,
    SwitchAPI,
)
from testbed.semantics.cep.automaton import compile_pattern
from testbed.semantics.cep.changes import TimedChange
from testbed.semantics.cep.language import Aggregate, CountIf, FieldRef, Operand
from testbed.semantics.cep.rules import CepRules, CepWindow, ComplexEventRule

#: The multicast group the sinks' clones are replicated to; the plan numbers its groups from 1 up.
CEP_MGID = 0xFFFF


class CepControlError(ValueError):
    """A rule set or change the switch's slots cannot take; ``str()`` says why."""


def encode(x: int, signed: bool) -> int:
    """``x`` as the stage compares it: two's complement with the sign bit flipped when signed."""
    x &= (1 << 64) - 1
    return x ^ CEP_SIGN if signed else x


@dataclass
class Installed:
    """A pattern in a slot: its rule, and its table entries' handles to remove it by."""

    rule: ComplexEventRule
    handles: list[int] = field(default_factory=list)


class CepControl:
    """Installs windows and patterns into a switch's CEP stage, and changes them live."""

    def __init__(self, api: SwitchAPI, sink_ports: dict[str, int]):
        self.api = api
        self.sink_ports = sink_ports
        self.windows: dict[str, tuple[int, CepWindow, Optional[CountIf]]] = {}   # name -> (slot, window, test)
        self.slots: dict[int, Installed] = {}                   # pattern slot -> what it holds
        self.group_ports: set[int] = set()

    # -- a whole rule set ------------------------------------------------------
    def install(self, rules: CepRules, tests: Optional[dict[str, Optional[CountIf]]] = None) -> None:
        """Windows, every pattern, the sinks' group and the mirror session.  ``tests``
        overrides the comparison each window counts (``count(w op c)``): a window
        counts, from its install, the one that any pattern reads while it is installed,
        patterns added later included (docs/cep.md, "Changing rules mid-stream")."""
        tests = rules.window_tests() if tests is None else tests
        for slot, window in enumerate(rules.windows):
            self.add_window(slot, window, tests.get(window.name))
        self.api.mc_mgrp_create(CEP_MGID)
        self.api.mirroring_add_mc(CEP_SESSION, CEP_MGID)
        for rule in rules.complex_events:
            self.add_pattern(rule)

    def add_window(self, slot: int, window: CepWindow, test: Optional[CountIf] = None) -> None:
        """Window ``window`` into ``slot``, empty, counting ``test`` (``count(w op c)``) if given:
        the running count must see every value from the first, so the test is the window's."""
        if not 0 <= slot < CEP_WINDOWS:
            raise CepControlError(f"window slot {slot}: the switch has {CEP_WINDOWS}")
        w = self.api
        w.register_write("cep_window_size", slot, 0)           # off while it is set up
        for name in CEP_WINDOW_STATE:
            w.register_write(name, slot, 0)
        w.register_write("cep_window_stream", slot, window.stream)
        w.register_write("cep_window_field", slot, CEP_FIELD_CODES[window.field])
        w.register_write("cep_window_test", slot, CEP_OP_CODES[test.op] if test else 0)
        w.register_write("cep_window_constant", slot, encode(test.constant, window.field == "value") if test else 0)
        self.windows[window.name] = (slot, window, test)
        w.register_write("cep_window_size", slot, window.size)

    # -- patterns, also while events flow --------------------------------------------
    def add_pattern(self, rule: ComplexEventRule, slot: Optional[int] = None) -> int:
        """Install ``rule`` into ``slot``, or the lowest free one; it starts afresh with the next event."""
        free = [s for s in range(CEP_PATTERNS) if s not in self.slots]
        if not free:
            raise CepControlError(f"pattern {rule.id}: all {CEP_PATTERNS} pattern slots are in use")
        if any(i.rule.id == rule.id for i in self.slots.values()):
            raise CepControlError(f"pattern {rule.id} is installed already")
        if slot is not None and slot not in free:
            raise CepControlError(f"pattern {rule.id}: slot {slot} is not free")
        slot = free[0] if slot is None else slot
        automaton = compile_pattern(rule.parsed, rule.strategy)
        w = self.api
        w.register_write("cep_pattern_on", slot, 0)
        for c in range(CEP_COMPARISONS):
            w.register_write("cep_compare_operand", slot * CEP_COMPARISONS + c, 0)
        for c, comparison in enumerate(automaton.comparisons):
            cell = slot * CEP_COMPARISONS + c
            code, window, signed = self._operand(comparison.operand)
            w.register_write("cep_compare_window", cell, window)
            w.register_write("cep_compare_op", cell, CEP_OP_CODES[comparison.op])
            w.register_write("cep_compare_constant", cell, encode(comparison.constant, signed))
            w.register_write("cep_compare_operand", cell, code)
        code, window, _signed = self._operand(rule.returned)
        w.register_write("cep_return_operand", slot, code)
        w.register_write("cep_return_window", slot, window)
        w.register_write("cep_pattern_id", slot, rule.id)
        w.register_write("cep_pattern_stream", slot, rule.stream)
        installed = Installed(rule)
        table = f"cep_transition_{slot}"
        for state, row in enumerate(automaton.transitions):
            for symbol, (next_state, completes) in enumerate(row):
                installed.handles.append(w.table_add(table, "cep_next", [state, symbol],
                                                     [next_state, int(completes)]))
        w.register_write("cep_state", slot, 0)
        w.register_write("cep_matches", slot, 0)
        self._sinks(slot, rule, on=True)
        self.slots[slot] = installed
        w.register_write("cep_pattern_on", slot, 1)
        return slot

    def remove_pattern(self, pattern_id: int) -> None:
        """Switch pattern ``pattern_id`` off, then take its entries and sinks away."""
        slot = self.slot_of(pattern_id)
        installed = self.slots.pop(slot)
        self.api.register_write("cep_pattern_on", slot, 0)
        for handle in installed.handles:
            self.api.table_delete(f"cep_transition_{slot}", handle)
        self._sinks(slot, installed.rule, on=False)

    def replace_pattern(self, rule: ComplexEventRule) -> int:
        """Replace the installed pattern of ``rule``'s id by ``rule``, in the same slot, so its
        complex events keep their place in a frame; it starts afresh, its matches from 1."""
        slot = self.slot_of(rule.id)
        self.remove_pattern(rule.id)
        return self.add_pattern(rule, slot)

    def remove_window(self, name: str) -> None:
        """Switch window ``name`` off (size 0) and free its slot."""
        if name not in self.windows:
            raise CepControlError(f"window {name!r} is not installed")
        slot, _window, _test = self.windows.pop(name)
        self.api.register_write("cep_window_size", slot, 0)

    def replace_window(self, window: CepWindow, test: Optional[CountIf] = None) -> int:
        """Window ``window`` in place of the installed one of its name, in the same slot,
        empty: its values and running count start again from the next event."""
        if window.name not in self.windows:
            raise CepControlError(f"window {window.name!r} is not installed")
        slot = self.windows[window.name][0]
        self.add_window(slot, window, test)
        return slot

    def free_window_slot(self) -> int:
        used = {slot for slot, _w, _t in self.windows.values()}
        free = [s for s in range(CEP_WINDOWS) if s not in used]
        if not free:
            raise CepControlError(f"all {CEP_WINDOWS} window slots are in use")
        return free[0]

    def apply(self, change: TimedChange) -> None:
        """One change of a topology's schedule, into the slot validation assigned it
        (``changes.plan_changes``), which is the slot this control plane takes."""
        kind = change.kind
        if kind == "add":
            self.add_pattern(change.rule, change.slot)
        elif kind == "replace":
            self.replace_pattern(change.rule)
        elif kind == "remove":
            self.remove_pattern(change.pattern_id)
        elif kind == "add_window":
            self.add_window(change.slot, change.window, change.test())
        elif kind == "replace_window":
            self.replace_window(change.window, change.test())
        else:
            self.remove_window(change.window_name)

    def slot_of(self, pattern_id: int) -> int:
        for slot, installed in self.slots.items():
            if installed.rule.id == pattern_id:
                return slot
        raise CepControlError(f"pattern {pattern_id} is not installed")

    # -- helpers ---------------------------------------------------------------------
    def _operand(self, operand: Operand) -> tuple[int, int, bool]:
        """(operand code, window slot, signed) of a field or an aggregate."""
        if isinstance(operand, FieldRef):
            return CEP_OPERAND_CODES[operand.name], 0, operand.name == "value"
        if operand.window not in self.windows:
            raise CepControlError(f"{operand}: window {operand.window!r} is not installed")
        slot, window, test = self.windows[operand.window]
        if isinstance(operand, CountIf):
            if (test is None or (test.op, test.constant) != (operand.op, operand.constant)):
                raise CepControlError(f"{operand}: window {operand.window!r} counts "
                                      f"{'nothing' if test is None else test}, not this comparison")
            return CEP_OPERAND_CODES["count_if"], slot, False
        assert isinstance(operand, Aggregate)
        return CEP_OPERAND_CODES[operand.function], slot, operand.function != "count" and window.field == "value"

    def _sinks(self, slot: int, rule: ComplexEventRule, on: bool) -> None:
        """Set or clear ``slot``'s bit in each sink port's mask; a new sink port joins the group."""
        ports = [self.sink_ports[host] for host in rule.sinks]
        new = sorted(set(ports) - self.group_ports)
        if on and new:
            node = self.api.mc_node_create(0, new)
            self.api.mc_node_associate(CEP_MGID, node)
            self.group_ports |= set(new)
        for port in ports:
            mask = int(self.api.register_read("cep_sinks", port))
            mask = mask | 1 << slot if on else mask & ~(1 << slot)
            self.api.register_write("cep_sinks", port, mask)

