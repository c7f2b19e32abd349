"""Topology builders: one way for every test to make a topology.

``stream`` and ``topology_data`` build the YAML shape a user writes;
``build`` validates it into a ``Topology``; ``write`` puts it in a file for
the CLI.  Hosts are ``h1``..``hN`` unless named.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable, Optional

import yaml

from testbed.semantics.topology import Topology, parse_topology


def stream(sid: int, window: dict, operators: list[str], source: str = "h1", events: int = 1,
           rate: float = 1, **extra: Any) -> dict:
    return {"id": sid, "source": source, "window": window, "operators": list(operators),
            "events": events, "rate": rate, **extra}


def topology_data(streams: list[dict], hosts: int | Iterable[str] = 8, name: str = "t",
                  switch: Optional[str] = None, **extra: Any) -> dict:
    names = [f"h{i}" for i in range(1, hosts + 1)] if isinstance(hosts, int) else list(hosts)
    data: dict[str, Any] = {"name": name, "hosts": {h: {} for h in names}, "streams": streams, **extra}
    if switch is not None:
        data["switch"] = {"name": switch}
    return data


def build(streams: list[dict], hosts: int | Iterable[str] = 8, **extra: Any) -> Topology:
    return parse_topology(topology_data(streams, hosts, **extra))


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def edited(data: dict, path: tuple, value: Any) -> dict:
    """A deep copy of ``data`` with the value at ``path`` replaced (``KeyError`` deletes it)."""
    data = copy.deepcopy(data)
    node = data
    for part in path[:-1]:
        node = node[part]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def assert_validate_refuses(folder: Path, data: dict[str, Any], field: str, words: str) -> None:
    """``testbed validate`` of ``data`` (written in ``folder``) exits 2 with one
    line that names the file and ``field`` and says ``words``."""
    from click.testing import CliRunner

    from testbed.cli import main

    path = folder / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2, (result.exit_code, result.output)
    line = result.stderr.rstrip("\n")
    assert "\n" not in line and line.startswith(f"error: {path}: {field}: "), line
    assert words in line, line
