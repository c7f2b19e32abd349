"""The ``simple_switch`` process: its command line, and a switch outside Mininet.

``simple_switch_command`` is shared by the Mininet node and by
``Bmv2Process``, which runs a switch on interfaces that already exist (tests,
benchmarks).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from testbed.emulation import netns
from testbed.emulation.procs import register_path
from testbed.rundir import RunDir
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.client import Bmv2API
from testbed.targets.process import SwitchNotReady, SwitchProcess

#: bmv2 log verbosity in the run directory: warnings and errors only, so the
#: log costs nothing per packet but still shows what went wrong.
DEFAULT_LOG_LEVEL = "warn"
#: Longest path a Unix socket (the notifications IPC) may have, minus slack.
MAX_IPC_PATH = 100
#: The one table of ``p4/baseline/forward.p4`` and its action.
FORWARD_TABLE, FORWARD_ACTION = "forward", "to_port"
#: Offloads that make libpcap size every slot of its receive ring for a 64 KiB
#: packet.  simple_switch reads each port through a 2 MB ring in immediate mode
#: (TPACKET_V2): with these on (a veth's default) the ring holds 32 frames, so a
#: receive thread kept off the CPU for 21 ms at 1,500 frames/s loses frames
#: before the pipeline sees them.  With them off, each slot fits the MTU, and
#: the ring holds about a thousand.  p4lang's own veth_setup.sh turns them off too.
PCAP_SIZING_OFFLOADS = ("tso", "gso", "gro")


def frame_sized_rings(ports: dict[int, str], offloads: str = "off") -> list[list[str]]:
    """The ``ethtool`` commands that let libpcap size each port's ring by its MTU
    (``offloads="on"``: a new veth's settings, with rings of 32 frames)."""
    switched = [word for feature in PCAP_SIZING_OFFLOADS for word in (feature, offloads)]
    return [["ethtool", "-K", intf, *switched] for _port, intf in sorted(ports.items())]


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


class Bmv2Process(SwitchProcess):
    """A ``simple_switch`` outside Mininet, on interfaces that already exist.

    For tests and experiments: ``start()`` compiles the program if needed
    and returns once the Thrift port listens; ``stop()`` ends the process.
    With ``forward`` it runs ``p4/baseline/forward.p4`` instead of the
    splitter and fills its one table.
    """

    target = "bmv2"

    def __init__(self, ports: dict[int, str], run_dir: Path, name: str = "bmv2",
                 thrift_port: Optional[int] = None, device_id: int = 0,
                 log_level: str = DEFAULT_LOG_LEVEL, json_path: Optional[Path] = None,
                 namespace: Optional[netns.NamedNamespace] = None,
                 forward: Optional[dict[int, int]] = None, batches: bool = False, cep: bool = False,
                 changes: bool = True, cpus: Optional[frozenset[int]] = None):
        super().__init__(ports, run_dir, name, thrift_port, namespace, forward, cep, changes, cpus)
        self.device_id = device_id
        self.batches = batches
        self.log_level = log_level
        self.json_path = Path(json_path) if json_path else None

    @property
    def thrift_port(self) -> int:
        return self.control_port

    @classmethod
    def available(cls) -> Optional[str]:
        return toolchain.toolchain_missing()

    def command(self) -> list[str]:
        program = (toolchain.FORWARD_PROGRAM if self.forward
                   else toolchain.splitter_program(self.batches, self.cep, self.changes))
        self.json_path = self.json_path or toolchain.compile_program(program=program)
        return simple_switch_command(self.json_path, self.ports, self.control_port, self.rundir,
                                     self.name, self.device_id, self.log_level)

    def port_setup(self) -> list[list[str]]:
        return frame_sized_rings(self.ports)

    def configure(self) -> None:
        if not self.forward:
            return
        with self.api() as api:
            for ingress, egress in sorted(self.forward.items()):
                api.table_add(FORWARD_TABLE, FORWARD_ACTION, [ingress], [egress])

    def api(self) -> Bmv2API:
        return Bmv2API(self.control_port, self.json_path, netns_path=self.netns_path)
