"""Link impairment in user space: delay, loss and reordering without netem.

Some kernels (this project's development VM among them) have no ``sch_netem``.
On those, a link that asks for ``delay``, ``loss`` or ``reorder`` gets a relay
node between the host and the switch (``SplitterNetwork``), and this
program runs in it: it forwards every frame between its two interfaces,
both ways, with netem's meaning of the parameters:

- ``loss``: each frame is dropped with this probability (percent);
- ``delay``: each frame that is kept leaves this long after it arrived;
- ``reorder``: this percentage of the kept frames skips the delay and goes
  out at once, overtaking the frames queued before it (netem's
  ``reorder``; it needs a delay to have an effect).

The draws are seeded, so a rerun impairs the same frames.  Every event
frame it drops is recorded (stream, seq, which way it went), so the run's
accounting can name the events lost on the link.  On SIGTERM it sends what
it still holds, then writes its records.

Run by hand: ``python -m testbed.emulation.impairment --host h1 --out RUN_DIR
--to-host x1-eth0 --to-switch x1-eth1 --delay-us 2000 --loss 1``.
"""
from __future__ import annotations

import argparse
import heapq
import os
import random
import selectors
import socket
import time
from dataclasses import dataclass
from itertools import count

import pyarrow as pa
import pyarrow.parquet as pq

from testbed.dataplane.wire import EVENT_OFFSET, EVENT_STRUCT, is_event_frame
from testbed.emulation.packet_socket import PACKET_OUTGOING, packet_socket
from testbed.emulation.procs import run_until_signalled
from testbed.rundir import RunDir, write_json_atomic

STATUS_EVERY_S = 0.2
#: Which way a frame travels, as recorded for drops.
TOWARD_SWITCH, TOWARD_HOST = "switch", "host"


@dataclass(frozen=True)
class Impairment:
    """netem's parameters: delay in seconds, loss and reorder in percent."""

    delay_s: float = 0.0
    loss: float = 0.0
    reorder: float = 0.0
    seed: int = 1

    def args(self) -> list[str]:
        return ["--delay-us", str(int(round(self.delay_s * 1e6))), "--loss", str(self.loss),
                "--reorder", str(self.reorder), "--seed", str(self.seed)]


def parse_duration(text: str) -> float:
    """``"2ms"`` -> 0.002 (the units topology files use: us, ms, s)."""
    for unit, scale in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(f"not a duration: {text!r}")


class Relay:
    """Forwards frames between two interfaces, impaired; one per impaired link."""

    def __init__(self, host: str, rundir: RunDir, to_host: str, to_switch: str, impairment: Impairment):
        self.host = host
        self.rundir = rundir
        self.impairment = impairment
        self.rng = random.Random(impairment.seed)
        self.selector = selectors.DefaultSelector()
        self.sockets: dict[str, socket.socket] = {}
        # A frame that arrives on the host's side travels toward the switch.
        for toward, intf in ((TOWARD_SWITCH, to_host), (TOWARD_HOST, to_switch)):
            s = packet_socket(intf)
            self.sockets[toward] = s
            self.selector.register(s, selectors.EVENT_READ, toward)
        self.out = {TOWARD_SWITCH: self.sockets[TOWARD_HOST], TOWARD_HOST: self.sockets[TOWARD_SWITCH]}
        self.queue: list[tuple[float, int, str, bytes]] = []   # (due, order, toward, frame)
        self.order = count()
        self.counts = {toward: {"in": 0, "dropped": 0, "reordered": 0, "out": 0}
                       for toward in (TOWARD_SWITCH, TOWARD_HOST)}
        self.drops: list[tuple[int, int, str]] = []          # (stream, seq, toward) of dropped events
        self.stopping = False

    @property
    def status_path(self):
        return self.rundir.relay_status(self.host)

    def run(self) -> None:
        self._status(False)                       # also the readiness signal
        next_status = time.monotonic() + STATUS_EVERY_S
        while not self.stopping:
            wait = 0.05 if not self.queue else max(0.0, min(0.05, self.queue[0][0] - time.monotonic()))
            for key, _ in self.selector.select(timeout=wait):
                self._receive(key.fileobj, key.data)
            self._send_due(time.monotonic())
            if time.monotonic() >= next_status:
                self._status(False)
                next_status = time.monotonic() + STATUS_EVERY_S
        self._send_due(float("inf"))              # what is still held goes out, late but not lost
        self._write_drops()
        self._status(True)

    def _receive(self, sock: socket.socket, toward: str) -> None:
        imp, rng, counts = self.impairment, self.rng, self.counts[toward]
        now = time.monotonic()
        while True:
            try:
                frame, addr = sock.recvfrom(65535)
            except BlockingIOError:
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            counts["in"] += 1
            if imp.loss and rng.random() * 100 < imp.loss:
                counts["dropped"] += 1
                if is_event_frame(frame):
                    stream, _flags, seq, *_ = EVENT_STRUCT.unpack_from(frame, EVENT_OFFSET)
                    self.drops.append((stream, seq, toward))
                continue
            due = now + imp.delay_s
            if imp.reorder and rng.random() * 100 < imp.reorder:
                due = now
                counts["reordered"] += 1
            heapq.heappush(self.queue, (due, next(self.order), toward, frame))

    def _send_due(self, now: float) -> None:
        while self.queue and self.queue[0][0] <= now:
            _due, _order, toward, frame = heapq.heappop(self.queue)
            try:
                self.out[toward].send(frame)
                self.counts[toward]["out"] += 1
            except OSError:
                self.counts[toward]["dropped"] += 1   # the interface is gone: the network is stopping

    def _write_drops(self) -> None:
        stream, seq, toward = (list(c) for c in zip(*self.drops)) if self.drops else ([], [], [])
        pq.write_table(pa.table({"stream": pa.array(stream, pa.int64()), "seq": pa.array(seq, pa.int64()),
                                 "toward": pa.array(toward, pa.string()),
                                 "host": pa.array([self.host] * len(stream), pa.string())}),
                       self.rundir.host_file("link_drops", self.host))

    def _status(self, final: bool) -> None:
        write_json_atomic(self.status_path, {"host": self.host, "pid": os.getpid(), "final": final,
                                             "impairment": vars(self.impairment), "frames": self.counts})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="user-space link impairment relay")
    ap.add_argument("--host", required=True, help="the host whose link this is")
    ap.add_argument("--out", required=True, help="run directory")
    ap.add_argument("--to-host", required=True, help="interface toward the host")
    ap.add_argument("--to-switch", required=True, help="interface toward the switch")
    ap.add_argument("--delay-us", type=int, default=0)
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--reorder", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    impairment = Impairment(args.delay_us / 1e6, args.loss, args.reorder, args.seed)
    run_until_signalled(Relay(args.host, RunDir(args.out), args.to_host, args.to_switch, impairment))


if __name__ == "__main__":
    main()
