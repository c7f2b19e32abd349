"""Operator-host receiver: records every event that reaches an operator.

Runs inside a Mininet host.  It binds a plain UDP socket (the splitter
rewrote the destination to this host), records stream, seq, ts, key, value
and the receive time of each event, and keeps a small status file up to date
so the run can see progress.  On SIGTERM it writes its deliveries as Parquet
together with the kernel's UDP drop counters of this host, then exits.
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import time
from array import array
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from testbed.dataplane.liveness import HEARTBEAT_INTERVAL_S
from testbed.dataplane.wire import EVENT_STRUCT, EVENT_UDP_PORT
from testbed.emulation.heartbeat import HeartbeatSender
from testbed.emulation.procs import run_until_signalled
from testbed.runs.rundir import RunDir, write_json_atomic

STATUS_EVERY_S = 0.2
#: How often newly received events are handed to Spark as a Parquet file.
SPARK_BATCH_S = 0.5
SOCKET_BUFFER = 32 << 20
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35            # = SCM_TIMESTAMPNS: kernel receive time as a timespec
TIMESPEC = struct.Struct("qq")
COLUMNS = ("stream", "seq", "ts", "key", "value", "recv_ns")


def udp_kernel_drops() -> dict[str, int]:
    """UDP ``RcvbufErrors`` and ``InErrors`` of this network namespace."""
    lines = [l.split() for l in Path("/proc/net/snmp").read_text().splitlines() if l.startswith("Udp:")]
    if len(lines) < 2:
        return {}
    fields = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:])))
    return {"rcvbuf_errors": fields.get("RcvbufErrors", 0), "in_errors": fields.get("InErrors", 0)}


class Receiver:
    """Collects events in column arrays; one per operator host."""

    def __init__(self, host: str, rundir: RunDir, spark_dir: Path | None = None):
        self.host = host
        self.rundir = rundir
        self.cols = {name: array("q") for name in COLUMNS}
        self.spark_dir = spark_dir
        self.handed_over = 0      # events already written for Spark
        self.batches = 0
        if spark_dir is not None:
            spark_dir.mkdir(parents=True, exist_ok=True)
        self.stopping = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, SOCKET_BUFFER)   # root may exceed rmem_max
        # The kernel stamps each datagram on arrival, so recv_ns measures the
        # network and the splitter, not how busy this process was.
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.bind(("0.0.0.0", EVENT_UDP_PORT))
        self.sock.settimeout(STATUS_EVERY_S)
        self.baseline_drops = udp_kernel_drops()

    @property
    def status_path(self) -> Path:
        return self.rundir.receiver_status(self.host)

    def status(self, final: bool = False) -> dict:
        drops = udp_kernel_drops()
        return {"host": self.host, "pid": os.getpid(), "received": len(self.cols["seq"]),
                "final": final,
                "kernel_drops": {k: drops.get(k, 0) - self.baseline_drops.get(k, 0) for k in drops}}

    def run(self) -> None:
        write_json_atomic(self.status_path, self.status())   # also the readiness signal
        buf = bytearray(2048)
        next_status = time.monotonic() + STATUS_EVERY_S
        next_batch = time.monotonic() + SPARK_BATCH_S
        while not self.stopping:
            try:
                self._receive(buf)
            except socket.timeout:
                pass
            except InterruptedError:
                pass
            if time.monotonic() >= next_status:
                write_json_atomic(self.status_path, self.status())
                next_status = time.monotonic() + STATUS_EVERY_S
            if self.spark_dir is not None and time.monotonic() >= next_batch:
                self.hand_over()
                next_batch = time.monotonic() + SPARK_BATCH_S
        self.finish()

    def _table(self, start: int = 0) -> pa.Table:
        table = pa.table({name: pa.array(values[start:], type=pa.int64()) for name, values in self.cols.items()})
        return table.append_column("operator", pa.array([self.host] * table.num_rows, type=pa.string()))

    def hand_over(self) -> None:
        """Write the events received since the last hand-over as one Parquet
        file for the Spark application.  The file appears under its final
        name only when complete (rename), and Spark skips names starting
        with a dot, so a half-written file is never read."""
        n = len(self.cols["seq"])
        if n == self.handed_over:
            return
        table = self._table(self.handed_over)
        name = f"{self.host}-{self.batches:06d}.parquet"
        tmp = self.spark_dir / f".{name}.tmp"
        pq.write_table(table, tmp)
        tmp.replace(self.spark_dir / name)
        self.handed_over = n
        self.batches += 1

    def _receive(self, buf: bytearray) -> None:
        n, ancdata, _flags, _addr = self.sock.recvmsg_into([buf], 64)
        if n < EVENT_STRUCT.size:
            return
        now = None
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = TIMESPEC.unpack_from(data)
                now = sec * 1_000_000_000 + nsec
        self._record(buf, now if now is not None else time.time_ns())

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
                self._receive(buf)
            except (BlockingIOError, InterruptedError):
                break
        pq.write_table(self._table(), self.rundir.receiver_events(self.host))
        if self.spark_dir is not None:
            self.hand_over()
        write_json_atomic(self.status_path, self.status(final=True))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="operator-host event receiver")
    ap.add_argument("--host", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--spark-dir", type=Path, default=None,
                    help="Hand received events to the run's Spark application through this folder.")
    ap.add_argument("--heartbeat", nargs=5, metavar=("INTF", "MAC", "IP", "SWITCH_MAC", "SWITCH_IP"),
                    help="Send heartbeats to the splitter on INTF (docs/wire.md, 'Heartbeats').")
    ap.add_argument("--heartbeat-interval", type=float, default=HEARTBEAT_INTERVAL_S)
    args = ap.parse_args(argv)
    receiver = Receiver(args.host, RunDir(args.out), args.spark_dir)
    heartbeat = None
    if args.heartbeat:
        intf, mac, ip, switch_mac, switch_ip = args.heartbeat
        heartbeat = HeartbeatSender(intf, (mac, ip), (switch_mac, switch_ip), args.heartbeat_interval).start()
    try:
        run_until_signalled(receiver)
    finally:
        if heartbeat is not None:
            heartbeat.stop()


if __name__ == "__main__":
    main()
