"""The embedded switch process: data plane plus a JSON-lines control server.

Run by hand: ``python -m testbed.targets.embedded --control-port 9090 -i 1@veth0 -i 2@veth1``;
``--forward 1:2`` makes it the plain forwarding baseline instead of the splitter.
The control server listens on loopback only and serves the contract's
methods (``contract.CONTROL_METHODS``) plus ``port_stats``, one request per
line: ``{"method": ..., "args": [...]}`` -> ``{"result": ...}`` or ``{"error": ...}``.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import threading
import time
from typing import Any, Optional

from testbed.dataplane.contract import CONTROL_METHODS
from testbed.dataplane.model import SplitterPipeline
from testbed.targets.embedded.dataplane import EmbeddedDataPlane

#: What this target serves beyond the contract: the kernel's drop counts of
#: its AF_PACKET sockets, for the run's accounting.
EXTRA_METHODS = ("port_stats",)
SERVED = frozenset(CONTROL_METHODS + EXTRA_METHODS)


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
                    if method not in SERVED:
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


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--control-port", type=int, required=True)
    ap.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@INTF")
    ap.add_argument("--forward", action="append", default=[], metavar="IN:OUT",
                    help="plain forwarding baseline: frames from port IN leave on port OUT unchanged, "
                         "bypassing the splitter pipeline (repeatable)")
    args = ap.parse_args(argv)
    ports = {}
    for spec in args.interface:
        port, _, intf = spec.partition("@")
        ports[int(port)] = intf
    forward = None
    if args.forward:
        forward = {int(a): int(b) for a, _, b in (spec.partition(":") for spec in args.forward)}
        unknown = sorted(p for p in [*forward, *forward.values()] if p not in ports)
        if unknown:
            ap.error(f"--forward: port {unknown[0]} has no interface (-i)")
    dataplane = EmbeddedDataPlane(SplitterPipeline(), ports, forward)
    server = ControlServer(dataplane, args.control_port)

    def _stop(signum, frame):
        dataplane.stopping = True
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server.start()
    mode = f"forwarding {forward}" if forward else "splitter"
    print(f"embedded {mode}: ports {ports}, control on 127.0.0.1:{args.control_port}, pid {os.getpid()}",
          flush=True)
    dataplane.run()
    print(f"embedded splitter: stopped at {time.strftime('%H:%M:%S')}; port stats {dataplane.port_stats()}",
          flush=True)


if __name__ == "__main__":
    main()
