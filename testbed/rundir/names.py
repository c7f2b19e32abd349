"""The names that reach a command line or a path, and the patterns that hold them.

Two kinds of name leave the testbed's own data:

- **Node names** (hosts and switches) become Linux interface names
  (``s1-eth3``), log file names, and arguments of the commands Mininet runs
  inside its nodes.  Mininet builds some of those commands as strings for a
  shell, so a node name must never carry anything a shell would read: it is
  short lower-case letters and digits, nothing else.
- **Path names** (run ids, run labels, variant names, switch log names) each
  become one folder or file name inside a run or experiment directory.  They
  may not hold a path separator, and ``.`` and ``..`` cannot match, so a name
  never leaves the directory it is meant for.

Everything that takes such a name from a user (topology fields, command-line
options, experiment parameters, the Python API) checks it here, before
anything starts.  This module sits in the lowest layer so that every layer
can use the one definition.
"""
from __future__ import annotations

import re

#: Hosts and switches.  ``<name>-eth<port>`` must fit Linux's 15-byte interface
#: names, and the characters are ones no shell treats specially.
NODE_NAME = r"^[a-z][a-z0-9]{0,9}$"
#: One component of a path: no separator, and a letter or digit first, so
#: neither ``.`` nor ``..`` nor a hidden file can match.
PATH_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

_NODE = re.compile(NODE_NAME)
_PATH = re.compile(PATH_NAME)


class UnsafeName(ValueError):
    """A name that would reach a shell or leave its directory; ``str()`` is one line."""


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 60 else text[:57] + "..."


def node_name(name: object, what: str = "name") -> str:
    """``name`` when it is a valid host or switch name; ``UnsafeName`` otherwise."""
    if not isinstance(name, str) or not _NODE.fullmatch(name):
        raise UnsafeName(f"{what}: {_shown(name)} is not a node name (1 to 10 lower-case letters and digits, "
                         f"starting with a letter)")
    return name


def path_name(name: object, what: str = "name") -> str:
    """``name`` when it can be one file or folder name inside a results directory."""
    if not isinstance(name, str) or not _PATH.fullmatch(name):
        raise UnsafeName(f"{what}: {_shown(name)} cannot name a file or folder (1 to 64 letters, digits, "
                         f"'_', '.' or '-', starting with a letter or digit)")
    return name
