"""Host processes' signal handling (testbed.emulation.procs)."""
import os
import signal

from testbed.emulation.procs import run_until_signalled


class Worker:
    """Stops at the first SIGTERM, as a receiver does."""

    def __init__(self):
        self.stopping = False
        self.loops = 0

    def run(self):
        os.kill(os.getpid(), signal.SIGTERM)
        while not self.stopping:
            self.loops += 1


def test_a_worker_stops_at_sigterm_and_a_late_one_cannot_kill_it():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker = Worker()
        run_until_signalled(worker)
        assert worker.stopping
        # its data is written: a second SIGTERM (the stopper's) during shutdown is ignored,
        # where Python's default handler would end the process with -15
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
