"""``python -m testbed.emulation.watchdog STATE_FILE``: the watchdog at the far end of a run's lifeline.

Started by ``lifeline.Lifeline`` with the lifeline's read end as standard
input; when the line breaks it ends what ``STATE_FILE`` still records
(``cleanup.clean_file``) and exits.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from testbed.emulation.cleanup import clean_file


def watch(state_file: Path, fd: int = 0) -> list[str]:
    """Block until the lifeline, read end ``fd``, breaks, then clean ``state_file``; what was done.

    The cleanup is ``testbed clean``'s for one state file, so the two end the
    same set; it is written to the run directory's ``logs/lifeline.log``.
    """
    while os.read(fd, 4096):
        pass                                   # nothing is sent on the line; only its end counts
    state, lines = clean_file(state_file)
    logs = Path(state["run_dir"]) / "logs" if state and state.get("run_dir") else None
    if lines and logs is not None and logs.is_dir():
        with open(logs / "lifeline.log", "a") as log:
            log.write("".join(f"watchdog: {line}\n" for line in lines))
    return lines


def main() -> None:
    # Only the lifeline's end stops the watchdog: a terminal's Ctrl-C or hang-up must not.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    watch(Path(sys.argv[1]))


if __name__ == "__main__":
    main()
