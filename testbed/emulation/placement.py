"""Which CPUs a timed switch and its sender run on.

A switch timed on one machine shares it with the sender of its frames.
On a machine of few cores the two then take turns on the same CPUs, and a
blast measures how the scheduler shared them as much as the switch:
p4cep's forwarding rate moved by half between rounds on a two-core
machine (docs/p4.md, "Which thread bounds a blast").  A placement gives
the sender CPUs of its own and the switch the rest, as a switch and a
traffic generator on two machines would have them.

The switch is placed by its command line (``taskset``, from util-linux,
which every Debian has), so every thread it starts inherits the CPUs;
the sender by the affinity of the thread that sends, for as long as it
sends.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional


def cpu_list(cpus: frozenset[int]) -> str:
    """``cpus`` as taskset and /proc write them: ``0,2-3``."""
    out: list[str] = []
    for cpu in sorted(cpus):
        if out and out[-1].split("-")[-1] == str(cpu - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{cpu}"
        else:
            out.append(str(cpu))
    return ",".join(out)


def on_cpus(cpus: frozenset[int]) -> list[str]:
    """The command prefix that starts a program, and every thread it makes, on ``cpus``."""
    return ["taskset", "--cpu-list", cpu_list(cpus)]


def cpu_seconds(pid: int) -> float:
    """The CPU time the threads of process ``pid`` have had so far, in seconds.

    Read from each thread's ``/proc/<pid>/task/<tid>/schedstat``, which counts
    nanoseconds, where ``/proc/<pid>/stat`` counts scheduler ticks (10 ms):
    a trial of a second measured in ticks would be off by a few percent.  A
    thread that ended between the listing and its read is left out, with
    its time; a switch's threads last as long as the switch."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


@dataclass(frozen=True)
class CpuPlacement:
    """The switch's CPUs and the sender's, apart."""

    switch: frozenset[int]
    sender: frozenset[int]

    def __post_init__(self) -> None:
        if not self.switch or not self.sender:
            raise ValueError("a placement needs CPUs for the switch and for the sender")
        if self.switch & self.sender:
            raise ValueError(f"the switch's CPUs ({cpu_list(self.switch)}) and the sender's "
                             f"({cpu_list(self.sender)}) overlap")

    @classmethod
    def of_this_process(cls) -> Optional["CpuPlacement"]:
        """The sender on the highest CPU this process may use, the switch on
        the others; None with one CPU, where nothing can be kept apart."""
        cpus = frozenset(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return None
        sender = max(cpus)
        return cls(switch=cpus - {sender}, sender=frozenset({sender}))

    @contextmanager
    def sending(self) -> Iterator[None]:
        """The calling thread on the sender's CPUs, and back where it was after."""
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.sender)
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)

    def record(self) -> dict[str, str]:
        return {"switch_cpus": cpu_list(self.switch), "sender_cpus": cpu_list(self.sender)}


@contextmanager
def sending_on(placement: Optional[CpuPlacement]) -> Iterator[None]:
    """``placement.sending()``, or nothing without a placement."""
    if placement is None:
        yield
    else:
        with placement.sending():
            yield
