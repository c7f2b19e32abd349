"""Operator-host receiver: records every event that reaches an operator.

Runs inside a Mininet host.  It binds a plain UDP socket (the splitter
rewrote the destination to this host), records stream, seq, ts, key, value
and the receive time of each event, and keeps a small status file up to date
so the run can see progress.  On SIGTERM it writes its deliveries as Parquet
together with the kernel's UDP drop counters of this host, then exits.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import time
from array import array
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .wire import EVENT_STRUCT, EVENT_UDP_PORT

STATUS_EVERY_S = 0.2
SOCKET_BUFFER = 32 << 20


def udp_kernel_drops() -> dict[str, int]:
    """UDP ``RcvbufErrors`` and ``InErrors`` of this network namespace."""
    lines = [l.split() for l in Path("/proc/net/snmp").read_text().splitlines() if l.startswith("Udp:")]
    if len(lines) < 2:
        return {}
    fields = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:])))
    return {"rcvbuf_errors": fields.get("RcvbufErrors", 0), "in_errors": fields.get("InErrors", 0)}


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


class Receiver:
    """Collects events in column arrays; one per operator host."""

    def __init__(self, host: str, out_dir: Path):
        self.host = host
        self.out_dir = out_dir
        self.cols = {name: array("q") for name in ("stream", "seq", "ts", "key", "value", "recv_ns")}
        self.stopping = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, 33, SOCKET_BUFFER)  # SO_RCVBUFFORCE (root)
        self.sock.bind(("0.0.0.0", EVENT_UDP_PORT))
        self.sock.settimeout(STATUS_EVERY_S)
        self.baseline_drops = udp_kernel_drops()

    @property
    def status_path(self) -> Path:
        return self.out_dir / f"{self.host}.status.json"

    def status(self, final: bool = False) -> dict:
        drops = udp_kernel_drops()
        return {"host": self.host, "pid": os.getpid(), "received": len(self.cols["seq"]),
                "final": final,
                "kernel_drops": {k: drops.get(k, 0) - self.baseline_drops.get(k, 0) for k in drops}}

    def run(self) -> None:
        write_json_atomic(self.status_path, self.status())   # also the readiness signal
        buf = bytearray(2048)
        next_status = time.monotonic() + STATUS_EVERY_S
        while not self.stopping:
            try:
                if self.sock.recv_into(buf) >= EVENT_STRUCT.size:
                    self._record(buf, time.time_ns())
            except socket.timeout:
                pass
            except InterruptedError:
                pass
            if time.monotonic() >= next_status:
                write_json_atomic(self.status_path, self.status())
                next_status = time.monotonic() + STATUS_EVERY_S
        self.finish()

    def _record(self, buf: bytearray, now: int) -> None:
        stream, _flags, seq, ts, key, value = EVENT_STRUCT.unpack_from(buf)
        cols = self.cols
        cols["stream"].append(stream)
        cols["seq"].append(seq)
        cols["ts"].append(ts)
        cols["key"].append(key - (1 << 64) if key >= 1 << 63 else key)
        cols["value"].append(value)
        cols["recv_ns"].append(now)

    def finish(self) -> None:
        # Drain what is already queued before closing, so a stop never loses events.
        self.sock.setblocking(False)
        buf = bytearray(2048)
        while True:
            try:
                n = self.sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                break
            if n >= EVENT_STRUCT.size:
                self._record(buf, time.time_ns())
        table = pa.table({name: pa.array(values, type=pa.int64()) for name, values in self.cols.items()})
        table = table.append_column("operator", pa.array([self.host] * table.num_rows, type=pa.string()))
        pq.write_table(table, self.out_dir / f"{self.host}.deliveries.parquet")
        write_json_atomic(self.status_path, self.status(final=True))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="operator-host event receiver")
    ap.add_argument("--host", required=True)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    receiver = Receiver(args.host, args.out)

    def _stop(signum, frame):
        receiver.stopping = True
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    receiver.run()


if __name__ == "__main__":
    main()
