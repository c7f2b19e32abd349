"""The CEP stage (p4/cep.p4): window operators, patterns, complex event frames to the sinks.

Step for step what the P4 program does with an event frame, over the same
registers and transition tables (``contract.CEP_REGISTERS``,
``contract.CEP_SCHEMA``), so that the differential tests can hold bmv2 to
it and the oracle (``testbed.semantics.cep``) can hold both: windows keep
order-encoded values in a ring, running sums and counts, and min and max
that are scanned again only when the value that leaves was one of them;
each pattern slot turns its comparisons into a symbol and looks its
(state, symbol) up; an event that completed a match is "cloned" to the
sinks' group, and each sink port gets the complex events whose pattern
names it.
"""
from __future__ import annotations

from testbed.dataplane.contract import (
    CEP_COMPARISONS,
    CEP_DEPTH,
    CEP_FIELD_CODES,
    CEP_OP_CODES,
    CEP_OPERAND_CODES,
    CEP_PATTERNS,
    CEP_SESSION,
    CEP_SIGN,
    CEP_WINDOWS,
)
from testbed.dataplane.model.metadata import Decision
from testbed.dataplane.wire import CEP_STRUCT, CEP_UDP_PORT, COMPLEX_EVENT_STRUCT, with_payload
from testbed.semantics.cep.lastn import in_type

U64 = (1 << 64) - 1
VALUE = CEP_FIELD_CODES["value"]
_FIELDS = {code: name for name, code in CEP_FIELD_CODES.items()}
_OPERANDS = {code: name for name, code in CEP_OPERAND_CODES.items()}
_TESTS = {CEP_OP_CODES["<"]: int.__lt__, CEP_OP_CODES["<="]: int.__le__, CEP_OP_CODES["=="]: int.__eq__,
          CEP_OP_CODES["!="]: int.__ne__, CEP_OP_CODES[">="]: int.__ge__, CEP_OP_CODES[">"]: int.__gt__}


def passes(x: int, op: int, constant: int) -> bool:
    """``x op constant`` on order-encoded values (CEP_COMPARE)."""
    test = _TESTS.get(op)
    return test is not None and test(x, constant)


class CepStage:
    """MyIngress's CEP steps and MyEgress's complex event frames (over ``ControlState``)."""

    def cep(self, frame: bytes, event: tuple[int, int, int, int, int, int]) -> list[tuple[int, bytes]]:
        """The complex event frames an event frame yields, per sink port (CEP_INGRESS, CEP_EGRESS)."""
        stream, _flags, seq, ts, key, value = event
        raw = {"value": value & U64, "key": key, "ts": ts, "seq": seq}
        for w in range(CEP_WINDOWS):
            self._cep_window(w, stream, raw)
        matched: dict[int, tuple[int, int, int]] = {}      # slot -> (pattern id, match, value)
        for p in range(CEP_PATTERNS):
            found = self._cep_pattern(p, stream, raw)
            if found is not None:
                matched[p] = found
        if not matched:
            return []
        mgid = self.mirror_sessions.get(CEP_SESSION)
        if mgid is None:
            return []                      # an unconfigured session clones nothing, as in bmv2
        out = []
        for replica, address in self.addressed(self.replicate(Decision(mgid=mgid))):
            instance = address.instance
            mine = [p for p in sorted(matched) if self.registers["cep_sinks"][instance] >> p & 1]
            if not mine:
                continue
            payload = CEP_STRUCT.pack(len(mine), 0) + b"".join(
                COMPLEX_EVENT_STRUCT.pack(matched[p][0], 0, matched[p][1], stream, 0, seq, ts,
                                          in_type(matched[p][2], "value"))       # 64 bits, sent signed
                for p in mine)
            sent = self.egress(address, with_payload(frame, payload, CEP_UDP_PORT, checksum=False))
            for _p in mine:
                self._count("cep_out", instance, len(frame))
            out.append((replica.port, sent))
        return out

    def _cep_window(self, w: int, stream: int, raw: dict[str, int]) -> None:
        """CEP_WINDOW: slot ``w`` takes the event's field, if it is over the event's stream."""
        r = self.registers
        size = r["cep_window_size"][w]
        if size == 0 or r["cep_window_stream"][w] != stream:
            return
        field = r["cep_window_field"][w]
        v = raw[_FIELDS.get(field, "seq")]
        x = v ^ CEP_SIGN if field == VALUE else v
        head, count, op, constant = r["cep_head"][w], r["cep_fill"][w], r["cep_window_test"][w], \
            r["cep_window_constant"][w]
        cell = w * CEP_DEPTH + head
        old = r["cep_ring"][cell]
        r["cep_ring"][cell] = x
        r["cep_head"][w] = 0 if head + 1 == size else (head + 1) & 0xFF
        total = (r["cep_sum"][w] + v) & U64
        passing = r["cep_passing"][w]
        if op and passes(x, op, constant):
            passing += 1
        full = count == size
        if full:
            total = (total - (old ^ CEP_SIGN if field == VALUE else old)) & U64
            if op and passes(old, op, constant):
                passing -= 1
        least, most = r["cep_min"][w], r["cep_max"][w]
        if count == 0:
            least = most = x
        elif full and old in (least, most):
            # an extreme left: the new ones are among the values held (CEP_SCAN_ALL)
            held = r["cep_ring"][w * CEP_DEPTH:w * CEP_DEPTH + size]
            least, most = min(held), max(held)
        else:
            least, most = min(least, x), max(most, x)
        r["cep_fill"][w] = count if full else count + 1
        r["cep_sum"][w], r["cep_min"][w], r["cep_max"][w] = total, least, most
        r["cep_passing"][w] = passing & 0xFF

    def _operand(self, operand: int, wi: int, raw: dict[str, int]) -> tuple[int, bool]:
        """CEP_OPERAND: an operand, order-encoded, and whether it is a signed value."""
        r = self.registers
        name = _OPERANDS.get(operand, "max")
        if name == "value":
            return raw["value"] ^ CEP_SIGN, True
        if name in ("key", "ts", "seq"):
            return raw[name], False
        if name == "count":
            return r["cep_fill"][wi], False
        if name == "count_if":
            return r["cep_passing"][wi], False
        signed = r["cep_window_field"][wi] == VALUE
        if name == "sum":
            return (r["cep_sum"][wi] ^ CEP_SIGN if signed else r["cep_sum"][wi]), signed
        return (r["cep_min"][wi] if name == "min" else r["cep_max"][wi]), signed

    def _cep_pattern(self, p: int, stream: int, raw: dict[str, int]):
        """CEP_PATTERN: slot ``p`` moves on the event; ``(id, match, value)`` if it completed a match."""
        r = self.registers
        if r["cep_pattern_on"][p] != 1 or r["cep_pattern_stream"][p] != stream:
            return None
        symbol = 0
        for c in range(CEP_COMPARISONS):
            cell = p * CEP_COMPARISONS + c
            operand = r["cep_compare_operand"][cell]
            if operand:
                x, _signed = self._operand(operand, r["cep_compare_window"][cell], raw)
                if passes(x, r["cep_compare_op"][cell], r["cep_compare_constant"][cell]):
                    symbol |= 1 << c
        state = r["cep_state"][p]
        hit = self.tables[f"cep_transition_{p}"].get((state, symbol))
        next_state, completes = hit[1] if hit is not None else (state, 0)
        r["cep_state"][p] = next_state
        if not completes:
            return None
        r["cep_matches"][p] = (r["cep_matches"][p] + 1) & 0xFFFFFFFF
        x, signed = self._operand(r["cep_return_operand"][p], r["cep_return_window"][p], raw)
        return r["cep_pattern_id"][p], r["cep_matches"][p], x ^ CEP_SIGN if signed else x
