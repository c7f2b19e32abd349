"""``make bench``: speed and memory of the testbed's parts, written to files.

Measured, not asserted: each benchmark records what it measured and on what
machine, in ``results/bench/bench-<time>.json``.  Parts:

- oracle: verdicts per second;
- pipeline: ingress decisions and whole-frame processing per second of the
  embedded target's model, tumbling and sliding, and its register memory;
- lateness: the model's cost per event in order against late by 0..4 slides,
  and the time inside each target (model, bmv2) for late and in-order events;
- plan: entries and groups as N grows (the cost docs/windows.md bounds);
- emulation (root + Mininet): the embedded target at increasing offered
  rates, with the deliveries lost and the latency percentiles per rate;
- reconfiguration (root; bmv2 where present): changes of a sliding stream's
  operators while events flow, on each target: control-plane time to
  install a change, time from arming to the boundary, and every copy held
  to the epoch-aware oracle (events lost, copies wrong).
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
from testbed.rundir import BenchDir, RunDir
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


def bench_lateness(n=60_000) -> list[dict]:
    """Cost of a late event in the model: ingress time per event, in order
    against late by 0..4 slides (the late path's compare-and-subtract steps).

    Each late event is a copy of an in-order stream's event sent again
    ``back`` slides behind the newest, so the registers stay the same and
    only the path differs.
    """
    slide = 100
    data = _topology(200, slide, 6, kind="time")
    data["streams"][0]["window"]["lateness"] = 4 * slide
    rows = []
    for back in (None, 0, 1, 2, 3, 4):
        pipe = SplitterPipeline()
        Controller(pipe).install(SplitterPlan(parse_topology(data)))
        pipe.ingress(1, 0)                       # the origin
        newest = 10 * slide + slide // 2
        pipe.ingress(1, newest)                  # the newest timestamp, half way into slide 10
        late_ts = newest if back is None else newest - (slide // 4 if back == 0 else back * slide)
        if pipe.ingress(1, late_ts).drop:
            raise AssertionError(f"bench_lateness: the event {back} slides back was dropped")
        t0 = time.perf_counter()
        for _ in range(n):
            pipe.replicate(pipe.ingress(1, late_ts))
        seconds = time.perf_counter() - t0
        rows.append({"event": "in order" if back is None else f"late, {back} slides back",
                     "ns_per_event": seconds / n * 1e9, "events": n})
    return rows


def late_stream(events: int, rate: float, slide: int = 100):
    """One time stream allowing 4 slides of lateness, and its frames: every fifth
    event one to four slides behind the newest, the rest in order.  Returns the
    plan, the frames and what kind each seq is."""
    data = _topology(200, slide, 3, kind="time", events=events, rate=rate)
    data["streams"][0]["window"]["lateness"] = 4 * slide
    tpl = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)
    frames, kind, newest = [], {}, 0
    for seq in range(events):
        if seq % 5 == 4 and newest >= 5 * slide:
            back = 1 + (seq // 5) % 4
            ts, kind[seq] = newest - back * slide, f"late, {back} slides back"
        else:
            newest += 20
            ts, kind[seq] = newest, "in order"
        frames.append(tpl.frame(seq, ts))
    return SplitterPlan(parse_topology(data)), frames, kind


def time_in_switch(target: str, plan: SplitterPlan, frames: list[bytes], rate: float) -> list[tuple]:
    """Kernel timestamps of every frame into and every copy out of ``target``, on veth pairs."""
    from testbed.emulation.veth import StampedTaps, VethRig, send_frames
    from testbed.targets import switch_process

    with tempfile.TemporaryDirectory() as tmp, VethRig(4) as rig, \
            switch_process(target)(rig.switch_ends, Path(tmp), name=f"late-{target}",
                                   namespace=rig.namespace) as proc:
        api = proc.api()
        try:
            Controller(api).install(plan)
        finally:
            api.close()
        taps = StampedTaps({1: rig.switch_ends[1]}, {p: rig.switch_ends[p] for p in (2, 3, 4)},
                           rig.namespace.path)
        try:
            send_frames(rig.host_ends[1], frames, rate)
            return taps.drain(1.0)
        finally:
            taps.close()


def runnable(targets, rows: list[dict]):
    """The targets that can run here; a row saying why for each that cannot."""
    from testbed.emulation.network import mininet_missing
    from testbed.targets.bmv2.toolchain import toolchain_missing

    for target in targets:
        reason = toolchain_missing() if target == "bmv2" else mininet_missing()
        if reason:
            rows.append({"target": target, "skipped": reason})
        else:
            yield target


def bench_late_events_in_switch(targets=("model", "bmv2"), events=800, rate=200.0) -> list[dict]:
    """Time inside each target for in-order and late events of one time stream.

    Kernel timestamps on the switch's own ingress and egress interfaces give
    each copy's time in the switch (``time_in_switch``), at a rate low enough
    that no queue forms.  Both kinds of event share the run, so a busy moment
    of the machine hits them alike.
    """

    if os.geteuid() != 0:
        return [{"skipped": "veth pairs need root"}]
    plan, frames, kind = late_stream(events, rate)
    rows: list[dict] = []
    for target in runnable(targets, rows):
        stamps = time_in_switch(target, plan, frames, rate)
        ins = {seq: ns for direction, _port, _sid, seq, ns in stamps if direction == "in"}
        per_kind: dict[str, list[float]] = {}
        for direction, _port, _sid, seq, ns in stamps:
            if direction == "out" and seq in ins:
                per_kind.setdefault(kind[seq], []).append((ns - ins[seq]) / 1000)
        for label, us in sorted(per_kind.items()):
            us.sort()
            rows.append({"target": target, "event": label, "copies": len(us), "us_p50": us[len(us) // 2],
                         "us_mean": sum(us) / len(us), "us_p90": us[int(len(us) * 0.9)]})
    return rows


def bench_reconfiguration(targets=("model", "bmv2"), events=6000, rate=2000.0, changes=10) -> list[dict]:
    """Change a cbsw1-like stream (n=5, δ=1) between 6 and 3 operators,
    ``changes`` times, while its events flow at ``rate``; per target, the
    install time and the time to the boundary of each change, and whether
    every copy that left went where the oracle, given the boundaries the
    switch reports, says it must."""
    import threading

    from testbed.emulation.veth import StampedTaps, VethRig, send_frames
    from testbed.targets import switch_process

    if os.geteuid() != 0:
        return [{"skipped": "veth pairs need root"}]
    topo = parse_topology(_topology(5, 1, 6, events=events, rate=rate))
    wide = topo.streams[0]
    narrow = wide.model_copy(update={"operators": wide.operators[1:6:2]})
    tpl = FrameTemplate("02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", 1)
    frames = [tpl.frame(seq, seq) for seq in range(events)]
    rows: list[dict] = []
    for target in runnable(targets, rows):
        plan = SplitterPlan(topo)
        with tempfile.TemporaryDirectory() as tmp, VethRig(8) as rig, \
                switch_process(target)(rig.switch_ends, Path(tmp), name=f"reconf-{target}",
                                       namespace=rig.namespace) as proc:
            api = proc.api()
            ctl = Controller(api)
            ctl.install(plan)
            ports = {p: rig.switch_ends[p] for p in range(2, 8)}
            taps = StampedTaps({}, ports, rig.namespace.path)
            sender = threading.Thread(target=send_frames, args=(rig.host_ends[1], frames, rate))
            applied = []
            try:
                sender.start()
                time.sleep(0.2)      # let the stream get going: changes land mid-stream
                for i in range(changes):
                    if not sender.is_alive():
                        break
                    change = ctl.change(plan, narrow if i % 2 == 0 else wide, timeout=5)
                    applied.append(ctl.wait_applied(change, timeout=5))
                    ctl.wait_settled(1, timeout=5)
                sender.join()
                stamps = taps.drain(1.0)
                counters = ctl.stream_counters([1], list(ports))
            finally:
                taps.close()
                api.close()
        host_of = plan.host_of_port()
        got: dict[int, set] = {}
        left: dict[int, int] = {}        # seq -> when its first copy left (kernel clock, ns)
        for _d, port, _sid, seq, ns in stamps:
            got.setdefault(seq, set()).add(host_of[port])
            left[seq] = min(ns, left.get(seq, ns))
        oracle = wide.oracle([(c.boundary, wide.config(None, c.new.operators)) for c in applied])
        wrong = sum(1 for seq in range(events) if got.get(seq, set()) != set(oracle.step(seq, seq).operators))
        dropped = counters["streams"][1]["dropped"]
        for c in applied:
            rows.append({"target": target, "epoch": c.epoch, "N": len(c.new.operators),
                         "install_ms": c.install_s * 1000, "operations": c.operations,
                         # the boundary event's first copy leaving, against the moment of arming
                         # (both CLOCK_REALTIME); the controller's own poll only bounds it
                         "arm_to_boundary_ms": (left[c.boundary] / 1e9 - c.armed_at) * 1000,
                         "arm_to_seen_ms": (c.applied_at - c.armed_at) * 1000, "boundary": c.boundary})
        rows.append({"target": target, "summary": True, "changes": len(applied), "events": events,
                     "rate": rate, "accepted": counters["streams"][1]["in"], "dropped": dropped,
                     "events_with_wrong_copies": wrong})
    return rows


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
        for name, fn in (("oracle", bench_oracle), ("pipeline", bench_pipeline), ("lateness", bench_lateness),
                         ("plan", bench_plan)):
            print(f"bench: {name}", flush=True)
            report[name] = fn()
        print(json.dumps({k: report[k] for k in ("oracle", "pipeline", "lateness")}, indent=2))
    if not args.skip_emulation:
        if args.only_scale is None:
            print("bench: late events inside the switch (veth pairs, model and bmv2)", flush=True)
            report["late_in_switch"] = bench_late_events_in_switch()
            print("bench: reconfiguration while events flow (veth pairs, model and bmv2)", flush=True)
            report["reconfiguration"] = bench_reconfiguration()
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
