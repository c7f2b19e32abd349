"""S4's public PTF test cases (tests/data/s4_ptf_cases.yaml), read into typed
records, and the topology and event sequence that replay one on this testbed.

The file holds facts only (specs, timestamps, S4's expected ports); which
window-start rule to replay a case under is the test's choice.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import yaml
from pydantic import Field

from support.topologies import build, stream
from testbed.semantics.strict import StrictModel
from testbed.semantics.topology import Topology, WindowSpec

CASES_FILE = Path(__file__).resolve().parent.parent / "data" / "s4_ptf_cases.yaml"
#: The stream id every replayed case uses.
STREAM = 1


class S4Packet(StrictModel):
    """One packet of a case: its timestamp (time windows only; a count
    window's packets are numbered by arrival) and the ports S4 expects."""

    ts: Optional[int] = None
    ports: list[int] = Field(min_length=1)


class S4Source(StrictModel):
    repository: str
    commit: str


class S4Case(StrictModel):
    name: str
    file: str
    test: str
    window: WindowSpec
    #: operator i of the stream egresses on ports[i]
    ports: list[int] = Field(min_length=1)
    note: Optional[str] = None
    packets: list[S4Packet] = Field(min_length=1)

    @property
    def operators(self) -> list[str]:
        """Operator hosts named after S4's ports (h2 for port 2), in operator order."""
        return [f"h{port}" for port in self.ports]

    def topology(self, starts: Optional[str] = None) -> Topology:
        """The case as a topology: h1 sends, the operators are h<port>; the
        window spec's start rule replaced by ``starts`` when given."""
        window = self.window.model_dump(exclude_none=True)
        if starts is not None and self.window.kind == "time":
            window["starts"] = starts
        hosts = ["h1"] + [f"h{i}" for i in range(2, max(self.ports) + 1)]
        return build([stream(STREAM, window, self.operators, events=len(self.packets))], hosts, name="s4case")

    def events(self) -> list[tuple[int, int, int]]:
        """``(stream, seq, ts)`` per packet; a count case's timestamps are its arrival indexes."""
        return [(STREAM, k, k if p.ts is None else p.ts) for k, p in enumerate(self.packets)]

    def expected(self) -> list[list[int]]:
        return [sorted(set(p.ports)) for p in self.packets]

    def s4_ports(self, operators: list[str]) -> list[int]:
        """The S4 ports of a set of this case's operator hosts, sorted."""
        return sorted(self.ports[self.operators.index(op)] for op in operators)


class S4Cases(StrictModel):
    source: S4Source
    cases: list[S4Case] = Field(min_length=1)


def load_cases(path: Path = CASES_FILE) -> list[S4Case]:
    return S4Cases.model_validate(yaml.safe_load(path.read_text())).cases
