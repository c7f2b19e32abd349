"""``make bench``: speed and memory of the testbed's parts, written to files.

Measured, not asserted: each benchmark records what it measured and on what
machine, in ``results/bench/bench-<time>.json``.  Parts:

- oracle: verdicts per second;
- pipeline: ingress decisions and whole-frame processing per second of the
  embedded target's model, tumbling and sliding, and its register memory;
- plan: entries and groups as N grows (the cost docs/windows.md bounds);
- emulation (root + Mininet): the embedded target at increasing offered
  rates, with the deliveries lost and the latency percentiles per rate;
- scale (root + Mininet, Spark for the last): 1,000 concurrent streams from
  four sources, 64 operator hosts on one switch, and 1,000,000 events end to
  end with Spark.  Each records its setup time (the phases before the
  stream), the peak memory of all its processes together, the events per
  second it streamed, and whether ``testbed check`` passes on it.  The run
  directories stay under ``results/bench/scale-<time>/``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Optional

import yaml

from testbed import ROOT
from testbed.analysis.plots import latency_table
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import FrameTemplate
from testbed.emulation.footprint import TAG_ENV, memory_of
from testbed.runs.rundir import BenchDir, RunDir
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import load_topology, parse_topology
from testbed.semantics.windows import CountWindows, StreamOracle


def _topology(size, slide, n_ops, kind="count", events=1, rate=1):
    hosts = {"src": {}} | {f"op{i}": {} for i in range(n_ops)}
    return {"name": "bench", "hosts": hosts, "streams": [
        {"id": 1, "source": "src", "window": {"kind": kind, "size": size, "slide": slide},
         "operators": [f"op{i}" for i in range(n_ops)], "events": events, "rate": rate}]}


def bench_oracle(n=200_000) -> dict:
    oracle = StreamOracle(CountWindows(5, 1), [f"o{i}" for i in range(6)])
    t0 = time.perf_counter()
    for k in range(n):
        oracle.step(k, k)
    dt = time.perf_counter() - t0
    return {"spec": "count n=5 slide=1 N=6", "events": n, "seconds": dt, "events_per_s": n / dt}


def bench_pipeline(n=100_000) -> list[dict]:
    out = []
    for label, (size, slide) in {"tumbling n=100 slide=100": (100, 100), "sliding n=5 slide=1": (5, 1),
                                 "sliding n=5 slide=2": (5, 2)}.items():
        topo = parse_topology(_topology(size, slide, 6))
        pipe = SplitterPipeline()
        Controller(pipe).install(SplitterPlan(topo))
        t0 = time.perf_counter()
        for k in range(n):
            pipe.replicate(pipe.ingress(1, k))
        t_ingress = time.perf_counter() - t0
        tpl = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)
        frames = [tpl.frame(k, k) for k in range(n // 4)]
        pipe.register_reset("initialized")
        copies = 0
        t0 = time.perf_counter()
        for f in frames:
            copies += len(pipe.process(f))
        t_frames = time.perf_counter() - t0
        out.append({"spec": label, "decisions_per_s": n / t_ingress, "frames_per_s": len(frames) / t_frames,
                    "copies_per_frame": copies / len(frames)})
    tracemalloc.start()
    SplitterPipeline()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out.append({"spec": "memory of an empty pipeline (registers for 65,536 streams)", "peak_bytes": peak})
    return out


def bench_plan() -> list[dict]:
    rows = []
    for n_ops in (2, 4, 8, 16, 32, 64):
        for size, slide in ((5, 1), (5, 2), (100, 30), (10, 10)):
            topo = parse_topology(_topology(size, slide, n_ops))
            t0 = time.perf_counter()
            cost = SplitterPlan(topo).cost()
            rows.append({"N": n_ops, "size": size, "slide": slide, "seconds": time.perf_counter() - t0, **cost})
    return rows


def bench_emulation(rates=(1000, 2000, 4000, 8000), events=8000) -> list[dict]:
    from testbed.emulation.network import mininet_missing
    reason = mininet_missing()
    if reason:
        return [{"skipped": reason}]
    rows = []
    for rate in rates:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "topo.yaml"
            data = _topology(5, 1, 4, events=events, rate=rate)
            data["switch"] = {"name": "bsw"}
            path.write_text(yaml.safe_dump(data))
            out = Path(tmp) / "run"
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(path), "--out", str(out),
                                  "--no-spark"], cwd=ROOT, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            rundir = RunDir(out)
            run = rundir.read_record()
            lat = latency_table(rundir)["latency_us"]
            acct = run["accounting"]["streams"]["1"]
            rows.append({"offered_rate": rate, "events": events, "exit": res.returncode,
                         "expected_deliveries": run["expected_deliveries"],
                         "lost": acct["lost"], "switch_socket": run["accounting"]["switch_socket"],
                         "latency_us_p50": float(lat.quantile(0.5)), "latency_us_p99": float(lat.quantile(0.99)),
                         "stream_seconds": run["phases_s"]["stream"], "wall_seconds": wall})
    return rows


def scale_topologies() -> dict[str, tuple[dict, bool]]:
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
    import pandas as pd
    if not rundir.sources.exists():
        return None
    sent = pd.read_parquet(rundir.sources, columns=["send_ns"])["send_ns"]
    span = (sent.max() - sent.min()) / 1e9 if len(sent) > 1 else 0
    return round(len(sent) / span) if span > 0 else None


class MemoryPeak:
    """Samples the resident memory of every process of a tagged run, in a thread, and keeps the peak."""

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


def bench_scale(bench: BenchDir, stamp: str, names: Optional[list[str]] = None) -> list[dict]:
    """The scale runs, one after the other: setup time, peak memory, events/s, and testbed check."""
    from testbed.emulation.network import mininet_missing
    reason = mininet_missing()
    if reason:
        return [{"skipped": reason}]
    rows = []
    for name, (topology, spark) in scale_topologies().items():
        if names and name not in names:
            continue
        path = bench.scale_topology(stamp, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(topology, sort_keys=False))
        rundir = bench.scale_run(stamp, name)
        tag = f"bench-{stamp}-{name}"
        cmd = [sys.executable, "-m", "testbed.cli", "run", str(path), "--out", str(rundir.root)]
        cmd += ["--spark-master", "local[2]"] if spark else ["--no-spark"]
        print(f"bench: scale {name}", flush=True)
        t0 = time.perf_counter()
        with MemoryPeak(tag) as memory:
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, **{TAG_ENV: tag}))
        wall = time.perf_counter() - t0
        topo = load_topology(path)
        estimate = topo.memory_need(spark)
        row = {"name": name, "spark": spark, "exit": res.returncode, "wall_s": round(wall, 1),
               "estimated_memory_mib": round(estimate / 2**20),
               "peak_memory_mib_pss": round(memory.peak / 2**20), "streams": len(topology["streams"]),
               "hosts": len(topology["hosts"]), "events": sum(s["events"] for s in topology["streams"])}
        if not rundir.is_run():
            rows.append(dict(row, error=res.stderr.strip().splitlines()[-1:]))
            continue
        run = rundir.read_record()
        phases = run.get("phases_s", {})
        acct = run.get("accounting", {}).get("streams", {})
        row.update({
            "setup_s": round(sum(phases.get(p, 0) for p in ("spark submit", "network", "plan", "operators")), 1),
            "phases_s": phases, "install": run.get("install"),
            "events_per_s": sending_rate(rundir),
            "expected_deliveries": run.get("expected_deliveries"),
            "lost": sum(a["lost"] for a in acct.values()),
            "windows_ok": all(w["ok"] for w in run.get("window_check", {}).values()) if spark else None,
            "error": run.get("error"),
        })
        check = subprocess.run([sys.executable, "-m", "testbed.cli", "check", str(rundir.root)], cwd=ROOT,
                               capture_output=True, text=True)
        row["check_passes"] = check.returncode == 0
        row["check_failures"] = [line for line in check.stdout.splitlines() if "FAIL" in line][:5]
        rows.append(row)
        print(row, flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench")
    ap.add_argument("--skip-emulation", action="store_true", help="Only the in-process parts.")
    ap.add_argument("--only-scale", nargs="*", metavar="NAME", default=None,
                    help="Only the scale runs (all, or the ones named: streams1000, operators64, events1m).")
    args = ap.parse_args(argv)
    bench = BenchDir(args.out)
    bench.root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "kernel": platform.release()}, "started": time.time()}
    if args.only_scale is None:
        for name, fn in (("oracle", bench_oracle), ("pipeline", bench_pipeline), ("plan", bench_plan)):
            print(f"bench: {name}", flush=True)
            report[name] = fn()
        print(json.dumps({k: report[k] for k in ("oracle", "pipeline")}, indent=2))
    if not args.skip_emulation:
        if args.only_scale is None:
            print("bench: emulation (embedded target, rate sweep)", flush=True)
            report["emulation"] = bench_emulation()
            for row in report["emulation"]:
                print(row)
        report["scale"] = bench_scale(bench, stamp, args.only_scale or None)
    path = bench.report(stamp)
    path.write_text(json.dumps(report, indent=2))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
