"""Network namespaces, so a server can only be reached over its own loopback.

bmv2's Thrift server binds every interface (``TServerSocket(port)``, no host
option).  The testbed therefore runs ``simple_switch`` in a namespace of its
own, where the only addresses are on ``lo`` (the switch ports carry no IP
addresses), and connects to it by creating the client socket inside that
namespace with ``setns(2)``.  A socket keeps the namespace it was created
in, so the rest of the process stays where it was.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


@contextmanager
def entered(ns_path: str) -> Iterator[None]:
    """Run the body with this thread inside the network namespace at ``ns_path``
    (``/proc/<pid>/ns/net`` or ``/run/netns/<name>``)."""
    with open("/proc/thread-self/ns/net") as own, open(ns_path) as target:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({ns_path}): {os.strerror(err)}")
        try:
            yield
        finally:
            if _libc.setns(own.fileno(), CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"cannot return to the original network namespace: {os.strerror(err)}")


def connect(ns_path: str, port: int, timeout: float = 10.0) -> socket.socket:
    """A TCP connection to ``127.0.0.1:port`` inside the namespace."""
    with entered(ns_path):
        return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def listening(ns_path: str, port: int) -> bool:
    try:
        connect(ns_path, port, timeout=0.2).close()
        return True
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.EPERM):
            raise
        return False


class NamedNamespace:
    """A namespace made with ``ip netns add``, for switches started outside Mininet."""

    def __init__(self, name: str):
        self.name = name
        self.path = f"/run/netns/{name}"

    def create(self) -> "NamedNamespace":
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)   # left by a crash
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True)
        self.run("ip", "link", "set", "lo", "up")
        return self

    def run(self, *cmd: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.name, *cmd], check=True, capture_output=True)

    def prefix(self) -> list[str]:
        """Command prefix that starts a program inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def adopt(self, intf: str) -> None:
        """Move an interface into the namespace and bring it up there, IPv6 off."""
        subprocess.run(["ip", "link", "set", intf, "netns", self.name], check=True, capture_output=True)
        self.run("sysctl", "-qw", f"net.ipv6.conf.{intf}.disable_ipv6=1")
        self.run("ip", "link", "set", intf, "up")

    def delete(self) -> None:
        if Path(self.path).exists():
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
