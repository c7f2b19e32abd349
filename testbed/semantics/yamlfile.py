"""Reading a YAML file someone hands the testbed, defensively.

Topology and experiment files come from users: what is not a regular file,
too large, not UTF-8, not YAML, nested too deeply, or expands through
aliases into a huge document is refused with one line naming the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import yaml

from testbed.semantics import limits


def read_yaml(path: Union[str, Path], error: type[Exception] = ValueError) -> Any:
    """A YAML file's document; every reason it cannot be read is ``error`` with a one-line message.

    Refused: what is not a regular file, files over ``limits.MAX_FILE_BYTES``,
    text that is not UTF-8, YAML that does not parse or nests too deeply, and
    documents whose aliases expand beyond ``limits.MAX_YAML_NODES`` nodes.
    """
    path = Path(path)
    try:
        if not path.is_file():
            raise error(f"{path}: cannot read: {'no such file' if not path.exists() else 'not a file'}")
        size = path.stat().st_size
        if size > limits.MAX_FILE_BYTES:
            raise error(f"{path}: {size} bytes, more than the {limits.MAX_FILE_BYTES} a topology may have")
        raw = path.read_bytes()
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise error(f"{path}: not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None
    except RecursionError:
        raise error(f"{path}: not valid YAML: nested too deeply") from None
    if _node_count(data, limits.MAX_YAML_NODES) > limits.MAX_YAML_NODES:
        raise error(f"{path}: more than {limits.MAX_YAML_NODES} YAML nodes once aliases are expanded")
    return data


def _node_count(data: Any, limit: int) -> int:
    """Nodes of a YAML document, each alias counted again, up to just past ``limit``."""
    count, todo = 0, [data]
    while todo and count <= limit:
        node = todo.pop()
        count += 1
        if isinstance(node, dict):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return count
