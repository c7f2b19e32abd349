"""Drop counters along an event's path, read from the kernel at the end of the stream.

An event goes from the source's socket out of the source host's veth end,
into the switch's end of the same veth, into the switch's packet socket, and
back out the same way to an operator's UDP socket.  Each hop has a counter
of what it dropped: ``ip -s link`` gives both veth ends' ``dropped`` and
``errors``, ``ss -0 -m`` gives a packet socket's ``skmem`` drops (for bmv2's
libpcap sockets as for the embedded switch's own), and the receivers count
their UDP socket's ``RcvbufErrors``.  The counters count frames of every
kind (heartbeats too), so the accounting takes them as upper bounds when it
says where a stream's events were lost.
"""
from __future__ import annotations

import json
import re

#: ``*:<interface>`` in ss's local address column, and the process and drops of the line.
_SS_LOCAL = re.compile(r"\*:(?P<intf>\S+)")
_SS_PID = re.compile(r"pid=(?P<pid>\d+)")
_SS_DROPS = re.compile(r"skmem:\([^)]*\bd(?P<drops>\d+)\)")


def interface_counters(ip_json: str) -> dict[str, dict[str, int]]:
    """Per interface, what ``ip -s -j link show`` says it sent, received, dropped and failed."""
    out = {}
    for link in json.loads(ip_json or "[]"):
        stats = link.get("stats64") or link.get("stats") or {}
        rx, tx = stats.get("rx", {}), stats.get("tx", {})
        out[link["ifname"].split("@")[0]] = {
            "rx_packets": int(rx.get("packets", 0)), "rx_dropped": int(rx.get("dropped", 0)),
            "rx_errors": int(rx.get("errors", 0)), "tx_packets": int(tx.get("packets", 0)),
            "tx_dropped": int(tx.get("dropped", 0)), "tx_errors": int(tx.get("errors", 0))}
    return out


def socket_drops(ss_text: str, pid: int) -> dict[str, int]:
    """Per interface, the drops of the packet sockets process ``pid`` has bound
    to it, from ``ss -0 -m -p -n`` (``skmem``'s ``d``: what the socket's buffer
    could not hold)."""
    out: dict[str, int] = {}
    lines = ss_text.splitlines()
    for i, line in enumerate(lines):
        local, owner = _SS_LOCAL.search(line), _SS_PID.search(line)
        if local is None or owner is None or int(owner.group("pid")) != pid:
            continue
        # ss prints skmem on the line itself or on the next, depending on the width.
        drops = _SS_DROPS.search(line) or (_SS_DROPS.search(lines[i + 1]) if i + 1 < len(lines) else None)
        if drops is not None:
            out[local.group("intf")] = out.get(local.group("intf"), 0) + int(drops.group("drops"))
    return out

