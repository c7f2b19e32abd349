"""Whole emulation runs of the embedded target: a rate sweep, and runs at scale.

- the rate sweep: one stream at increasing offered rates, with the
  deliveries lost and the delivery latency per rate (no Spark);
- the scale runs: 1,000 concurrent streams from four sources, 64 operator
  hosts on one switch, and 1,000,000 events end to end with Spark.  Each
  records its setup time (the phases before the stream), the peak memory of
  all its processes together, the events per second it streamed, and
  whether ``testbed check`` passes on it.  A scale run is a ``testbed run``
  of its own, so that the processes tagged for it are its own and none of
  the bench's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from typing import Any, Literal, Optional

import pandas as pd
import yaml
from pydantic import Field

from testbed import ROOT
from testbed.analysis.plots import latency_table
from testbed.emulation.footprint import TAG_ENV, memory_of
from testbed.experiments.base import Settings
from testbed.experiments.bench.costs import one_stream
from testbed.experiments.bench.files import BenchFiles
from testbed.experiments.shipped import scenario_run
from testbed.rundir import RunDir
from testbed.semantics.strict import EventCount, Rate, StrictModel
from testbed.semantics.topology import load_topology

#: The whole runs are the embedded target's: bmv2 in Mininet would measure bmv2's own limits.
TARGET = "model"
ScaleRun = Literal["streams1000", "operators64", "events1m"]
SCALE_RUNS: list[ScaleRun] = ["streams1000", "operators64", "events1m"]
#: The phases before the stream: a scale run's setup time.
SETUP_PHASES = ("spark submit", "network", "plan", "operators")


class SweepParams(StrictModel):

    rates: list[Rate] = Field(default=[1000, 2000, 4000, 8000], min_length=1)
    events: EventCount = 8000


def rate_sweep(files: BenchFiles, params: SweepParams, settings: Settings) -> list[dict[str, Any]]:
    """One run per offered rate: deliveries expected and lost, latency percentiles, durations."""
    rows = []
    for rate in params.rates:
        name = f"rate-{rate:g}"
        data = one_stream(5, 1, 4, events=params.events, rate=rate) | {"switch": {"name": "bsw"}}
        path = files.topology(name)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        rundir = files.run(name)
        t0 = time.perf_counter()
        passed = scenario_run(load_topology(path), path, TARGET, rundir, replace(settings, spark=False))
        wall = time.perf_counter() - t0
        run, verdicts = rundir.read_record(), rundir.read_verdicts()
        lat = latency_table(rundir)["latency_us"]
        acct = verdicts.accounting["streams"]["1"]
        rows.append({"offered_rate": rate, "events": params.events, "checks_ok": passed,
                     "expected_deliveries": run.expected_deliveries, "lost": acct["lost"],
                     "latency_us_p50": float(lat.quantile(0.5)), "latency_us_p99": float(lat.quantile(0.99)),
                     "stream_seconds": run.phases_s["stream"], "wall_seconds": wall})
    return rows


def scale_topologies() -> dict[ScaleRun, tuple[dict, bool]]:
    """name -> (topology, with Spark) of the three scale runs."""
    ops8 = [f"op{i}" for i in range(1, 9)]
    windows = [{"kind": "count", "size": 10, "slide": 10}, {"kind": "count", "size": 4, "slide": 2},
               {"kind": "time", "size": 20, "slide": 10}]
    streams = [{"id": i, "source": f"src{i % 4 + 1}", "window": windows[i % 3],
                "operators": [ops8[(i + k) % 8] for k in range(4)], "events": 100, "rate": 5}
               for i in range(1, 1001)]
    ops64 = [f"op{i}" for i in range(1, 65)]
    return {
        "streams1000": ({"name": "streams1k", "switch": {"name": "bsc1"},
                         "hosts": {h: {} for h in [f"src{i}" for i in range(1, 5)] + ops8}, "streams": streams},
                        False),
        "operators64": ({"name": "ops64", "switch": {"name": "bsc2"}, "hosts": {h: {} for h in ["src"] + ops64},
                         "streams": [{"id": 1, "source": "src", "window": {"kind": "count", "size": 128, "slide": 64},
                                      "operators": ops64, "events": 32000, "rate": 4000}]}, False),
        "events1m": ({"name": "events1m", "switch": {"name": "bsc3"},
                      "hosts": {h: {} for h in ["src", "o1", "o2", "o3", "o4"]},
                      "streams": [{"id": 1, "source": "src", "window": {"kind": "count", "size": 1000, "slide": 1000},
                                   "operators": ["o1", "o2", "o3", "o4"], "events": 1_000_000, "rate": 10_000,
                                   "query": {"kind": "sum"}}]}, True),
    }


def sending_rate(rundir: RunDir) -> Optional[float]:
    """Events per second from the first send to the last, over all sources (None without any)."""
    if not rundir.sources.exists():
        return None
    sent = pd.read_parquet(rundir.sources, columns=["send_ns"])["send_ns"]
    span = (sent.max() - sent.min()) / 1e9 if len(sent) > 1 else 0
    return round(len(sent) / span) if span > 0 else None


class MemoryPeak:
    """Samples the memory of every process of a tagged run, in a thread, and keeps the peak."""

    def __init__(self, tag: str, every_s: float = 1.0):
        self.tag, self.every_s, self.peak = tag, every_s, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.wait(self.every_s):
            self.peak = max(self.peak, memory_of(self.tag))

    def __enter__(self) -> "MemoryPeak":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


def testbed(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """The ``testbed`` command, as a user would run it."""
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          **kwargs)


def scale_run(files: BenchFiles, name: ScaleRun, tag: str) -> dict[str, Any]:
    """One scale run: setup time, peak memory, events/s, and whether ``testbed check`` passes."""
    topology, spark = scale_topologies()[name]
    path = files.topology(f"scale-{name}")
    path.write_text(yaml.safe_dump(topology, sort_keys=False))
    rundir = files.run(f"scale-{name}")
    args = ["run", str(path), "--out", str(rundir.root), "--target", TARGET]
    args += ["--spark-master", "local[2]"] if spark else ["--no-spark"]
    t0 = time.perf_counter()
    with MemoryPeak(tag) as memory:
        res = testbed(*args, env=dict(os.environ, **{TAG_ENV: tag}))
    row = {"name": name, "spark": spark, "exit": res.returncode, "wall_s": round(time.perf_counter() - t0, 1),
           "estimated_memory_mib": round(load_topology(path).memory_need(spark) / 2**20),
           "peak_memory_mib_pss": round(memory.peak / 2**20), "streams": len(topology["streams"]),
           "hosts": len(topology["hosts"]), "events": sum(s["events"] for s in topology["streams"])}
    if not rundir.is_run():
        return dict(row, error=" ".join(res.stderr.strip().splitlines()[-1:]), check_passes=False)
    run, verdicts = rundir.read_record(), rundir.read_verdicts()
    phases = run.phases_s
    acct = verdicts.accounting.get("streams", {}) if verdicts else {}
    check = testbed("check", str(rundir.root))
    return dict(row, setup_s=round(sum(phases.get(p, 0) for p in SETUP_PHASES), 1),
                events_per_s=sending_rate(rundir), expected_deliveries=run.expected_deliveries,
                lost=sum(a["lost"] for a in acct.values()),
                windows_ok=all(w.ok for w in verdicts.window_check.values()) if spark and verdicts else None,
                error=run.error, check_passes=check.returncode == 0,
                check_failures=[line for line in check.stdout.splitlines() if "FAIL" in line][:5])
