"""Following a run while events flow: sent events and received copies.

``StreamWatch`` reads the status files the sources and receivers keep up to
date and decides when streaming is over: every expected copy arrived,
nothing moved for ``settle_s`` after the sources finished, or the timeout
passed.  It shows both counts as progress bars.

It also watches the processes: a source that fails or the switch dying
ends the stream with ``ProcessDied`` (there is nothing left to measure),
while a receiver that dies is only noted in ``dead_receivers``: the rest
of the run goes on, and the events that host never recorded are counted
lost there.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from testbed.rundir import RunDir, read_json

POLL_S = 0.2
#: Where the output is no terminal (a log file, CI), one plain progress line at most this often.
PLAIN_EVERY_S = 5.0


class PlainProgress:
    """The part of ``rich.progress.Progress`` that ``StreamWatch`` uses, written
    as plain lines: a bar needs a terminal's width and cursor, and without
    them rich cut it to ``━━━ 200… 0:0…`` in a log.  A line is printed when
    the counts changed and ``every_s`` has passed since the last one, and
    once at the end, so a log shows how the stream went at a modest rate."""

    def __init__(self, console: Console, every_s: float = PLAIN_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.console, self.every_s, self.clock = console, every_s, clock
        self.tasks: list[dict] = []
        self.start = clock()
        self.printed_at: Optional[float] = None
        self.last_line = ""

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.emit(force=True)

    def add_task(self, description: str, total: Optional[int] = None) -> int:
        self.tasks.append({"description": description, "total": total, "completed": 0})
        return len(self.tasks) - 1

    def update(self, task: int, completed: Optional[int] = None, total: Optional[int] = None,
               description: Optional[str] = None) -> None:
        for key, value in (("completed", completed), ("total", total), ("description", description)):
            if value is not None:
                self.tasks[task][key] = value
        self.emit()

    def line(self) -> str:
        parts = [t["description"] if t["total"] is None else f"{t['description']} {t['completed']:,}/{t['total']:,}"
                 for t in self.tasks]
        return f"{self.clock() - self.start:.0f} s: " + " · ".join(parts)

    def emit(self, force: bool = False) -> None:
        now = self.clock()
        if not force and self.printed_at is not None and now - self.printed_at < self.every_s:
            return
        line = self.line()
        # The elapsed time alone changing is no news.
        if line.partition(": ")[2] == self.last_line.partition(": ")[2] and not force:
            return
        self.console.print(Text(line), soft_wrap=True)
        self.printed_at, self.last_line = now, line


def progress_display(console: Console):
    """Live bars on a terminal; plain lines (``PlainProgress``) anywhere else."""
    if not console.is_terminal:
        return PlainProgress(console)
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    return Progress(*columns, console=console, transient=False)


class ProcessDied(RuntimeError):
    """A process the stream cannot go on without exited: ``what`` names it, ``code`` is its exit code."""

    def __init__(self, what: str, code: int):
        super().__init__(f"{what} {exit_text(code)}")
        self.what = what
        self.code = code


def exit_text(code: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


@dataclass(frozen=True)
class OperatorLag:
    """How far the Spark side trails one operator instance: copies its
    receiver recorded, copies Spark has processed, and the difference in
    events and in seconds (how long ago the newest processed copy arrived,
    while some are waiting; 0 when none are)."""

    received: int
    processed: int
    lag_events: int
    #: ``None`` while copies wait and Spark has processed none of this operator's yet.
    lag_s: Optional[float]


def operator_lag(rundir: RunDir, hosts, now_ns: Optional[int] = None,
                 received_by_host: Optional[dict[str, int]] = None) -> dict[str, OperatorLag]:
    """Per operator host, from the receivers' counts (``received_by_host``, or
    their status files) and the live merger's ``spark/live.json``."""
    live = read_json(rundir.spark_live_status).get("operators", {})
    now_ns = time.time_ns() if now_ns is None else now_ns
    out = {}
    for host in hosts:
        received = int(received_by_host[host] if received_by_host is not None else
                       read_json(rundir.receiver_status(host)).get("received", 0))
        seen = live.get(host, {})
        processed = int(seen.get("processed", 0))
        behind = max(received - processed, 0)
        newest = int(seen.get("newest_recv_ns", 0))
        lag_s = (max(now_ns - newest, 0) / 1e9 if newest else None) if behind else 0.0
        out[host] = OperatorLag(received, processed, behind, lag_s)
    return out


def live_line(rundir: RunDir, hosts, lags: Optional[dict[str, OperatorLag]] = None) -> str:
    """``windows emitted 120 · largest lag o2 35 events, 0.8 s`` for the progress
    display and ``status``; ``lags`` if the caller has them (``operator_lag``)."""
    emitted = read_json(rundir.spark_live_status).get("windows_emitted", 0)
    lags = operator_lag(rundir, hosts) if lags is None else lags
    if not lags:
        return f"windows emitted {emitted}"
    host, worst = max(lags.items(), key=lambda kv: (kv[1].lag_s is None, kv[1].lag_s or 0, kv[1].lag_events))
    return f"windows emitted {emitted} · largest lag {host} {worst.lag_events} events, {seconds(worst.lag_s)}"


def seconds(lag_s: Optional[float]) -> str:
    return "none processed yet" if lag_s is None else f"{lag_s:.1f} s"


@dataclass
class StreamWatch:
    rundir: RunDir
    sources: dict            # host -> Popen
    receivers: dict          # host -> Popen
    total_events: int
    expected_copies: int
    timeout_s: float
    #: Processes the stream cannot go on without besides the sources, ``what -> Popen``
    #: (the switch): any exit ends the stream.
    vital: dict = field(default_factory=dict)
    #: After the sources finish, how long to wait without any new delivery
    #: before giving up on the missing ones (they are then reported as lost).
    settle_s: float = 5.0
    #: Receivers that died while streaming: host -> exit code.
    dead_receivers: dict = field(default_factory=dict)
    #: Copies the switch sent so far (its counters), when known: once the
    #: sources are done this replaces ``expected_copies``, which a run that
    #: changes its streams cannot know in advance.
    switch_copies: Optional[Callable[[], int]] = None
    #: The run has a Spark application: show its windows emitted and the largest operator lag.
    live: bool = False
    #: How long the sources may take to start sending (to read the topology and
    #: build their frames) before ``timeout_s`` starts to count: tens of
    #: seconds for 32,768 streams a host, which is no stream being slow.
    startup_s: float = 600.0
    #: Every source has started (written its status) or exited.
    _started: bool = field(default=False, init=False, repr=False)

    def sent(self) -> tuple[int, bool]:
        """Events sent so far, and whether every source has finished."""
        sent, done, self._started = 0, True, True
        for host, proc in self.sources.items():
            status = read_json(self.rundir.source_status(host))
            sent += sum(status.get("sent", {}).values())
            done = done and bool(status.get("final")) and proc.poll() is not None
            self._started = self._started and (bool(status) or proc.poll() is not None)
        return sent, done

    def received_by_host(self) -> dict[str, int]:
        return {h: read_json(self.rundir.receiver_status(h)).get("received", 0) for h in self.receivers}

    def received(self) -> int:
        return sum(self.received_by_host().values())

    def live_line(self, received_by_host: dict[str, int]) -> str:
        hosts = list(self.receivers)
        return live_line(self.rundir, hosts, operator_lag(self.rundir, hosts, received_by_host=received_by_host))

    def follow(self, console: Console) -> str:
        """Block until streaming is over; return why (``complete``, ``settled``, ``timeout``)."""
        start = time.monotonic()
        self._started = False
        with progress_display(console) as progress:
            t_sent = progress.add_task("events sent", total=self.total_events)
            t_recv = progress.add_task("deliveries received", total=self.expected_copies)
            t_live = progress.add_task(self.live_line(self.received_by_host()), total=None) if self.live else None
            last_change, last_received, sending = start, -1, None
            while True:
                sent, done = self.sent()
                by_host = self.received_by_host()
                received = sum(by_host.values())
                progress.update(t_sent, completed=sent)
                progress.update(t_recv, completed=received)
                if t_live is not None:
                    progress.update(t_live, description=self.live_line(by_host))
                if received != last_received:
                    last_change, last_received = time.monotonic(), received
                if done and self.switch_copies is not None:
                    self.expected_copies = self.switch_copies()
                    progress.update(t_recv, total=self.expected_copies)
                if done and received >= self.expected_copies:
                    return "complete"
                if done and time.monotonic() - last_change > self.settle_s:
                    console.log(f"[yellow]{self.expected_copies - received} deliveries still missing after "
                                f"{self.settle_s:.0f}s without progress; stopping")
                    return "settled"
                if not self._started and time.monotonic() - start > self.startup_s:
                    console.log(f"[red]timeout: the sources had not started after {self.startup_s:.0f}s")
                    return "timeout"
                if self._started and sending is None:
                    sending = time.monotonic()      # the timeout counts from here: a source's start is no stream
                if sending is not None and time.monotonic() - sending > self.timeout_s:
                    console.log(f"[red]timeout after {self.timeout_s:.0f}s")
                    return "timeout"
                self.check_processes(console)
                time.sleep(POLL_S)

    def check_processes(self, console: Console) -> None:
        """Raise ``ProcessDied`` for a failed source or a vital process that exited; note dead receivers."""
        for host, proc in self.sources.items():
            if proc.poll() not in (None, 0):
                raise ProcessDied(f"source on {host}", proc.returncode)
        for what, proc in self.vital.items():
            if proc.poll() is not None:
                raise ProcessDied(what, proc.returncode)
        for host, proc in self.receivers.items():
            if host not in self.dead_receivers and proc.poll() is not None:
                self.dead_receivers[host] = proc.returncode
                console.log(f"[red]receiver on {host} {exit_text(proc.returncode)}; the run goes on, and what "
                            f"{host} did not record is counted lost there")
