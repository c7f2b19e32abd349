"""Window operators: the last n values of one field of one stream, and their aggregates.

A window sees every event of its stream in the order the switch takes
them, and holds the field's value of the last ``size`` of them, the event
being processed included (docs/cep.md, "Window operators").  Its
aggregates are read after that event is in: ``sum``, ``min``, ``max``,
``count`` (values held: ``min(events so far, size)``) and ``count`` of a
comparison.  ``sum`` wraps at 64 bits as the switch's registers do, and is
read in the field's type.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from testbed.semantics.cep.language import FIELD_TYPES, OPERATORS, Aggregate, CountIf

#: The most values a window holds: the register ring buffers' depth (docs/cep.md).
MAX_CEP_WINDOW = 32


def in_type(x: int, field: str) -> int:
    """``x`` modulo 2^64, read as ``field``'s type (two's complement for the signed ``value``)."""
    signed, _bits = FIELD_TYPES[field]
    x &= (1 << 64) - 1
    return x - (1 << 64) if signed and x >= 1 << 63 else x


def operand_range(field: str) -> tuple[int, int]:
    """The smallest and largest value of ``field``'s type."""
    signed, bits = FIELD_TYPES[field]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


@dataclass(frozen=True)
class WindowSpec:
    """A window operator as declared: its name, stream, field and size."""

    name: str
    stream: int
    field: str
    size: int


class LastN:
    """One window operator's state: the values it holds, oldest first."""

    def __init__(self, spec: WindowSpec):
        self.spec = spec
        self.values: deque[int] = deque(maxlen=spec.size)

    def push(self, value: int) -> None:
        self.values.append(value)

    def aggregate(self, what: Aggregate | CountIf) -> int:
        if isinstance(what, CountIf):
            test = OPERATORS[what.op]
            return sum(1 for v in self.values if test(v, what.constant))
        if what.function == "count":
            return len(self.values)
        if what.function == "sum":
            return in_type(sum(self.values), self.spec.field)
        return min(self.values) if what.function == "min" else max(self.values)
