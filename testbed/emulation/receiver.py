"""Operator-host receiver: records every event that reaches an operator.

Runs inside a Mininet host.  It binds plain UDP sockets, one for events
and one for batches (the splitter rewrote the destination to this host),
and records, per event, stream, seq, ts, key, value,
the Windows header the splitter wrote (which of the event's windows are this
operator's) and the receive time of each event, and keeps a small status file up to date
so the run can see progress.  Every ``FLUSH_S`` it writes what it received
since the last flush as the next Parquet part, so a receiver that dies
loses at most that last fraction of a second, and links the part into the
Spark application's inbox.  On SIGTERM it writes the last part and its
final status, with the kernel's UDP drop counters of this host, then exits.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import select
import socket
import struct
import time
from array import array
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from testbed.dataplane.liveness import HEARTBEAT_INTERVAL_S
from testbed.dataplane.wire import (
    BATCH_STRUCT,
    BATCH_UDP_PORT,
    CEP_UDP_PORT,
    EVENT_LEN,
    EVENT_UDP_PORT,
    FLAG_WINDOWS,
    WINDOWS_LEN,
    parse_complex_events,
)
from testbed.emulation.heartbeat import HeartbeatSender
from testbed.emulation.procs import run_until_signalled
from testbed.rundir import RunDir, read_json, write_json_atomic
from testbed.semantics.instances import instance_name

STATUS_EVERY_S = 0.2
#: How often newly received events are written as a part (and handed to Spark).
FLUSH_S = 0.5
SOCKET_BUFFER = 32 << 20
SO_RCVBUFFORCE = 33
#: The largest copy: a full batch, each event with its Windows header (and room to spare).
MAX_DATAGRAM = 4096
#: Datagrams taken from one socket before the loop looks at the other and the clock.
DRAIN_AT_ONCE = 256
SO_TIMESTAMPNS = 35            # = SCM_TIMESTAMPNS: kernel receive time as a timespec
TIMESPEC = struct.Struct("qq")
#: Linux's IP_PKTINFO (Python 3.11's socket module lacks the name), and the
#: struct in_pktinfo it delivers: interface index, local address, and the
#: header's destination address.
IP_PKTINFO = 8
IN_PKTINFO = struct.Struct("i4s4s")
#: Room for both control messages a datagram comes with.
ANCILLARY_BYTES = 128
#: The Windows header's fields, as columns (all 0 when a copy carries none).
HEADER_COLUMNS = ("hdr_window", "hdr_span", "hdr_stride", "hdr_epoch",
                  "hdr_old_window", "hdr_old_span", "hdr_old_stride")
COLUMNS = ("stream", "seq", "ts", "key", "value", "recv_ns") + HEADER_COLUMNS
#: An event and its Windows header as they lie in a copy (docs/wire.md), one
#: record per event; an event that came without a header gets zeros.  Every
#: 64-bit field is read as signed, as the columns are.
RECORD = np.dtype([("stream", ">u2"), ("flags", ">u2"), ("seq", ">u4"), ("ts", ">i8"), ("key", ">i8"),
                   ("value", ">i8"),
                   ("hdr_window", ">i8"), ("hdr_span", ">u4"), ("hdr_stride", ">u2"), ("hdr_epoch", ">u2"),
                   ("hdr_old_window", ">i8"), ("hdr_old_span", ">u4"), ("hdr_old_stride", ">u2"), ("_", ">u2")])
assert RECORD.itemsize == EVENT_LEN + WINDOWS_LEN
NO_HEADER = bytes(WINDOWS_LEN)


def udp_kernel_drops() -> dict[str, int]:
    """UDP ``RcvbufErrors`` and ``InErrors`` of this network namespace."""
    lines = [l.split() for l in Path("/proc/net/snmp").read_text().splitlines() if l.startswith("Udp:")]
    if len(lines) < 2:
        return {}
    fields = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:])))
    return {"rcvbuf_errors": fields.get("RcvbufErrors", 0), "in_errors": fields.get("InErrors", 0)}


class Arrivals:
    """The events received since the last part, kept as they came until the
    part is written.

    A receiver that unpacked each event as it arrived spent more CPU than
    the embedded switch it listens to: at a few hundred thousand batched
    events a second, its operators took the core that the source needed.
    So a datagram only appends its events' bytes (one ``RECORD`` each) and
    its receive time; ``columns`` unpacks them all at once.
    """

    def __init__(self):
        self.records = bytearray()
        self.counts = array("q")      # events per datagram
        self.stamps = array("q")      # each datagram's receive time
        self.instances = array("q")   # each datagram's operator instance on this host (0 for a whole host)

    def __len__(self) -> int:
        return len(self.records) // RECORD.itemsize

    def event(self, data: memoryview, now: int, instance: int = 0) -> int:
        """A frame of one event (and its Windows header if it has room for one)."""
        if len(data) < EVENT_LEN:
            return 0
        if len(data) >= RECORD.itemsize:
            self.records += data[:RECORD.itemsize]
        else:
            self.records += data[:EVENT_LEN]
            self.records += NO_HEADER
        return self._arrived(1, now, instance)

    def batch(self, data: memoryview, now: int, instance: int = 0) -> int:
        """Every event of a batch, as if each had come alone: those its length holds."""
        if len(data) < BATCH_STRUCT.size:
            return 0
        count, flags = BATCH_STRUCT.unpack_from(data)
        body = data[BATCH_STRUCT.size:]
        if flags & FLAG_WINDOWS:
            count = min(count, len(body) // RECORD.itemsize)
            self.records += body[:count * RECORD.itemsize]
        else:
            count = min(count, len(body) // EVENT_LEN)
            for at in range(0, count * EVENT_LEN, EVENT_LEN):
                self.records += body[at:at + EVENT_LEN]
                self.records += NO_HEADER
        return self._arrived(count, now, instance)

    def _arrived(self, count: int, now: int, instance: int) -> int:
        self.counts.append(count)
        self.stamps.append(now)
        self.instances.append(instance)
        return count

    def instance_of_events(self) -> np.ndarray:
        """Each event's instance, in arrival order."""
        return np.repeat(np.frombuffer(self.instances, dtype=np.int64), np.frombuffer(self.counts, dtype=np.int64))

    def columns(self) -> dict[str, np.ndarray]:
        """The events as ``COLUMNS``: int64 arrays, in arrival order.  A
        header whose event does not say it has one (``FLAG_WINDOWS``) reads
        as zeros, as for an event that came without."""
        rec = np.frombuffer(self.records, dtype=RECORD)
        flagged = (rec["flags"] & FLAG_WINDOWS) != 0
        out = {name: rec[name].astype(np.int64) for name in COLUMNS if name != "recv_ns"}
        for name in HEADER_COLUMNS:
            out[name] = np.where(flagged, out[name], 0)
        out["recv_ns"] = np.repeat(np.frombuffer(self.stamps, dtype=np.int64),
                                   np.frombuffer(self.counts, dtype=np.int64))
        return {name: out[name] for name in COLUMNS}


def instance_index(ancdata, first_address: Optional[int], count: int) -> int:
    """The instance a datagram was addressed to, from its ``IP_PKTINFO``: 0 on a
    whole host (``first_address`` None), and -1 for an address outside the host's
    ``count`` instances (the check then finds the copy at the host itself, where
    no instance is)."""
    if first_address is None:
        return 0
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
            index = int.from_bytes(IN_PKTINFO.unpack_from(data)[2], "big") - first_address
            return index if 0 <= index < count else -1
    return -1


class Receiver:
    """Collects the events that reach one operator host, for each of its instances.

    A host that runs several operator instances (``testbed.semantics.instances``)
    has one receiver for all of them: the splitter addresses each instance at
    an IP of its own, in ``instance_network``, and each datagram's destination
    (``IP_PKTINFO``) says whose it is.  So memory grows with the events, not
    with the instances.
    """

    def __init__(self, host: str, rundir: RunDir, spark: bool = False, instances: int = 1,
                 instance_network: Optional[str] = None):
        self.host = host
        #: Operator names by instance index; a whole host's one instance is the host.
        self.operators = [instance_name(host, i, instances) for i in range(instances)]
        self.first_address = int(ipaddress.ip_network(instance_network).network_address) + 1 \
            if instances > 1 and instance_network else None
        self.rundir = rundir
        self.arrivals = Arrivals()
        self.spark = spark
        # A receiver restarted on the host (the operator recovered) carries
        # on from its predecessor: its parts and, for progress, its count.
        self.parts = rundir.next_receiver_part(host)     # parts written
        self.received = 0         # events recorded, flushed or not
        if self.parts and self.status_path.exists():
            self.received = read_json(self.status_path).get("received", 0)
        if spark:
            rundir.spark_inbox(host).mkdir(parents=True, exist_ok=True)
        self.stopping = False
        # One socket for frames of one event, one for batches, one for the
        # complex events of a sink (docs/wire.md).
        # Only a host of several instances needs each datagram's destination:
        # elsewhere the kernel would build a control message per datagram for nothing.
        shared = self.first_address is not None
        self.sockets = [self._bind(EVENT_UDP_PORT, shared), self._bind(BATCH_UDP_PORT, shared),
                        self._bind(CEP_UDP_PORT, False)]
        self.complex_rows: list[tuple] = []
        self.complex_parts = rundir.next_receiver_part(host, "complex_events")
        self.malformed = 0        # frames to the CEP port that hold no complex event
        self._complex_written = 0
        self.baseline_drops = udp_kernel_drops()

    @staticmethod
    def _bind(port: int, destination: bool) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, SOCKET_BUFFER)   # root may exceed rmem_max
        # The kernel stamps each datagram on arrival, so recv_ns measures the
        # network and the splitter, not how busy this process was.
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if destination:
            sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)     # each datagram's destination address
        sock.bind(("0.0.0.0", port))
        sock.setblocking(False)
        return sock

    @property
    def status_path(self) -> Path:
        return self.rundir.receiver_status(self.host)

    def status(self, final: bool = False) -> dict:
        drops = udp_kernel_drops()
        return {"host": self.host, "pid": os.getpid(), "received": self.received, "parts": self.parts,
                "final": final, "complex_events": self.complex_received, "malformed_complex_frames": self.malformed,
                "kernel_drops": {k: drops.get(k, 0) - self.baseline_drops.get(k, 0) for k in drops}}

    def run(self) -> None:
        # The first Parquet write of a process sets up the writer, which took
        # about a second on a busy 2-core machine: paid here, before the
        # receiver says it is ready, not by the stream's first hand-over.
        pq.write_table(self._table(), pa.BufferOutputStream())
        write_json_atomic(self.status_path, self.status())   # also the readiness signal
        buf = bytearray(MAX_DATAGRAM)
        next_status = time.monotonic() + STATUS_EVERY_S
        next_flush = time.monotonic() + FLUSH_S
        while not self.stopping:
            try:
                ready, _, _ = select.select(self.sockets, [], [], STATUS_EVERY_S)
            except InterruptedError:
                ready = []
            for sock in ready:
                self._drain(sock, buf, DRAIN_AT_ONCE)
            if time.monotonic() >= next_flush:
                self.flush()
                next_flush = time.monotonic() + FLUSH_S
            if time.monotonic() >= next_status:
                write_json_atomic(self.status_path, self.status())
                next_status = time.monotonic() + STATUS_EVERY_S
        self.finish()

    def _table(self) -> pa.Table:
        table = pa.table({name: pa.array(values, type=pa.int64()) for name, values in self.arrivals.columns().items()})
        if len(self.operators) == 1:
            return table.append_column("operator", pa.array([self.host] * table.num_rows, type=pa.string()))
        # Dictionary-encoded while built: one name per instance, an index per event.
        names = pa.array(self.operators + [self.host], type=pa.string())
        index = self.arrivals.instance_of_events()
        index = np.where((index >= 0) & (index < len(self.operators)), index, len(self.operators))
        operator = pa.DictionaryArray.from_arrays(pa.array(index, type=pa.int32()), names).cast(pa.string())
        return table.append_column("operator", operator)

    def instance_of(self, ancdata) -> int:
        return instance_index(ancdata, self.first_address, len(self.operators))

    def flush(self, final: bool = False) -> None:
        """Write what was received since the last flush as the next part.

        A part appears under its final name only when complete (rename),
        then is hard-linked into Spark's inbox, where names starting with a
        dot are skipped: no reader ever sees half a file.  A receiver that
        got nothing still writes one empty part at the end, which says so.
        """
        self._flush_complex()
        if not len(self.arrivals) and (self.parts or not final):
            return
        table = self._table()
        path = self.rundir.receiver_events(self.host, self.parts)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, tmp)
        tmp.replace(path)
        if self.spark and table.num_rows:
            os.link(path, self.rundir.spark_inbox_part(self.host, self.parts))
        self.parts += 1
        self.arrivals = Arrivals()

    @property
    def complex_received(self) -> int:
        """Complex events recorded so far, flushed or not."""
        return self._complex_written + len(self.complex_rows)

    def _flush_complex(self) -> None:
        """Complex events received since the last flush, as the next part of their own."""
        if not self.complex_rows:
            return
        columns = ("pattern", "match", "stream", "seq", "ts", "value", "recv_ns", "at")
        table = pa.table({c: pa.array([r[i] for r in self.complex_rows], type=pa.int64())
                          for i, c in enumerate(columns)})
        table = table.append_column("sink", pa.array([self.host] * table.num_rows, type=pa.string()))
        path = self.rundir.receiver_complex_events(self.host, self.complex_parts)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, tmp)
        tmp.replace(path)
        self.complex_parts += 1
        self._complex_written += len(self.complex_rows)
        self.complex_rows = []

    def _record_complex(self, buf: bytearray, n: int, now: int) -> None:
        """The complex events of one frame to this sink, each with its place in the frame."""
        try:
            found = parse_complex_events(bytes(buf[:n]))
        except ValueError:
            self.malformed += 1
            return
        for at, (pattern, match, stream, seq, ts, value) in enumerate(found):
            self.complex_rows.append((pattern, match, stream, seq, ts - (1 << 64) if ts >= 1 << 63 else ts,
                                      value, now, at))

    def _drain(self, sock: socket.socket, buf: bytearray, most: int) -> None:
        """Record up to ``most`` datagrams queued on ``sock``."""
        batched = sock is self.sockets[1]
        complex_events = sock is self.sockets[2]
        view = memoryview(buf)
        for _ in range(most):
            try:
                n, ancdata, _flags, _addr = sock.recvmsg_into([buf], ANCILLARY_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            now = None
            for level, kind, data in ancdata:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = TIMESPEC.unpack_from(data)
                    now = sec * 1_000_000_000 + nsec
            now = now if now is not None else time.time_ns()
            if complex_events:
                self._record_complex(buf, n, now)
            elif batched:
                self.received += self.arrivals.batch(view[:n], now, self.instance_of(ancdata))
            else:
                self.received += self.arrivals.event(view[:n], now, self.instance_of(ancdata))

    def finish(self) -> None:
        # Drain what is already queued before closing, so a stop never loses events.
        buf = bytearray(MAX_DATAGRAM)
        for sock in self.sockets:
            self._drain(sock, buf, 1 << 62)
        self.flush(final=True)
        write_json_atomic(self.status_path, self.status(final=True))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="operator-host event receiver")
    ap.add_argument("--host", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--spark", action="store_true",
                    help="Hand received events to the run's Spark application (its inbox in the run directory).")
    ap.add_argument("--heartbeat", nargs=5, metavar=("INTF", "MAC", "IP", "SWITCH_MAC", "SWITCH_IP"),
                    help="Send heartbeats to the splitter on INTF (docs/wire.md, 'Heartbeats').")
    ap.add_argument("--heartbeat-interval", type=float, default=HEARTBEAT_INTERVAL_S)
    ap.add_argument("--instances", type=int, default=1, help="Operator instances the host runs.")
    ap.add_argument("--instance-network", default=None,
                    help="Where the instances are addressed: instance i at the network's address i + 1.")
    args = ap.parse_args(argv)
    receiver = Receiver(args.host, RunDir(args.out), args.spark, args.instances, args.instance_network)
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
