"""The embedded switch process: its command line, and a switch outside Mininet.

``embedded_command`` is shared by the Mininet node and by
``EmbeddedProcess``, which runs the switch on interfaces that already exist
(tests, benchmarks), like ``Bmv2Process`` does for bmv2.
"""
from __future__ import annotations

import sys

from testbed.targets.embedded.client import EmbeddedAPI
from testbed.targets.process import SwitchProcess


def embedded_command(ports: dict[int, str], control_port: int) -> list[str]:
    cmd = [sys.executable, "-m", "testbed.targets.embedded", "--control-port", str(control_port)]
    for port, intf in sorted(ports.items()):
        cmd += ["-i", f"{port}@{intf}"]
    return cmd


class EmbeddedProcess(SwitchProcess):
    """The embedded switch on existing interfaces (in ``namespace``, when given)."""

    what = "embedded switch"

    def command(self) -> list[str]:
        return embedded_command(self.ports, self.control_port)

    def api(self) -> EmbeddedAPI:
        return EmbeddedAPI(self.control_port, netns_path=self.netns_path)
