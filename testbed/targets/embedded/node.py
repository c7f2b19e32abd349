"""The Mininet node that starts the embedded switch process."""
from __future__ import annotations

from typing import Any

from testbed.dataplane.runtime_cli import RuntimeCLI
from testbed.targets.base import SplitterSwitch
from testbed.targets.embedded.client import EmbeddedAPI
from testbed.targets.embedded.process import embedded_command


class EmbeddedSwitch(SplitterSwitch):
    """Mininet node running the embedded splitter process."""

    target = "model"

    def command(self) -> list[str]:
        return embedded_command(self.port_map(), self.control_port)

    def control_api(self) -> EmbeddedAPI:
        return EmbeddedAPI(self.control_port, netns_path=self.netns_path)

    def versions(self) -> dict[str, str]:
        return {"embedded": "testbed pipeline model (testbed/dataplane/model/)"}

    @classmethod
    def attach(cls, info: dict[str, Any]) -> int:
        """simple_switch_CLI's commands (``RuntimeCLI``) over the control port,
        on the loopback of the switch's namespace."""
        api = EmbeddedAPI(info["control_port"], netns_path=info.get("netns"))
        try:
            RuntimeCLI(api).cmdloop()
        finally:
            api.close()
        return 0
