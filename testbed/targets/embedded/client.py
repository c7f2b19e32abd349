"""Control client of the embedded switch, with the contract's method names.

Every method of ``contract.SwitchAPI`` (and ``port_stats``) is one JSON-lines
request to the switch's loopback control port; the names come from the
contract, so this client never lists them again.
"""
from __future__ import annotations

import json
import socket
from typing import Any, Optional

from testbed.emulation import netns
from testbed.targets.embedded.server import SERVED


class ControlError(RuntimeError):
    pass


class EmbeddedAPI:
    """Control client for the embedded switch, with p4-utils' method names."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0,
                 netns_path: Optional[str] = None):
        """``netns_path``: the switch's network namespace, where its loopback control port is."""
        if netns_path is not None:
            self.sock = netns.connect(netns_path, port, timeout)
        else:
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

    def __getattr__(self, method: str):
        if method not in SERVED:
            raise AttributeError(f"the embedded switch serves no method {method!r}")
        decode = _DECODE.get(method, lambda result: result)
        return lambda *args: decode(self._call(method, *args))


#: Results that JSON cannot carry as they are: integer dict keys and tuples.
_DECODE = {
    "mc_dump": lambda dump: {int(g): [(rid, ports) for rid, ports in nodes] for g, nodes in dump.items()},
    "counter_read": tuple,
}
