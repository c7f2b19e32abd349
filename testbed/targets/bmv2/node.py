"""The Mininet node that runs the splitter on bmv2's ``simple_switch``."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Optional

from testbed.targets.base import SplitterSwitch
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.client import Bmv2API
from testbed.targets.bmv2.process import DEFAULT_LOG_LEVEL, frame_sized_rings, simple_switch_command


class Bmv2Switch(SplitterSwitch):
    """Mininet switch node running the splitter on bmv2's ``simple_switch``.

    Extra parameters: ``json_path`` (default: compile ``p4/splitter.p4``,
    ``p4/splitter_batches.p4`` for a topology with batches, or
    ``p4/splitter_fixed.p4`` for one in which no stream changes, into
    ``build/``) and ``log_level`` (default ``warn``).  bmv2's log goes to
    ``logs/<name>.bmv2.txt``, the process's own output to
    ``logs/<name>.log``.
    """

    target = "bmv2"

    def __init__(self, name: str, run_dir: str, json_path: Optional[str] = None,
                 log_level: str = DEFAULT_LOG_LEVEL, **kwargs: Any):
        # In a namespace of its own (as every SplitterSwitch): simple_switch's
        # Thrift server binds every interface, and there the only address is loopback's.
        super().__init__(name, run_dir, **kwargs)
        self.json_path = Path(json_path) if json_path else None
        self.log_level = log_level

    @classmethod
    def available(cls) -> Optional[str]:
        return toolchain.toolchain_missing()

    def command(self) -> list[str]:
        self.json_path = self.json_path or toolchain.compile_program(
            program=toolchain.splitter_program(self.batches, self.cep, self.changes))
        return simple_switch_command(self.json_path, self.port_map(), self.control_port,
                                     self.rundir, self.name, self.device_id, self.log_level)

    def port_setup(self) -> list[list[str]]:
        return frame_sized_rings(self.port_map())

    def versions(self) -> dict[str, str]:
        found = toolchain.versions()
        # Which build ran (batches, the CEP stage, without changes) is part of what ran.
        program = {"p4_program": self.json_path.name} if self.json_path else {}
        return {"simple_switch": found["simple_switch"], "p4c": found["p4c"], **program}

    def control_api(self) -> Bmv2API:
        return Bmv2API(self.control_port, self.json_path, netns_path=self.netns_path)

    def attach_info(self) -> dict[str, Any]:
        return {**super().attach_info(), "program": str(self.json_path)}

    @classmethod
    def attach(cls, info: dict[str, Any]) -> int:
        """bmv2's own ``simple_switch_CLI``, started inside the switch's namespace
        (``nsenter``), where the Thrift port listens on loopback."""
        cli = toolchain.find_tool(toolchain.SWITCH_CLI)
        if cli is None:
            raise FileNotFoundError(f"{toolchain.SWITCH_CLI} not found on PATH or in "
                                    f"${toolchain.PREFIX_VAR}/bin ({toolchain.prefix() / 'bin'})")
        env = dict(os.environ)
        modules = toolchain.bmv2_python_path()
        if modules:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [modules, env.get("PYTHONPATH")]))
        cmd = ["nsenter", f"--net={info['netns']}", "--", cli, "--thrift-ip", "127.0.0.1",
               "--thrift-port", str(info["control_port"]), "--json", info["program"]]
        return subprocess.call(cmd, env=env)
