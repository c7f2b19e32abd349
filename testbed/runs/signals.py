"""SIGINT and SIGTERM during a run: stop at once, but never in the middle of a cleanup.

``Interrupts`` turns the first SIGINT or SIGTERM into ``RunInterrupted``
where the run is, so the run stops and cleans up.  Inside ``shielded()``
(building the network, stopping what was started, writing the record) a
signal is only noted: raising there would leave half-built namespaces or
unstopped processes behind.  It is raised when the shielded part ends,
unless the run is already on its way out, in which case the cleanup goes
on undisturbed.  A second signal during the cleanup is noted too, so an
impatient Ctrl-C cannot cut the cleanup short either.
"""
from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterrupted(Exception):
    """SIGTERM or SIGINT arrived; the run stops and cleans up."""


class Interrupts:
    """The run's SIGINT/SIGTERM handlers, from ``install()`` to ``restore()``."""

    def __init__(self) -> None:
        self.previous: dict[int, object] = {}
        self.depth = 0                       # nesting of shielded() parts
        self.pending: Optional[str] = None   # a signal that arrived while shielded
        self.received: list[str] = []        # every signal, in order, for the record

    def install(self) -> None:
        self.previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous = {}

    def _handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        if self.depth or len(self.received) > 1:
            self.pending = self.pending or name
            return
        raise RunInterrupted(name)

    @contextmanager
    def shielded(self, raise_pending: bool = True) -> Iterator[None]:
        """Defer signals until the body is done; then raise one that came, if ``raise_pending``."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if raise_pending and self.depth == 0 and self.pending is not None and len(self.received) == 1:
            name, self.pending = self.pending, None
            raise RunInterrupted(name)
