"""Reading a YAML file someone hands the testbed, defensively.

Topology and experiment files come from users: what is not a regular file,
too large, not UTF-8, not YAML, nested too deeply, or expands through
aliases into a huge document is refused with one line naming the file.

The loader reads YAML 1.2's booleans (``true``/``false`` only), so a host
named ``on`` stays a name and ``size: yes`` is refused as text; it refuses a
key given twice in one mapping, where YAML would silently keep the last
(a second ``streams:`` dropped the first list), and integers longer than
``MAX_INT_DIGITS`` digits, which no field holds.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Union

import yaml
from yaml.constructor import ConstructorError

from testbed.rundir.files import why_unreadable
from testbed.semantics import limits

#: No field holds more than 64 bits, which take 20 digits; more are a mistake.
MAX_INT_DIGITS = 40

_BOOL = "tag:yaml.org,2002:bool"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 booleans, one value per key, and bounded integers."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], Any] = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    seen = first.setdefault((key_node.tag, key_node.value), key_node.start_mark)
                    if seen is not key_node.start_mark:
                        raise ConstructorError(None, None, f"key {key_node.value!r} given twice in one mapping "
                                                           f"(first on line {seen.line + 1})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_bounded_int(self, node):
        digits = sum(c.isalnum() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"an integer of {digits} digits; no field holds more than "
                                               f"{MAX_INT_DIGITS}", node.start_mark)
        return self.construct_yaml_int(node)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_bounded_int)


def read_yaml(path: Union[str, Path], error: type[Exception] = ValueError) -> Any:
    """A YAML file's document; every reason it cannot be read is ``error`` with a one-line message.

    Refused: what is not a regular file, files over ``limits.MAX_FILE_BYTES``,
    text that is not UTF-8, and what ``parse_yaml`` refuses.
    """
    path = Path(path)
    try:
        problem = why_unreadable(path)
        if problem:
            raise error(f"{shorten_path(path)}: cannot read: {problem}")
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
    return parse_yaml(text, str(path), error)


def parse_yaml(text: str, source: str, error: type[Exception] = ValueError) -> Any:
    """The document ``text`` holds (a file's, or a command line's value), read as files are:
    ``error`` with one line starting with ``source`` for YAML that does not parse, nests
    deeper than ``limits.MAX_YAML_DEPTH`` or expands beyond ``limits.MAX_YAML_NODES`` nodes."""
    too_deep = f"{source}: nested more than {limits.MAX_YAML_DEPTH} deep"
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise error(f"{source}: not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None
    except RecursionError:           # PyYAML's composer recurses per level, far past the depth allowed
        raise error(too_deep) from None
    nodes, depth = _extent(data, limits.MAX_YAML_NODES)
    if nodes > limits.MAX_YAML_NODES:
        raise error(f"{source}: more than {limits.MAX_YAML_NODES} YAML nodes once aliases are expanded")
    if depth > limits.MAX_YAML_DEPTH:
        raise error(too_deep)
    return data


def _extent(data: Any, limit: int) -> tuple[int, int]:
    """Nodes of a YAML document, each alias counted again, up to just past ``limit``, and how
    deep it nests (aliases expanded: a chain of them nests deeper than the text shows)."""
    count, deepest, todo = 0, 0, [(data, 1)]
    while todo and count <= limit:
        node, depth = todo.pop()
        count += 1
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            todo.extend((key, depth + 1) for key in node.keys())
            todo.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            todo.extend((item, depth + 1) for item in node)
    return count, deepest


def shorten_path(path: Path, keep: int = 120) -> str:
    """``path`` for a message: an over-long one is cut in the middle so the line stays readable."""
    text = str(path)
    return text if len(text) <= keep else f"{text[:keep // 2]}...{text[-keep // 2:]}"
