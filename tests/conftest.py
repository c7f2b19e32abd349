"""Shared fixtures.  Tests live in two folders, selectable by marker:

- ``tests/unit``: no root, no network, no external tools (marker ``unit``);
- ``tests/integration``: Mininet, bmv2, Spark, veth pairs (marker
  ``integration``, plus ``mininet``/``bmv2``/``spark`` for what they need);
  each skips with its reason where what it needs is missing.

``pytest -m unit`` runs the fast half; ``pytest tests/integration`` the other.

``make test`` runs the suite on two pytest-xdist workers, scheduled by
``pytest_xdist_make_scheduler`` below: every integration test is in one
scope, so they run one at a time on one worker, as they always did (Mininet
runs share the root's network namespace, its names and ports), while the
unit tests take the other.  An integration module that shares none of that
(no Mininet, no fixed port in the root namespace, no name another process
may take, nothing under ``build/`` written but under its lock) says so with
a line ``BESIDE_THE_OTHERS = True`` and runs beside the others, like a unit
test: ``test_spark.py`` and ``test_bmv2.py`` do.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from support import topologies
from testbed.rundir import RunDir

TESTS = Path(__file__).resolve().parent
#: The one scope every integration test shares under ``make test``'s scheduler.
INTEGRATION_SCOPE = "integration"
BESIDE = "BESIDE_THE_OTHERS = True"


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        item.add_marker(pytest.mark.integration if folder == "integration" else pytest.mark.unit)


@functools.cache
def runs_beside_the_others(module: str) -> bool:
    """The module says ``BESIDE_THE_OTHERS = True`` on a line of its own."""
    try:
        return BESIDE in (TESTS.parent / module).read_text().splitlines()
    except OSError:
        return False


def scope_of(nodeid: str) -> str:
    """The scope the scheduler keeps on one worker, in turn: all integration tests
    but those that run beside the others share one; any other test is its own."""
    module = nodeid.split("::", 1)[0]
    if module.startswith("tests/integration/") and not runs_beside_the_others(module):
        return INTEGRATION_SCOPE
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's own grouping (``--dist loadgroup``) does not work under
    pytest 9, whose node ids no longer take the group xdist appends to them,
    and the integration tests ran two at a time; this scheduler groups by the
    node id's module itself."""
    from xdist.scheduler import LoadScopeScheduling

    class IntegrationInTurn(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return IntegrationInTurn(config, log)


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
