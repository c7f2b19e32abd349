"""The Thrift client the bmv2 target talks through imports in this environment.

Debian 12's python3-thrift imports ``six`` without depending on it (issue 48):
on a machine without python3-six every call to bmv2 failed with
``No module named 'six'``, and nothing showed it where bmv2 was absent.  This
test needs no bmv2: it imports the Thrift modules the project uses, and where
bmv2's own generated Python modules are installed, those too.
"""
from __future__ import annotations

import importlib

import pytest

from testbed.targets.bmv2 import toolchain

USED = ["thrift.protocol.TBinaryProtocol", "thrift.protocol.TMultiplexedProtocol",
        "thrift.transport.TSocket", "thrift.transport.TTransport"]


@pytest.mark.parametrize("module", USED)
def test_the_thrift_modules_the_client_uses_import(module):
    imported = importlib.import_module(module)
    assert imported.__name__ == module


def test_bmv2s_generated_client_modules_import_where_installed():
    if toolchain.bmv2_python_path() is None:
        pytest.skip(f"bmv2's Python modules are not installed (looked under {toolchain.prefix() / 'lib'})")
    from testbed.targets.bmv2.client import _thrift_modules

    modules = _thrift_modules()
    assert {"Standard", "SimplePreLAG", "SimpleSwitch", "TSocket", "TBinaryProtocol"} <= set(modules)
    assert hasattr(modules["Standard"], "Client")
