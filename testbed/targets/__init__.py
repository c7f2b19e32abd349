"""Splitter targets: the switch programs that run the splitter plan.

Each target is a Mininet switch node class (``SplitterSwitch``) plus a
control client with p4-utils' method names.  ``model`` is the embedded
software switch (``testbed.targets.embedded``); ``bmv2`` runs the P4 program
on ``simple_switch`` (``testbed.targets.bmv2``).
"""
from __future__ import annotations

import importlib

TARGETS = {
    "model": "testbed.targets.embedded.node:EmbeddedSwitch",
    "bmv2": "testbed.targets.bmv2.node:Bmv2Switch",
}


def switch_class(target: str):
    """The Mininet switch class of a target, imported on demand."""
    try:
        module, cls = TARGETS[target].split(":")
    except KeyError:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}") from None
    return getattr(importlib.import_module(module), cls)
