"""Shared fixtures.  Tests live in two folders, selectable by marker:

- ``tests/unit``: no root, no network, no external tools (marker ``unit``);
- ``tests/integration``: Mininet, bmv2, Spark, veth pairs (marker
  ``integration``, plus ``mininet``/``bmv2``/``spark`` for what they need);
  each skips with its reason where what it needs is missing.

``pytest -m unit`` runs the fast half; ``pytest tests/integration`` the other.

``make test`` runs the suite on two pytest-xdist workers with ``--dist
loadgroup``: every integration test is in one ``xdist_group``, so they run one
at a time on one worker, as they always did (they share the root's network
namespaces, bmv2's ports and ``build/``), while the unit tests take the other.
An integration module that shares none of that (no root, no namespace, no
fixed port, nothing under ``build/``) says so with ``BESIDE_THE_OTHERS =
True`` and runs outside the group, beside the others, like a unit test.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import topologies
from testbed.rundir import RunDir

TESTS = Path(__file__).resolve().parent
#: The xdist group of every integration test: under ``--dist loadgroup`` one worker runs them all, in turn.
INTEGRATION_GROUP = "integration"


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        if folder == "integration":
            item.add_marker(pytest.mark.integration)
            if not getattr(getattr(item, "module", None), "BESIDE_THE_OTHERS", False):
                item.add_marker(pytest.mark.xdist_group(INTEGRATION_GROUP))
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch) -> Path:
    """Each test's runs record their processes in a state directory of its own
    (``TESTBED_STATE_DIR``), so a test sees only what its own runs left behind."""
    folder = tmp_path / "testbed-state"
    monkeypatch.setenv("TESTBED_STATE_DIR", str(folder))
    return folder


@pytest.fixture
def topo():
    """The topology builders (``tests/support/topologies.py``)."""
    return topologies


@pytest.fixture
def rundir(tmp_path) -> RunDir:
    """An empty run directory with its folders."""
    return RunDir(tmp_path / "run").create()


@pytest.fixture(scope="module")
def veth_rig(request):
    """Veth pairs for a switch outside Mininet; the module sets ``VETH_PORTS`` (default 8)."""
    from support.veth import VethRig

    if os.geteuid() != 0:
        pytest.skip("veth pairs need root")
    rig = VethRig(getattr(request.module, "VETH_PORTS", 8))
    try:
        rig.create()
        yield rig
    finally:
        rig.delete()
