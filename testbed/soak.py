"""``make soak``: start and abort runs at random phases, then count what they left.

Each cycle starts ``testbed run`` on a small topology, waits until the run
reaches a phase drawn at random (from its state file, as ``testbed clean``
sees it), waits a random fraction of a second more, and stops it the way a
user might: Ctrl-C (SIGINT), ``kill`` (SIGTERM), or ``kill -9`` followed by
``testbed clean``.  Cycles aimed at Spark's phases run with Spark.

Before the first cycle and after the last, the soak counts what runs can
leave on a machine (``testbed.emulation.footprint``): processes (found by
the tag every process of a run inherits), interfaces and named network
namespaces in the root namespace, mounts, temporary files (the runs get a
temporary folder of their own, for Python, Spark and Java alike) and run
state files.  Only what can be the runs' is counted as a leak; anything
else that appeared on the machine meanwhile is listed apart.  The record
goes to ``results/soak/<id>/soak.json`` (``SoakDir``).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import yaml

from testbed import ROOT
from testbed.emulation.footprint import TAG_ENV, Footprint, leaks, tagged_processes
from testbed.rundir import SoakDir

#: The phases of a run in order, as its state file names them (``Run.phase``).
PHASES = ["starting", "spark submit", "network", "plan", "operators", "stream", "stop", "spark", "conclude"]
SPARK_PHASES = {"spark submit", "spark"}
SIGNALS = ["SIGINT", "SIGTERM", "SIGKILL"]
SWITCH = "r20"


def soak_topology() -> dict:
    ops = ["op1", "op2", "op3"]
    return {"name": "soak", "switch": {"name": SWITCH}, "hosts": {h: {} for h in ["src"] + ops},
            "streams": [{"id": 5, "source": "src", "window": {"kind": "count", "size": 4, "slide": 2},
                         "operators": ops, "events": 3000, "rate": 1000}]}


def run_env(soak: SoakDir, tag: str) -> dict[str, str]:
    """The environment of a soak run: its tag, and temporary files kept in the soak's own folder."""
    tmp = str(soak.tmp)
    return dict(os.environ, **{TAG_ENV: tag, "TESTBED_STATE_DIR": str(soak.state), "TMPDIR": tmp,
                               "SPARK_LOCAL_DIRS": tmp, "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp}"})


def current_phase(soak: SoakDir) -> Optional[str]:
    for path in soak.state.glob("*.json"):
        try:
            return json.loads(path.read_text()).get("phase")
        except (OSError, ValueError):
            pass
    return None


def reached(phase: Optional[str], target: str) -> bool:
    return phase in PHASES and PHASES.index(phase) >= PHASES.index(target)


def plan_cycles(cycles: int, rng: random.Random) -> list[tuple[str, str]]:
    """(phase, signal) per cycle: every phase and every signal as often as the cycles allow, in random order."""
    phases = (PHASES * cycles)[:cycles]
    signals = (SIGNALS * cycles)[:cycles]
    rng.shuffle(phases)
    rng.shuffle(signals)
    return list(zip(phases, signals))


def cycle(soak: SoakDir, index: int, target: str, signame: str, rng: random.Random, soak_id: str) -> dict:
    """One start/abort cycle; what was aimed at, what was hit, and what was left right after."""
    spark = target in SPARK_PHASES
    tag = f"soak-{soak_id}-{index}"
    env = run_env(soak, tag)
    rundir = soak.run(index)
    cmd = [sys.executable, "-m", "testbed.cli", "run", str(soak.topology), "--out", str(rundir.root)]
    cmd += ["--spark-master", "local[1]"] if spark else ["--no-spark"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    phase = None
    while proc.poll() is None and not reached(phase, target):
        time.sleep(0.02)
        phase = current_phase(soak) or phase
    time.sleep(rng.uniform(0, 0.3))
    hit = current_phase(soak) or phase
    if proc.poll() is None:
        os.kill(proc.pid, signal.Signals[signame])
    _, stderr = proc.communicate(timeout=600)
    out = {"cycle": index, "target": target, "signal": signame, "hit": hit if proc.returncode != 0 else "finished",
           "exit": proc.returncode, "spark": spark, "seconds": round(time.monotonic() - t0, 2),
           "message": (stderr.strip().splitlines() or [""])[-1]}
    if signame == "SIGKILL":
        clean = subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], cwd=ROOT, env=env,
                               capture_output=True, text=True)
        out["clean"] = clean.stdout.strip().splitlines()
    out["processes_left"] = len(tagged_processes(tag))
    return out


def ours(name: str, soak: SoakDir) -> bool:
    """Whether an interface or mount point that appeared can be a soak run's."""
    return name.startswith((SWITCH, "tbq", str(soak.root), f"/run/netns/{SWITCH}"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "soak")
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    soak_id = time.strftime("%Y%m%d-%H%M%S")
    soak = SoakDir(args.out / soak_id).create()
    soak.topology.write_text(yaml.safe_dump(soak_topology(), sort_keys=False))
    rng = random.Random(seed)
    watched = [soak.tmp, soak.state]
    before = Footprint.take(watched)
    record = {"seed": seed, "started": time.time(), "cycles": []}
    for i, (target, signame) in enumerate(plan_cycles(args.cycles, rng), start=1):
        row = cycle(soak, i, target, signame, rng, soak_id)
        record["cycles"].append(row)
        print(f"cycle {i:2d}: aimed at {row['target']!r}, {row['signal']} hit {row['hit']!r}: exit {row['exit']}, "
              f"{row['processes_left']} processes left ({row['seconds']:.1f}s)", flush=True)
        soak.write_record(record)
    time.sleep(1)          # let the last namespaces go as their processes are reaped
    after = Footprint.take(watched)
    diff = leaks(before, after, [f"soak-{soak_id}-{i}" for i in range(1, args.cycles + 1)])
    counted = {"processes": diff["processes"],
               "interfaces": [n for n in diff["interfaces"] if ours(n, soak)],
               "namespaces": [n for n in diff["namespaces"] if ours(n, soak)],
               "mounts": [m for m in diff["mounts"] if ours(m, soak)],
               "temp_files": [f for f in diff["files"] if f.startswith(str(soak.tmp))],
               "state_files": [f for f in diff["files"] if f.startswith(str(soak.state)) and f.endswith(".json")]}
    record["leaks"] = {k: len(v) for k, v in counted.items()}
    record["leaked"] = counted
    record["appeared_elsewhere"] = {k: [n for n in diff[k] if n not in counted.get(k, [])]
                                    for k in ("interfaces", "namespaces", "mounts")}
    record["ended"] = time.time()
    soak.write_record(record)
    hits = sorted({row["hit"] for row in record["cycles"]})
    print(f"phases hit: {', '.join(hits)}")
    print("leaks after {} cycles: {}".format(args.cycles, ", ".join(f"{k}={v}" for k, v in record["leaks"].items())))
    print(f"written: {soak.record}")
    return 0 if not any(record["leaks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
