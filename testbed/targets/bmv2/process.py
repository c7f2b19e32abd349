"""The ``simple_switch`` process: its command line, and a switch outside Mininet.

``simple_switch_command`` is shared by the Mininet node and by
``Bmv2Process``, which runs a switch on interfaces that already exist (tests,
benchmarks).
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

from testbed.emulation import netns
from testbed.emulation.ports import free_loopback_port, port_listening
from testbed.emulation.procs import register_path, spawn, stop_group, wait_ready
from testbed.runs.rundir import RunDir
from testbed.targets.base import SwitchNotReady
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.client import Bmv2API

#: bmv2 log verbosity in the run directory: warnings and errors only, so the
#: log costs nothing per packet but still shows what went wrong.
DEFAULT_LOG_LEVEL = "warn"
#: Longest path a Unix socket (the notifications IPC) may have, minus slack.
MAX_IPC_PATH = 100


def notifications_address(rundir: RunDir, name: str) -> str:
    """Where simple_switch puts its nanomsg notifications socket.

    Its default, ``/tmp/bmv2-<device-id>-notifications.ipc``, is shared by
    every switch with the same device id; this one lives in the run
    directory, or in a private temporary file when that path is too long
    for a Unix socket (registered for ``testbed clean``).
    """
    path = rundir.bmv2_notifications(name)
    if len(str(path)) > MAX_IPC_PATH:
        fd, tmp = tempfile.mkstemp(prefix=f"bmv2-{name}-", suffix=".ipc")
        os.close(fd)
        os.unlink(tmp)
        register_path(tmp)
        path = Path(tmp)
    return f"ipc://{path}"


def simple_switch_command(json_path: Path, ports: dict[int, str], thrift_port: int, rundir: RunDir,
                          name: str, device_id: int = 0, log_level: str = DEFAULT_LOG_LEVEL) -> list[str]:
    """The ``simple_switch`` command line for one switch.

    bmv2's log goes to ``rundir.bmv2_log(name)`` at ``log_level``
    (bmv2 levels: trace, debug, info, warn, error, off); nothing is logged
    to the console.
    """
    switch = toolchain.find_tool(toolchain.SWITCH)
    if switch is None:
        raise SwitchNotReady(toolchain.toolchain_missing() or "simple_switch not found")
    cmd = [switch, "--device-id", str(device_id), "--thrift-port", str(thrift_port),
           "--log-file", str(rundir.bmv2_log(name).with_suffix("")), "--log-level", log_level,
           "--notifications-addr", notifications_address(rundir, name)]
    for port, intf in sorted(ports.items()):
        cmd += ["-i", f"{port}@{intf}"]
    cmd.append(str(json_path))
    return cmd


class Bmv2Process:
    """A ``simple_switch`` outside Mininet, on interfaces that already exist.

    For tests and benchmarks: ``start()`` compiles the program if needed and
    returns once the Thrift port listens; ``stop()`` ends the process.
    """

    def __init__(self, ports: dict[int, str], run_dir: Path, name: str = "bmv2",
                 thrift_port: Optional[int] = None, device_id: int = 0,
                 log_level: str = DEFAULT_LOG_LEVEL, json_path: Optional[Path] = None,
                 namespace: Optional[netns.NamedNamespace] = None):
        """``namespace`` holds the port interfaces; the switch runs in it so
        that its Thrift server is reachable only there, over loopback."""
        self.namespace = namespace
        self.ports = dict(ports)
        self.rundir = RunDir(run_dir)
        self.name = name
        self.thrift_port = thrift_port or free_loopback_port()
        self.device_id = device_id
        self.log_level = log_level
        self.json_path = Path(json_path) if json_path else None
        self.proc: Optional[subprocess.Popen] = None
        self.console_log = self.rundir.switch_log(name)

    def start(self, timeout: float = 30.0) -> "Bmv2Process":
        self.json_path = self.json_path or toolchain.compile_program()
        self.rundir.logs.mkdir(parents=True, exist_ok=True)
        cmd = simple_switch_command(self.json_path, self.ports, self.thrift_port, self.rundir,
                                    self.name, self.device_id, self.log_level)
        if self.namespace is not None:
            cmd = self.namespace.prefix() + cmd
        self.proc = spawn(cmd, self.console_log, f"bmv2 {self.name}", start_new_session=True)
        try:
            wait_ready(self.proc, self._listening, f"simple_switch (Thrift port {self.thrift_port})",
                       timeout, self.console_log, SwitchNotReady)
        except SwitchNotReady:
            self.stop()
            raise
        return self

    def _listening(self) -> bool:
        if self.namespace is not None:
            return netns.listening(self.namespace.path, self.thrift_port)
        return port_listening(self.thrift_port)

    def api(self) -> Bmv2API:
        return Bmv2API(self.thrift_port, self.json_path,
                       netns_path=self.namespace.path if self.namespace else None)

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> "Bmv2Process":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
