"""Source-host sender: sends a stream's events in order, at its rate.

Runs inside a Mininet host.  Frames are built from Scapy-made headers
(``wire.FrameTemplate``), one per event or, for a batched stream, several
events to a frame (``semantics.batching``), and written to an AF_PACKET
socket in bursts (one sendmmsg call each for a fast stream): each
pass sends every event whose due time has come, then sleeps until the next
one is due, so the average rate holds without a syscall-heavy timer per
event.  The source records the send time of each event and writes them as
Parquet when it is done; a status file shows progress meanwhile.
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from testbed.dataplane.wire import FrameTemplate
from testbed.emulation.burst import FrameBurst
from testbed.emulation.packet_socket import packet_socket
from testbed.emulation.procs import run_until_signalled
from testbed.rundir import RunDir, write_json_atomic
from testbed.semantics.addressing import plan_addresses
from testbed.semantics.batching import FramePlan, plan_frames
from testbed.semantics.schedule import rate_profile, send_offsets
from testbed.semantics.topology import SPLITTER_IP, SPLITTER_MAC, load_topology
from testbed.semantics.workload import sent_events

STATUS_EVERY_S = 0.2
#: Past this many streams on a host its status is written less often, in proportion.
STATUS_STREAMS = 4096
#: A source that was kept off the CPU catches up at no more than this many
#: times its rate, in batches of ``BURST_S`` worth of events: blasting the
#: whole backlog at once overflows bmv2's input and loses events.
CATCH_UP_FACTOR = 2.0
BURST_S = 0.005
#: From this many frames per burst (12,800 frames/s) a burst leaves in one
#: sendmmsg call: a loop of send() calls would set the pace (``burst.py``).
#: Slower streams keep one call, and an exact stamp, per frame.
MANY = 64


#: How often a stream held at a barrier looks for the run's go.
BARRIER_POLL_S = 0.001


@dataclass
class Barrier:
    """Schedule entry ``entry``'s point: its stream is held once it has sent ``events`` frames."""

    entry: int
    events: int
    reached_at: Optional[float] = None
    held_s: float = 0.0

    def record(self) -> dict:
        return {"entry": self.entry, "events": self.events, "held_s": round(self.held_s, 6)}


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
        self.sent = {s.id: 0 for s in self.streams}            # events
        self.frames_sent = {s.id: 0 for s in self.streams}
        self.plans: dict[int, FramePlan] = {}
        self.waits: dict[int, np.ndarray] = {}
        self.barriers = self._barriers()
        self.held_s = {s.id: 0.0 for s in self.streams}
        self.passed: list[Barrier] = []
        # A status holds a count per stream: with thousands of streams, less often
        # (writing 32,768 counts every 0.2 s took a third of a source's time).
        self.status_every = STATUS_EVERY_S * max(1.0, len(self.streams) / STATUS_STREAMS)

    @property
    def status_path(self) -> Path:
        return self.rundir.source_status(self.host)

    def run(self) -> None:
        """Interleave the host's streams by due time, each at its own pace.

        A stream's pace is its rate, or the steps its topology's schedule
        gives it (``rate`` entries, ``schedule.rate_profile``): event ``i`` is
        due ``offsets[i]`` seconds after the start, plus the stream's phase
        (``phases``).  Each pass sends the events of the streams that are
        due, at most one burst per stream; a stream that is behind is paced
        at ``CATCH_UP_FACTOR`` times its pace until it is back on time.  A
        stream held at a barrier (a schedule entry placed in its terms) sends
        nothing until the run says go, and its pace resumes from there: the
        time held does not count as being behind.
        """
        phases = self.phases()
        due = []
        for s in self.streams:
            profile = rate_profile(s, self.schedule)
            offsets = np.asarray(send_offsets(profile, self.total(s.id)), dtype=np.float64) + phases[s.id]
            plan = self._frame_plan(s, offsets)
            self.plans[s.id], self.waits[s.id] = plan, plan.wait(offsets)
            events_per_frame = s.batch.events if s.batch else 1
            burst = max(1, int(max(r for _, r in profile) * BURST_S / events_per_frame))
            frames = self._frames(s.id, plan)
            many = FrameBurst(frames) if burst >= MANY else None
            # A stream sent in bursts keeps its frames in the burst's buffer only.
            due.append((s.id, plan, plan.ends.tolist(), frames if many is None else None, many, burst))
        # When each frame left; its events' send_ns, written at the end.
        sent_at = {sid: np.zeros(len(plan), dtype=np.int64) for sid, plan, *_ in due}
        send, fd = self.sock.send, self.sock.fileno()
        start = time.monotonic()
        # When each stream next needs a look: a pass visits only those whose
        # time has come, so thousands of streams on a host cost a pass little.
        next_at = np.array([start + plan.due[0] if len(plan) else np.inf for _, plan, *_ in due], dtype=np.float64)
        next_status = start
        while not self.stopping:
            now = time.monotonic()
            for i in np.flatnonzero(next_at <= now).tolist():
                sid, plan, ends, frames, many, burst = due[i]
                f, total = self.frames_sent[sid], len(plan)
                barrier = self.barriers[sid][0] if self.barriers[sid] else None
                if barrier is not None and self.sent[sid] == barrier.events:
                    if not self._passed(barrier):
                        next_at[i] = now + BARRIER_POLL_S
                        continue
                    barrier = self.barriers[sid][0] if self.barriers[sid] else None
                clock = now - start - self.held_s[sid]      # the stream's own time: pauses at barriers left out
                up_to_barrier = total if barrier is None else int(np.searchsorted(plan.ends, barrier.events, "right"))
                ready = min(up_to_barrier, int(np.searchsorted(plan.due, clock, side="right")), f + burst)
                stamps = sent_at[sid]
                if many is not None and ready > f:
                    # One system call for the lot; each frame's stamp is placed
                    # between the call's start and end, in order.
                    t0 = time.time_ns()
                    many.send(fd, f, ready - f)
                    stamps[f:ready] = np.linspace(t0, time.time_ns(), ready - f, endpoint=False).astype(np.int64)
                    f = ready
                while f < ready:
                    stamps[f] = time.time_ns()
                    send(frames[f])
                    f += 1
                self.frames_sent[sid], self.sent[sid] = f, ends[f - 1] if f else 0
                if f >= total:
                    next_at[i] = np.inf
                elif barrier is not None and self.sent[sid] == barrier.events:
                    next_at[i] = now                # say at once that the barrier is reached
                else:
                    on_time = start + self.held_s[sid] + plan.due[f]
                    interval = plan.due[f + 1] - plan.due[f] if f + 1 < total else 0.001
                    next_at[i] = now + burst * interval / CATCH_UP_FACTOR if on_time <= now else on_time
            if np.isinf(next_at).all():
                break
            if now >= next_status:
                self._status(False)
                next_status = now + self.status_every
            wake = min(float(next_at.min()), now + 0.05)
            time.sleep(max(0.0, wake - time.monotonic()))
        self._write({sid: np.repeat(sent_at[sid], np.diff(plan.ends, prepend=0)) for sid, plan, *_ in due})
        self._status(True)

    def phases(self) -> dict[int, float]:
        """Each stream's phase: the k streams of this host are spread over their
        first interval, stream j starting j/k of it late.

        Streams declared alike (a family) would otherwise be due at the same
        instants, and every one of those instants would put k events, and their
        copies, into the switch's and each operator link's queues at once: on a
        busy machine the queues overflow and copies are lost.  A phase shifts
        when events leave, never what they carry: timestamps, sequence numbers
        and every schedule point are in the stream's own terms.
        """
        k = len(self.streams)
        return {s.id: j / k / s.rate for j, s in enumerate(self.streams)}

    def _frame_plan(self, s, offsets: np.ndarray) -> FramePlan:
        """The stream's frames: one per event, or its batches, cut at its barriers."""
        n = len(offsets)
        if s.batch is None:
            return FramePlan(np.arange(1, n + 1, dtype=np.int64), offsets)
        return plan_frames(offsets, s.batch.events, s.batch.max_delay, [b.events for b in self.barriers[s.id]])

    def _barriers(self) -> dict[int, list[Barrier]]:
        """Per stream, the schedule's points in its terms that fall before its
        last frame, in order: where the stream is held until the run says go."""
        out: dict[int, list[Barrier]] = {s.id: [] for s in self.streams}
        for entry_index, entry in enumerate(self.schedule):
            point = entry.after
            if point is None or point.stream not in out:
                continue
            if point.events is not None:
                events = point.events
            else:
                later = np.flatnonzero(self.events[point.stream]["ts"] >= point.ts)
                events = int(later[0]) + 1 if len(later) else None
            if events is not None and events < self.total(point.stream):
                out[point.stream].append(Barrier(entry_index, events))
        return {sid: sorted(points, key=lambda b: b.events) for sid, points in out.items()}

    def _passed(self, barrier: Barrier) -> bool:
        """Hold at ``barrier``: say it is reached, then whether the run has said go."""
        go = self.rundir.barrier_go(barrier.entry)
        if barrier.reached_at is None:
            barrier.reached_at = time.monotonic()
            reached = self.rundir.barrier_reached(barrier.entry)
            reached.parent.mkdir(exist_ok=True)
            write_json_atomic(reached, {"events": barrier.events})   # the run waits for the switch to count these
        if not go.exists():
            return False
        barrier.held_s = time.monotonic() - barrier.reached_at
        sid = self.schedule[barrier.entry].after.stream
        self.held_s[sid] += barrier.held_s
        self.barriers[sid].pop(0)
        self.passed.append(barrier)
        return True

    def total(self, sid: int) -> int:
        """Events this stream sends: its events, less those lost and plus those
        duplicated on purpose (``perturb``)."""
        return len(self.events[sid]["seq"])

    def _frames(self, sid: int, plan: FramePlan) -> list[bytes]:
        ev = self.events[sid]
        events = list(zip(ev["seq"].tolist(), ev["ts"].tolist(), ev["key"].tolist(), ev["value"].tolist()))
        return planned_frames(self.templates[sid], events, plan)

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
                "frame": pa.array(self.plans[s.id].frame_of_event()[:n]),
                "batch_wait_ns": pa.array(np.round(self.waits[s.id][:n] * 1e9).astype(np.int64)),
            }))
        pq.write_table(pa.concat_tables(parts), self.rundir.source_events(self.host))

    def _status(self, final: bool) -> None:
        write_json_atomic(self.status_path, {"host": self.host, "pid": os.getpid(), "final": final,
                                             "sent": {str(k): v for k, v in self.sent.items()},
                                             "held": [b.record() for b in self.passed]},
                          compact=True)      # one count per stream: 32,768 of them on a host of s4s65536


def planned_frames(template: FrameTemplate, events: list[tuple[int, int, int, int]], plan: FramePlan) -> list[bytes]:
    """The frames that carry ``events`` as ``plan`` groups them.  A frame of
    one event goes as a plain event frame (docs/wire.md, "Batches"): a batch
    header would only add bytes, and on bmv2 the batch path's work, to what
    an unbatched stream sends."""
    return [template.frame(*events[a]) if b - a == 1 else template.batch(events[a:b])
            for a, b in zip(plan.starts().tolist(), plan.ends.tolist())]


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
