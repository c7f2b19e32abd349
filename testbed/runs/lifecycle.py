"""A run's hold on the machine, taken before its first phase and given back after its last.

``RunLifecycle`` claims the run directory (or refuses at once, naming the
run in the way), turns SIGINT and SIGTERM into ``RunInterrupted``, keeps the
state file that ``testbed clean`` reads, and however the run ends (success,
error, Ctrl-C, SIGTERM) stops what is left, notes how it ended in the
record, and writes ``run.json``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

from rich.console import Console

from testbed.emulation import procs
from testbed.rundir import RunDir, RunRecord
from testbed.runs.signals import Interrupts


class RunBusy(Exception):
    """Another run holds the run directory; nothing was started."""


class RunLifecycle:
    """Claim, signals and the final record of one run."""

    def __init__(self, run_id: str, rundir: RunDir, console: Console, link_latest: bool):
        self.run_id = run_id
        self.rundir = rundir
        self.console = console
        #: Point ``<parent>/latest`` at the run once it is over (runs in results/ only).
        self.link_latest = link_latest
        self.interrupts = Interrupts()

    @contextmanager
    def held(self, record: Callable[[], RunRecord], release: Callable[[], None]) -> Iterator[None]:
        """The body runs holding the run; ``record()`` is the record as it then
        stands, ``release()`` stops what the body left running."""
        try:
            procs.begin_run(self.run_id, self.rundir.root)
        except procs.RunDirBusy as err:
            raise RunBusy(str(err)) from None
        self.interrupts.install()
        try:
            yield
        except BaseException as err:
            rec = record()
            if rec is not None:
                rec.error = f"{type(err).__name__}: {err}"
            with self.interrupts.shielded(raise_pending=False):
                self.finish(record(), release)
            raise
        with self.interrupts.shielded():
            self.finish(record(), release)

    def finish(self, record: RunRecord, release: Callable[[], None]) -> None:
        """Stop what is left, give the signals back, close the state file and write the record."""
        try:
            release()
        finally:
            left = procs.end_run()
            self.interrupts.restore()
            if record is None:
                return
            if left:
                record.left_running = left
                self.console.log(f"[red]could not stop {', '.join(left)}; the run's watchdog tried again "
                                 f"(logs/lifeline.log), `testbed clean` ends what it could not")
            record.signals = list(self.interrupts.received)
            record.end = time.time()
            if self.rundir.root.is_dir():
                self.rundir.write_record(record)
                if self.link_latest:
                    self.rundir.link_latest()
