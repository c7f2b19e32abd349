"""``python -m support.fake_hosts source|receiver ...``: host programs without a network.

They stand in for ``testbed.emulation.source`` and ``receiver`` when a run's
network is a fake (``support.fake_parts``): they take the same arguments,
write the same files, and stop on SIGTERM the same way, but nothing goes over
a wire.  The source writes the events it would send; each receiver, once
every source is done, puts those events through the pipeline model with the
run's plan and keeps the copies for its own host, as if they had arrived.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

from support.switched import through_model
from testbed.emulation.procs import run_until_signalled
from testbed.rundir import RunDir, read_json, write_json_atomic
from testbed.semantics.topology import load_topology
from testbed.semantics.workload import sent_events


class FakeSource:
    def __init__(self, rundir: RunDir, host: str, topology: Path):
        self.rundir, self.host, self.topo = rundir, host, load_topology(topology)
        self.stopping = False

    def run(self) -> None:
        rows = []
        for s in self.topo.streams:
            if s.source == self.host:
                ev = pd.DataFrame(sent_events(s, self.topo.seed))
                rows.append(ev.assign(stream=s.id, send_ns=time.time_ns() + ev.index.to_numpy()))
        sent = pd.concat(rows)
        sent.to_parquet(self.rundir.source_events(self.host))
        counts = {str(k): int(v) for k, v in sent.groupby("stream").size().items()}
        write_json_atomic(self.rundir.source_status(self.host),
                          {"host": self.host, "pid": os.getpid(), "final": True, "sent": counts})


class FakeReceiver:
    def __init__(self, rundir: RunDir, host: str):
        self.rundir, self.host = rundir, host
        self.stopping = False
        self.copies = pd.DataFrame()
        self.done = False

    def status(self, final: bool = False) -> dict:
        return {"host": self.host, "pid": os.getpid(), "received": len(self.copies), "parts": 1,
                "final": final, "kernel_drops": {}}

    def sources_done(self, topo) -> bool:
        return all(read_json(self.rundir.source_status(h)).get("final") for h in topo.source_hosts())

    def run(self) -> None:
        write_json_atomic(self.rundir.receiver_status(self.host), self.status())
        topo = None
        while not self.stopping:
            time.sleep(0.05)
            if topo is None and self.rundir.topology.exists():
                topo = load_topology(self.rundir.topology)
            if topo is not None and not self.done and self.sources_done(topo):
                sent = pd.concat(pd.read_parquet(self.rundir.source_events(h)) for h in topo.source_hosts())
                copies = through_model(topo, sent)
                self.copies, self.done = copies[copies["operator"] == self.host], True
                write_json_atomic(self.rundir.receiver_status(self.host), self.status())
        self.copies.to_parquet(self.rundir.receiver_events(self.host, 0), index=False)
        write_json_atomic(self.rundir.receiver_status(self.host), self.status(final=True))


def main(argv=None) -> None:
    role, *rest = argv if argv is not None else sys.argv[1:]
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--topology", type=Path)
    args, _ = ap.parse_known_args(rest)
    rundir = RunDir(args.out)
    worker = FakeSource(rundir, args.host, args.topology) if role == "source" else FakeReceiver(rundir, args.host)
    run_until_signalled(worker)


if __name__ == "__main__":
    main()
