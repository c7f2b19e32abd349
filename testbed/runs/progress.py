"""Following a run while events flow: sent events and received copies.

``StreamWatch`` reads the status files the sources and receivers keep up to
date and decides when streaming is over: every expected copy arrived,
nothing moved for ``settle_s`` after the sources finished, or the timeout
passed.  It shows both counts as progress bars.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from testbed.runs.rundir import RunDir, read_json

POLL_S = 0.2


class SourceFailed(RuntimeError):
    """A source process exited with an error; ``host`` names it."""

    def __init__(self, host: str):
        super().__init__(host)
        self.host = host


@dataclass
class StreamWatch:
    rundir: RunDir
    sources: dict            # host -> Popen
    receivers: list[str]
    total_events: int
    expected_copies: int
    timeout_s: float
    #: After the sources finish, how long to wait without any new delivery
    #: before giving up on the missing ones (they are then reported as lost).
    settle_s: float = 5.0

    def sent(self) -> tuple[int, bool]:
        """Events sent so far, and whether every source has finished."""
        sent, done = 0, True
        for host, proc in self.sources.items():
            status = read_json(self.rundir.source_status(host))
            sent += sum(status.get("sent", {}).values())
            done = done and bool(status.get("final")) and proc.poll() is not None
        return sent, done

    def received(self) -> int:
        return sum(read_json(self.rundir.receiver_status(h)).get("received", 0) for h in self.receivers)

    def follow(self, console: Console) -> str:
        """Block until streaming is over; return why (``complete``, ``settled``, ``timeout``)."""
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        start = time.monotonic()
        with Progress(*columns, console=console, transient=False) as progress:
            t_sent = progress.add_task("events sent", total=self.total_events)
            t_recv = progress.add_task("deliveries received", total=self.expected_copies)
            last_change, last_received = start, -1
            while True:
                sent, done = self.sent()
                received = self.received()
                progress.update(t_sent, completed=sent)
                progress.update(t_recv, completed=received)
                if received != last_received:
                    last_change, last_received = time.monotonic(), received
                if done and received >= self.expected_copies:
                    return "complete"
                if done and time.monotonic() - last_change > self.settle_s:
                    console.log(f"[yellow]{self.expected_copies - received} deliveries still missing after "
                                f"{self.settle_s:.0f}s without progress; stopping")
                    return "settled"
                if time.monotonic() - start > self.timeout_s:
                    console.log(f"[red]timeout after {self.timeout_s:.0f}s")
                    return "timeout"
                failed = [h for h, p in self.sources.items() if p.poll() not in (None, 0)]
                if failed:
                    raise SourceFailed(failed[0])
                time.sleep(POLL_S)
