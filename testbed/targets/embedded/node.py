"""The Mininet node that starts the embedded switch process."""
from __future__ import annotations

import sys
from typing import Any

from testbed.dataplane.runtime_cli import RuntimeCLI
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
        return EmbeddedAPI(self.control_port)

    def versions(self) -> dict[str, str]:
        return {"embedded": "testbed pipeline model (testbed/dataplane/model.py)"}

    @classmethod
    def attach(cls, info: dict[str, Any]) -> int:
        """simple_switch_CLI's commands (``RuntimeCLI``) over the control port, on loopback."""
        api = EmbeddedAPI(info["control_port"])
        try:
            RuntimeCLI(api).cmdloop()
        finally:
            api.close()
        return 0
