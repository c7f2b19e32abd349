"""The embedded switch as a process outside Mininet (``SwitchProcess``)."""
from __future__ import annotations

import sys

from testbed.targets.embedded.client import EmbeddedAPI
from testbed.targets.process import SwitchProcess


class EmbeddedProcess(SwitchProcess):
    """``python -m testbed.targets.embedded`` on the given ports; with no
    ports it still serves the whole control API, which is all the control
    plane experiments need."""

    target = "model"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "testbed.targets.embedded", "--control-port", str(self.control_port)]
        for port, intf in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{intf}"]
        for ingress, egress in sorted((self.forward or {}).items()):
            cmd += ["--forward", f"{ingress}:{egress}"]
        return cmd

    def api(self) -> EmbeddedAPI:
        return EmbeddedAPI(self.control_port, netns_path=self.netns_path)
