"""The rule language of complex events: predicates, patterns and return values (docs/cep.md).

A complex event's ``pattern`` is text close to P4CEP's Listing 1, for example
``([value > 500] && [key == 80]); ([sum(recent) > 6000] || [value < 0])``.
This module turns such text into a small syntax tree; what the tree means
(which events match) is ``testbed.semantics.cep.matching``'s business, and
whether its names exist is the rules' (``testbed.semantics.cep.rules``).

The grammar is lark's (a well-kept parser library), so a syntax error comes
with the column it happened at; ``RuleSyntaxError`` makes that one line.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, ClassVar, Union

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

#: The event header's fields a rule can read, with whether each is signed and its width in bits.
FIELD_TYPES: dict[str, tuple[bool, int]] = {"value": (True, 64), "key": (False, 64), "ts": (False, 64),
                                            "seq": (False, 32)}
#: Aggregates over a window's values (``count`` also takes a comparison: how many values pass it).
AGGREGATES = ("sum", "min", "max", "count")
#: Comparison operators, and what each means on two integers.
OPERATORS = {"<": int.__lt__, "<=": int.__le__, "==": int.__eq__, "!=": int.__ne__, ">=": int.__ge__,
             ">": int.__gt__}

_GRAMMAR = r"""
pattern: step (";" step)*
?step: group | "(" group ")"
?group: basic -> single
      | basic ("&&" basic)+ -> all_of
      | basic ("||" basic)+ -> any_of
basic: "[" predicate "]"
?predicate: conjunction | predicate "or" conjunction -> either
?conjunction: term | conjunction "and" term -> both
?term: comparison | "(" predicate ")"
comparison: operand OP INT
?operand: NAME -> field
        | NAME "(" NAME ")" -> aggregate
        | NAME "(" NAME OP INT ")" -> count_if
returned: operand
OP: "<=" | ">=" | "==" | "!=" | "<" | ">"
INT: /-?[0-9]+/
NAME: /[a-z_][a-z0-9_]*/
%import common.WS
%ignore WS
"""


class RuleSyntaxError(ValueError):
    """Rule text that does not parse, or names what does not exist; ``str()`` is one line."""


# -- the syntax tree ------------------------------------------------------------------
@dataclass(frozen=True)
class FieldRef:
    """The event's own field, e.g. ``value``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Aggregate:
    """``sum``, ``min``, ``max`` or ``count`` of a window's values, e.g. ``sum(recent)``."""

    function: str
    window: str

    def __str__(self) -> str:
        return f"{self.function}({self.window})"


@dataclass(frozen=True)
class CountIf:
    """How many of a window's values pass a comparison, e.g. ``count(recent > 5)``."""

    window: str
    op: str
    constant: int

    def __str__(self) -> str:
        return f"count({self.window} {self.op} {self.constant})"


Operand = Union[FieldRef, Aggregate, CountIf]


@dataclass(frozen=True)
class Comparison:
    """``operand op constant``: the one kind of test a predicate is built from."""

    operand: Operand
    op: str
    constant: int

    def __str__(self) -> str:
        return f"{self.operand} {self.op} {self.constant}"


@dataclass(frozen=True)
class _Junction:
    """Two predicates joined by ``word``; equal only to a junction of its own kind."""

    left: "Predicate"
    right: "Predicate"
    word: ClassVar[str] = ""

    def __str__(self) -> str:
        return f"({self.left} {self.word} {self.right})"


class Both(_Junction):
    word = "and"


class Either(_Junction):
    word = "or"


Predicate = Union[Comparison, Both, Either]


@dataclass(frozen=True)
class Step:
    """One step of a sequence: basic events (predicates) of which ``all`` must
    hold, each for some event of the step and in any order, or ``any`` one."""

    kind: str                      # "all" or "any"; a single basic event is "any" of one
    members: tuple[Predicate, ...]

    def __str__(self) -> str:
        glue = " && " if self.kind == "all" else " || "
        return "(" + glue.join(f"[{m}]" for m in self.members) + ")"


@dataclass(frozen=True)
class Pattern:
    """Steps in sequence (``;``): each step's events come after the previous step's."""

    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return "; ".join(str(s) for s in self.steps)


def comparisons(predicate: Predicate) -> list[Comparison]:
    """The comparisons in ``predicate``, left to right, each once."""
    if isinstance(predicate, Comparison):
        return [predicate]
    found = comparisons(predicate.left)
    return found + [c for c in comparisons(predicate.right) if c not in found]


def holds(predicate: Predicate, truth: Callable[[Comparison], bool]) -> bool:
    """``predicate`` given the truth of each of its comparisons."""
    if isinstance(predicate, Comparison):
        return truth(predicate)
    if isinstance(predicate, Both):
        return holds(predicate.left, truth) and holds(predicate.right, truth)
    return holds(predicate.left, truth) or holds(predicate.right, truth)


def pattern_comparisons(pattern: Pattern) -> list[Comparison]:
    """Every distinct comparison of a pattern, in the order the text names them."""
    found: list[Comparison] = []
    for step in pattern.steps:
        for member in step.members:
            found += [c for c in comparisons(member) if c not in found]
    return found


def operand_windows(operand: Operand) -> list[str]:
    return [] if isinstance(operand, FieldRef) else [operand.window]


# -- parsing --------------------------------------------------------------------------
#: Digits a constant may have: more than any 64-bit field needs, far fewer than Python's int() refuses.
_MAX_DIGITS = 40
#: Comparisons a rule's text may hold, repeats included.  ``and`` and ``or``
#: nest one level per comparison, and the syntax tree is walked recursively
#: (here, by the oracle and by the compiler), so the bound keeps every walk
#: far from Python's recursion limit; the switch tests at most 8 distinct
#: comparisons per pattern anyway (``automaton.MAX_COMPARISONS``).
MAX_TERMS = 64
#: Characters a rule's text may have: 64 comparisons of the longest kind fit,
#: and the parser's time stays small whatever the file holds.
MAX_TEXT = 8192


def _constant(token: Token) -> int:
    if len(token.lstrip("-")) > _MAX_DIGITS:
        raise RuleSyntaxError(f"a constant of {len(token.lstrip('-'))} digits: no field holds it")
    return int(token)


@v_args(inline=True)
class _Tree(Transformer):
    def pattern(self, *steps: Step) -> Pattern:
        return Pattern(tuple(steps))

    def single(self, member: Predicate) -> Step:
        return Step("any", (member,))

    def all_of(self, *members: Predicate) -> Step:
        return Step("all", members)

    def any_of(self, *members: Predicate) -> Step:
        return Step("any", members)

    def basic(self, predicate: Predicate) -> Predicate:
        return predicate

    def either(self, left: Predicate, right: Predicate) -> Either:
        return Either(left, right)

    def both(self, left: Predicate, right: Predicate) -> Both:
        return Both(left, right)

    def comparison(self, operand: Operand, op: Token, constant: Token) -> Comparison:
        return Comparison(operand, str(op), _constant(constant))

    def field(self, name: Token) -> FieldRef:
        if str(name) not in FIELD_TYPES:
            raise RuleSyntaxError(f"unknown field {str(name)!r} (an event has {', '.join(FIELD_TYPES)})")
        return FieldRef(str(name))

    def aggregate(self, function: Token, window: Token) -> Aggregate:
        if str(function) not in AGGREGATES:
            raise RuleSyntaxError(f"unknown aggregate {str(function)!r} (there are {', '.join(AGGREGATES)})")
        return Aggregate(str(function), str(window))

    def count_if(self, function: Token, window: Token, op: Token, constant: Token) -> CountIf:
        if str(function) != "count":
            raise RuleSyntaxError(f"{str(function)}({window} {op} {constant}): only count takes a comparison")
        return CountIf(str(window), str(op), _constant(constant))

    def returned(self, operand: Operand) -> Operand:
        return operand


@lru_cache(maxsize=None)
def _parser(start: str) -> Lark:
    return Lark(_GRAMMAR, start=start, parser="lalr")


def _parse(text: str, start: str):
    if not isinstance(text, str):
        raise RuleSyntaxError(f"expected text, got {type(text).__name__}")
    if not text.strip():
        raise RuleSyntaxError("is empty")
    if len(text) > MAX_TEXT:
        raise RuleSyntaxError(f"{len(text)} characters, more than the {MAX_TEXT} a rule may have")
    try:
        tree = _parser(start).parse(text)
        # Counted on lark's tree, whose walk here is iterative, before the transformer recurses into it.
        terms = sum(1 for subtree in tree.iter_subtrees() if subtree.data == "comparison")
        if terms > MAX_TERMS:
            raise RuleSyntaxError(f"{terms} comparisons, more than the {MAX_TERMS} a rule may have")
        return _Tree().transform(tree)
    except VisitError as err:
        if isinstance(err.orig_exc, RuleSyntaxError):
            raise err.orig_exc from None
        raise
    except UnexpectedEOF:
        raise RuleSyntaxError(f"{text!r} ends too early") from None
    except UnexpectedCharacters as err:
        raise RuleSyntaxError(f"unexpected {text[err.pos_in_stream]!r} at column {err.column} of {text!r}") from None
    except UnexpectedInput as err:
        token = getattr(err, "token", None)
        what = "the end" if token is None or token.type == "$END" else repr(str(token))
        raise RuleSyntaxError(f"unexpected {what} at column {getattr(err, 'column', '?')} of {text!r}") from None
    except LarkError as err:        # anything else lark refuses: still one line
        raise RuleSyntaxError(" ".join(str(err).split())) from None


def parse_pattern(text: str) -> Pattern:
    """``text`` as a pattern, or ``RuleSyntaxError``."""
    return _parse(text, "pattern")


def parse_operand(text: str) -> Operand:
    """``text`` as a return value: a field or an aggregate of a window."""
    return _parse(text, "returned")
