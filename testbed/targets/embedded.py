"""The embedded software target: the splitter pipeline model on real interfaces.

It exists for machines without p4c and bmv2.  The switch process forwards
frames between its interfaces over AF_PACKET sockets, running
``SplitterPipeline`` on each frame, and serves the control API (p4-utils'
method names) as JSON lines on a loopback TCP port.  ``EmbeddedSwitch`` is
the Mininet node that starts it; ``EmbeddedAPI`` is the control client.

Run by hand: ``python -m testbed.targets.embedded --control-port 9090 -i 1@veth0 -i 2@veth1``.
"""
from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, Optional

from ..pipeline import SplitterPipeline
from .base import SplitterSwitch

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SOCKET_BUFFER = 16 << 20
#: Control methods a client may call; anything else is refused.
CONTROL_METHODS = frozenset({
    "table_add", "table_delete", "table_clear", "table_entries",
    "mc_mgrp_create", "mc_node_create", "mc_node_associate", "mc_dump",
    "register_read", "register_write", "register_reset",
    "counter_read", "counter_reset", "port_stats",
})


class EmbeddedDataPlane:
    """Frames in, pipeline, frames out: one AF_PACKET socket per port."""

    def __init__(self, pipeline: SplitterPipeline, ports: dict[int, str]):
        self.pipeline = pipeline
        self.lock = threading.Lock()
        self.sockets: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        for port, intf in ports.items():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            # Big buffers: the run accounts for every frame, so bursts must not
            # overflow silently; PACKET_STATISTICS reports any that still do.
            s.setsockopt(socket.SOL_SOCKET, 33, SOCKET_BUFFER)   # SO_RCVBUFFORCE
            s.setsockopt(socket.SOL_SOCKET, 32, SOCKET_BUFFER)   # SO_SNDBUFFORCE
            s.bind((intf, 0))
            s.setblocking(False)
            self.sockets[port] = s
            self.selector.register(s, selectors.EVENT_READ, port)
        self.rx_dropped = {port: 0 for port in ports}
        self.tx_errors = {port: 0 for port in ports}
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            for key, _ in self.selector.select(timeout=0.2):
                self._drain(key.fileobj, key.data)

    def _drain(self, sock: socket.socket, port: int) -> None:
        """Take what the port has queued (bounded, so one busy port cannot
        starve the others), run it through the pipeline under one hold of the
        control lock, then send the copies."""
        frames = []
        for _ in range(256):
            try:
                frame, addr = sock.recvfrom(65535)
            except BlockingIOError:
                break
            if addr[2] != PACKET_OUTGOING:
                frames.append(frame)
        if not frames:
            return
        process = self.pipeline.process
        with self.lock:
            out = [copy for frame in frames for copy in process(frame)]
        for egress, data in out:
            try:
                self.sockets[egress].send(data)
            except (KeyError, OSError):
                self.tx_errors[egress] = self.tx_errors.get(egress, 0) + 1

    def port_stats(self) -> dict[str, dict[str, int]]:
        """Kernel-side socket drops per port (read-and-reset by the kernel, so summed here)."""
        for port, s in self.sockets.items():
            raw = s.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
            _packets, drops = struct.unpack("II", raw)
            self.rx_dropped[port] += drops
        return {str(p): {"rx_dropped": self.rx_dropped[p], "tx_errors": self.tx_errors.get(p, 0)}
                for p in self.sockets}


class ControlServer:
    """JSON-lines RPC on a loopback port, one request per line."""

    def __init__(self, dataplane: EmbeddedDataPlane, port: int):
        self.dataplane = dataplane
        self.server = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as f:
            for line in f:
                try:
                    req = json.loads(line)
                    method = req["method"]
                    if method not in CONTROL_METHODS:
                        raise ValueError(f"unknown control method {method!r}")
                    with self.dataplane.lock:
                        if method == "port_stats":
                            result = self.dataplane.port_stats()
                        else:
                            result = getattr(self.dataplane.pipeline, method)(*req.get("args", []))
                    reply = {"result": _jsonable(result)}
                except Exception as err:  # reported to the client, the switch keeps running
                    reply = {"error": f"{type(err).__name__}: {err}"}
                f.write(json.dumps(reply).encode() + b"\n")
                f.flush()


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


class ControlError(RuntimeError):
    pass


class EmbeddedAPI:
    """Control client for the embedded switch, with p4-utils' method names."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rwb")

    def _call(self, method: str, *args: Any) -> Any:
        self.file.write(json.dumps({"method": method, "args": list(args)}).encode() + b"\n")
        self.file.flush()
        line = self.file.readline()
        if not line:
            raise ControlError(f"{method}: switch closed the control connection")
        reply = json.loads(line)
        if "error" in reply:
            raise ControlError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def table_add(self, table, action, match_keys, action_params=()):
        return self._call("table_add", table, action, list(match_keys), list(action_params))

    def table_delete(self, table, handle):
        return self._call("table_delete", table, handle)

    def table_clear(self, table):
        return self._call("table_clear", table)

    def table_entries(self, table):
        return self._call("table_entries", table)

    def mc_mgrp_create(self, mgid):
        return self._call("mc_mgrp_create", mgid)

    def mc_node_create(self, rid, ports):
        return self._call("mc_node_create", rid, list(ports))

    def mc_node_associate(self, mgid, handle):
        return self._call("mc_node_associate", mgid, handle)

    def mc_dump(self):
        return {int(g): [(rid, ports) for rid, ports in nodes]
                for g, nodes in self._call("mc_dump").items()}

    def register_read(self, name, index=None):
        return self._call("register_read", name, index)

    def register_write(self, name, index, value):
        return self._call("register_write", name, index, value)

    def register_reset(self, name):
        return self._call("register_reset", name)

    def counter_read(self, name, index):
        return tuple(self._call("counter_read", name, index))

    def counter_reset(self, name):
        return self._call("counter_reset", name)

    def port_stats(self):
        return self._call("port_stats")


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
        return {"embedded": "testbed pipeline model (testbed/pipeline.py)"}


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--control-port", type=int, required=True)
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@INTF")
    args = ap.parse_args(argv)
    ports = {}
    for spec in args.interface:
        port, _, intf = spec.partition("@")
        ports[int(port)] = intf
    dataplane = EmbeddedDataPlane(SplitterPipeline(), ports)
    server = ControlServer(dataplane, args.control_port)

    def _stop(signum, frame):
        dataplane.stopping = True
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server.start()
    print(f"embedded splitter: ports {ports}, control on 127.0.0.1:{args.control_port}, pid {os.getpid()}",
          flush=True)
    dataplane.run()
    print(f"embedded splitter: stopped at {time.strftime('%H:%M:%S')}; port stats {dataplane.port_stats()}",
          flush=True)


if __name__ == "__main__":
    main()
