"""The embedded switch process: its command line, and a switch outside Mininet.

``embedded_command`` is shared by the Mininet node and by
``EmbeddedProcess`` (a ``SwitchProcess``), which runs the switch on
interfaces that already exist, or none, like ``Bmv2Process`` does for bmv2.
"""
from __future__ import annotations

import sys
from typing import Optional

from testbed.targets.embedded.client import EmbeddedAPI
from testbed.targets.process import SwitchProcess


def embedded_command(ports: dict[int, str], control_port: int,
                     forward: Optional[dict[int, int]] = None) -> list[str]:
    """``python -m testbed.targets.embedded`` on ``ports``; ``forward`` runs the
    plain forwarding baseline instead of the splitter."""
    cmd = [sys.executable, "-m", "testbed.targets.embedded", "--control-port", str(control_port)]
    for port, intf in sorted(ports.items()):
        cmd += ["-i", f"{port}@{intf}"]
    for ingress, egress in sorted((forward or {}).items()):
        cmd += ["--forward", f"{ingress}:{egress}"]
    return cmd


class EmbeddedProcess(SwitchProcess):
    """The embedded switch on existing interfaces (in ``namespace``, when
    given); with no ports it still serves the whole control API, which is
    all the control-plane experiments need."""

    target = "model"

    def command(self) -> list[str]:
        return embedded_command(self.ports, self.control_port, self.forward)

    def api(self) -> EmbeddedAPI:
        return EmbeddedAPI(self.control_port, netns_path=self.netns_path)
