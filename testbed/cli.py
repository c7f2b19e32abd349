"""The ``testbed`` command line (click)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from .topology import TopologyError, load_topology, resolve_topology


def _load(topology: str):
    try:
        path = resolve_topology(topology)
        return path, load_topology(path)
    except TopologyError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(2)


@click.group()
@click.version_option(package_name="p4-splitter-testbed")
def main() -> None:
    """In-network stream splitting testbed (S4 / P4SS on Mininet)."""


@main.command()
@click.argument("topology")
@click.option("--events", "-k", "n_events", default=12, show_default=True,
              help="Show the operator set of the first K events of each stream.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def plan(topology: str, n_events: int, as_json: bool) -> None:
    """Show the splitter plan of TOPOLOGY: tables, multicast groups, first events."""
    from .planview import plan_json, print_plan

    _path, topo = _load(topology)
    if as_json:
        click.echo(json.dumps(plan_json(topo, n_events), indent=2))
    else:
        print_plan(topo, n_events)


@main.command()
@click.argument("topology")
def validate(topology: str) -> None:
    """Check TOPOLOGY and exit 2 with a one-line error if it is not usable."""
    path, topo = _load(topology)
    click.echo(f"{path}: ok ({len(topo.hosts)} hosts, {len(topo.streams)} streams)")


if __name__ == "__main__":  # pragma: no cover
    main()
