"""``python -m support.interrupt_at PHASE SIGNAL run ARGS...``: a run that signals itself.

The run sends itself SIGNAL (``SIGINT`` or ``SIGTERM``) when it enters
PHASE, exactly as if a user pressed Ctrl-C or ``kill`` hit it there; tests
use it to interrupt every phase deterministically.  PHASE is one of the
run's phases (``Run.phase`` names: ``spark submit``, ``network``, ``plan``,
``operators``, ``stream``, ``spark``, ``conclude``), ``stop`` (stopping
and collecting), or a phase with ``+S`` appended: S seconds into it.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

from testbed import cli
from testbed.runs.orchestrator import Run


def main() -> None:
    target, signame, *args = sys.argv[1:]
    phase, _, delay = target.partition("+")
    sig = signal.Signals[signame]

    def fire() -> None:
        if delay:
            threading.Timer(float(delay), os.kill, (os.getpid(), sig)).start()
        else:
            os.kill(os.getpid(), sig)

    original_phase, original_stop = Run.phase, Run.stop_and_collect

    def phase_hook(self, name, step):
        def step_then_signal():
            if name == phase:
                fire()
            return step()
        return original_phase(self, name, step_then_signal)

    def stop_hook(self):
        if phase == "stop":
            fire()
        return original_stop(self)

    Run.phase, Run.stop_and_collect = phase_hook, stop_hook
    cli.main(args)


if __name__ == "__main__":
    main()
