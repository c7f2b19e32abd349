"""A run's lifeline: what it started ends when its process dies, even by SIGKILL.

A dead process runs no cleanup, so the cleanup must live elsewhere.  When a
run opens its state file (``procs.begin_run``, ``procs.owned_by``) it starts
a watchdog: a small process in a session of its own, whose standard input
is the read end of a pipe.  Only the run holds the write end (it is
close-on-exec, so no child the run starts inherits it), and the kernel
closes it when the run's process ends, however it ends.  The watchdog
blocks reading; at end of file it does for that state file what
``testbed clean`` does (``cleanup.clean_state``): it ends every recorded
process and its process group, removes the recorded interfaces, named
namespaces and temporary files, and the state file.  The network
namespaces of Mininet's nodes go with the last process in them.

A run that ends in order stops what it started itself and removes its
state file before it closes the lifeline, so the watchdog finds nothing to
do and exits.  Being in a session of its own, the watchdog is not hit by a
signal to the run's process group (Ctrl-C in a terminal, ``kill -9 -PGID``).
What it ended it writes to ``logs/lifeline.log`` in the run directory.
The watchdog's program is ``testbed.emulation.watchdog``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

from testbed import ROOT


class Lifeline:
    """The write end of one state file's lifeline, and its watchdog process."""

    def __init__(self, state_file: Path):
        self.state_file = Path(state_file).resolve()
        self.fd: Optional[int] = None
        self.watchdog: Optional[subprocess.Popen] = None

    def start(self) -> "Lifeline":
        read_end, self.fd = os.pipe()         # both close-on-exec: no other child gets the write end
        try:
            # The watchdog's own session keeps it out of signals aimed at the run's group;
            # cwd=ROOT imports this checkout's testbed, as the host programs do.
            self.watchdog = subprocess.Popen([sys.executable, "-m", "testbed.emulation.watchdog",
                                              str(self.state_file)], stdin=read_end, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        except BaseException:
            os.close(self.fd)
            self.fd = None
            raise
        finally:
            os.close(read_end)
        return self

    def close(self) -> None:
        """Cut the line, as the run's death would: the watchdog ends what the
        state file still records, if it is still there, then exits."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def wait(self, timeout: float) -> int:
        """Wait for the watchdog to exit (after ``close``): its exit code."""
        assert self.watchdog is not None
        return self.watchdog.wait(timeout=timeout)
