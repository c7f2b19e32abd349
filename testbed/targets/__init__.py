"""Splitter targets: the switch programs that run the splitter plan.

Each target is a Mininet switch node class (``SplitterSwitch``), a process
class for a switch outside Mininet (``SwitchProcess``), and a control client
with p4-utils' method names.  ``model`` is the embedded software switch
(``testbed.targets.embedded``); ``bmv2`` runs the P4 program on
``simple_switch`` (``testbed.targets.bmv2``).
"""
from __future__ import annotations

import importlib

TARGETS = {
    "model": "testbed.targets.embedded.node:EmbeddedSwitch",
    "bmv2": "testbed.targets.bmv2.node:Bmv2Switch",
}

PROCESSES = {
    "model": "testbed.targets.embedded.process:EmbeddedProcess",
    "bmv2": "testbed.targets.bmv2.process:Bmv2Process",
}


def _load(registry: dict[str, str], target: str):
    try:
        module, cls = registry[target].split(":")
    except KeyError:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(registry)}") from None
    return getattr(importlib.import_module(module), cls)


def switch_class(target: str):
    """The Mininet switch class of a target, imported on demand."""
    return _load(TARGETS, target)


def switch_process(target: str):
    """The class of a target's switch outside Mininet (``SwitchProcess``)."""
    return _load(PROCESSES, target)
