"""Source-host sender: sends a stream's events in order, at its rate.

Runs inside a Mininet host.  Frames are built from Scapy-made headers
(``wire.FrameTemplate``) and written to an AF_PACKET socket in batches: each
pass sends every event whose due time has come, then sleeps until the next
one is due, so the average rate holds without a syscall-heavy timer per
event.  The source records the send time of each event and writes them as
Parquet when it is done; a status file shows progress meanwhile.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from testbed.dataplane.wire import FrameTemplate
from testbed.emulation.packet_socket import packet_socket
from testbed.emulation.procs import run_until_signalled
from testbed.rundir import RunDir, write_json_atomic
from testbed.semantics.addressing import plan_addresses
from testbed.semantics.schedule import rate_profile, send_offsets
from testbed.semantics.topology import SPLITTER_IP, SPLITTER_MAC, load_topology
from testbed.semantics.workload import sent_events

STATUS_EVERY_S = 0.2
#: A source that was kept off the CPU catches up at no more than this many
#: times its rate, in batches of ``BURST_S`` worth of events: blasting the
#: whole backlog at once overflows bmv2's input and loses events.
CATCH_UP_FACTOR = 2.0
BURST_S = 0.005


class Source:
    """Sends the events of the streams whose source is this host."""

    def __init__(self, topology_path: Path, host: str, rundir: RunDir, intf: str):
        topo = load_topology(topology_path)
        ip, mac = plan_addresses(topo)[host]
        self.host = host
        self.rundir = rundir
        self.streams = [s for s in topo.streams if s.source == host]
        self.schedule = topo.schedule
        self.templates = {s.id: FrameTemplate(mac, SPLITTER_MAC, ip, SPLITTER_IP, s.id) for s in self.streams}
        self.events = {s.id: sent_events(s, topo.seed) for s in self.streams}
        self.sock = packet_socket(intf, 8 << 20, receive=False)
        self.sock.setblocking(True)            # a full send buffer makes the source wait, not fail
        self.stopping = False
        self.sent = {s.id: 0 for s in self.streams}

    @property
    def status_path(self) -> Path:
        return self.rundir.source_status(self.host)

    def run(self) -> None:
        """Interleave the host's streams by due time, each at its own pace.

        A stream's pace is its rate, or the steps its topology's schedule
        gives it (``rate`` entries, ``schedule.rate_profile``): event ``i`` is
        due ``offsets[i]`` seconds after the start.  Each pass sends the
        events that are due, at most one burst per stream; a stream that is
        behind is paced at ``CATCH_UP_FACTOR`` times its pace until it is
        back on time.
        """
        send_ns = {s.id: np.zeros(self.total(s.id), dtype=np.int64) for s in self.streams}
        frames = {s.id: self._frames(s.id) for s in self.streams}
        due = []
        for s in self.streams:
            profile = rate_profile(s, self.schedule)
            offsets = np.asarray(send_offsets(profile, self.total(s.id)), dtype=np.float64)
            due.append((s.id, offsets, self.total(s.id), max(1, int(max(r for _, r in profile) * BURST_S))))
        send = self.sock.send
        start = time.monotonic()
        next_status = start
        while not self.stopping:
            now = time.monotonic()
            pending, wake = False, now + 0.05
            for sid, offsets, total, burst in due:
                i = self.sent[sid]
                if i >= total:
                    continue
                pending = True
                ready = min(total, int(np.searchsorted(offsets, now - start, side="right")), i + burst)
                stamps, stream_frames = send_ns[sid], frames[sid]
                while i < ready:
                    stamps[i] = time.time_ns()
                    send(stream_frames[i])
                    i += 1
                self.sent[sid] = i
                if i < total:
                    on_time = start + offsets[i]
                    behind = on_time <= now
                    interval = offsets[min(i + 1, total - 1)] - offsets[i] if i + 1 < total else 0.001
                    wake = min(wake, now + burst * interval / CATCH_UP_FACTOR if behind else on_time)
            if not pending:
                break
            if now >= next_status:
                self._status(False)
                next_status = now + STATUS_EVERY_S
            time.sleep(max(0.0, wake - time.monotonic()))
        self._write(send_ns)
        self._status(True)

    def total(self, sid: int) -> int:
        """Frames this stream sends: its events, less those lost and plus those
        duplicated on purpose (``perturb``)."""
        return len(self.events[sid]["seq"])

    def _frames(self, sid: int) -> list[bytes]:
        ev, tpl = self.events[sid], self.templates[sid]
        return [tpl.frame(seq, ts, key, value) for seq, ts, key, value in
                zip(ev["seq"].tolist(), ev["ts"].tolist(), ev["key"].tolist(), ev["value"].tolist())]

    def _write(self, send_ns: dict[int, np.ndarray]) -> None:
        parts = []
        for s in self.streams:
            n = self.sent[s.id]
            ev = self.events[s.id]
            parts.append(pa.table({
                "stream": pa.array(np.full(n, s.id, dtype=np.int64)),
                "seq": pa.array(ev["seq"][:n]), "ts": pa.array(ev["ts"][:n]),
                "key": pa.array(ev["key"][:n]), "value": pa.array(ev["value"][:n]),
                "copy": pa.array(ev["copy"][:n]), "delayed": pa.array(ev["delayed"][:n]),
                "send_ns": pa.array(send_ns[s.id][:n]),
            }))
        pq.write_table(pa.concat_tables(parts), self.rundir.source_events(self.host))

    def _status(self, final: bool) -> None:
        write_json_atomic(self.status_path, {"host": self.host, "pid": os.getpid(), "final": final,
                                             "sent": {str(k): v for k, v in self.sent.items()}})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="event source")
    ap.add_argument("--topology", required=True, type=Path)
    ap.add_argument("--host", required=True)
    ap.add_argument("--intf", required=True)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    source = Source(args.topology, args.host, RunDir(args.out), args.intf)
    run_until_signalled(source)


if __name__ == "__main__":
    main()
