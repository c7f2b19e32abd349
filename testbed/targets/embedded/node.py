"""The Mininet node that starts the embedded switch process."""
from __future__ import annotations

import sys

from testbed.targets.base import SplitterSwitch
from testbed.targets.embedded.client import EmbeddedAPI


class EmbeddedSwitch(SplitterSwitch):
    """Mininet node running the embedded splitter process."""

    target = "model"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "testbed.targets.embedded", "--control-port", str(self.control_port)]
        for port, intf in sorted(self.port_map().items()):
            cmd += ["-i", f"{port}@{intf}"]
        return cmd

    def control_api(self) -> EmbeddedAPI:
        return EmbeddedAPI(self.control_port, netns_path=self.netns_path)

    def versions(self) -> dict[str, str]:
        return {"embedded": "testbed pipeline model (testbed/pipeline.py)"}
