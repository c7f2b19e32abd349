"""Whether a path someone hands the testbed is a regular file it can read without waiting.

Opening a named pipe blocks until something writes to it, and a device can
be read without end, so a run directory's files, topology, experiment and
replay files are asked this first: ``testbed check`` on a run whose
``run.json`` is a FIFO then says so in one line instead of waiting forever.
It lives in the bottom layer because the run directory's readers
(``record``, ``paths``) and the file readers of ``testbed.semantics`` both ask it.
"""
from __future__ import annotations

import errno
from pathlib import Path
from typing import Optional

#: What ``why_unreadable`` says of a path where nothing is.
NO_SUCH_FILE = "no such file"


def why_unreadable(path: Path) -> Optional[str]:
    """Why ``path`` is not a regular file one can open, in a few words, or None if it is one.

    Asked before opening so that a directory, a pipe, a symlink loop or an
    over-long name gets its own words instead of a traceback, a hang or
    "no such file".
    """
    try:
        path.resolve(strict=True)
        if path.is_dir():
            return "a directory, not a file"
        if not path.is_file():
            return "not a file (a pipe or a device)"
    except FileNotFoundError:
        return NO_SUCH_FILE
    except RuntimeError:                     # Python 3.11's resolve() on a symlink loop
        return "a symlink loop"
    except OSError as err:
        return {errno.ELOOP: "a symlink loop", errno.ENAMETOOLONG: "name too long"}.get(
            err.errno, err.strerror or str(err)).lower()
    return None
