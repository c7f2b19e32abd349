"""The soak (``make soak``): start and abort runs at random phases, then count what they left.

Each cycle starts ``testbed run`` on a small topology, waits until the run
reaches a phase drawn at random (from its state file, as ``testbed clean``
sees it), waits a random fraction of a second more, and stops it the way a
user might: Ctrl-C (SIGINT), ``kill`` (SIGTERM), or ``kill -9``; after a
``kill -9`` the run's watchdog has ``WATCHDOG_S`` to end its processes, then
``testbed clean`` runs and its output (``nothing to clean`` when the
watchdog missed nothing) is kept in the cycle's row.  Cycles aimed at Spark's phases run with Spark.

Before the first cycle and after the last, the soak counts what runs can
leave on a machine (``testbed.emulation.footprint``): processes (found by
the tag every process of a run inherits), interfaces and named network
namespaces in the root namespace, mounts, temporary files (the runs get a
temporary folder of their own, for Python, Spark and Java alike) and run
state files.  Only what can be the runs' is counted as a leak; anything
else that appeared on the machine meanwhile is listed apart.  It passes
when nothing leaked.  Its files, in its experiment directory:

    experiment.json      the seed, the leaks counted and listed (``ours``)
    raw/cycles.parquet   one row per cycle: aimed at, hit, signal, exit, processes left
    raw/topology.yaml    the topology every cycle runs
    runs/cycle-<k>/      the cycles' run directories
    tmp/  state/         the runs' temporary folder and state files
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import yaml
from pydantic import Field

from testbed import ROOT
from testbed.analysis.plots import plt, save_figure
from testbed.emulation.footprint import TAG_ENV, Footprint, leaks, tagged_processes
from testbed.experiments.base import ExperimentKind, KindParams, interruptible
from testbed.rundir import ExperimentDir
from testbed.semantics.strict import Repeats

#: The phases of a run in order, as its state file names them (``Run.phase``).
PHASES = ["starting", "spark submit", "network", "plan", "operators", "stream", "stop", "spark", "conclude"]
SPARK_PHASES = {"spark submit", "spark"}
SIGNALS = ["SIGINT", "SIGTERM", "SIGKILL"]
SWITCH = "r20"
#: A cycle's run that has not ended this long after its signal is a failure of the soak itself.
EXIT_TIMEOUT_S = 600
#: What a SIGKILLed run's watchdog has to end every process of the run in.
WATCHDOG_S = 10


class SoakParams(KindParams):
    targets: list[str] = Field(default=["model"], min_length=1)
    cycles: Repeats = 20
    seed: Optional[int] = Field(default=None, description="of the phases, signals and delays (default: the time)")


class SoakFiles:
    """Where the soak keeps its topology, its cycles and its runs' temporary files."""

    def __init__(self, expdir: ExperimentDir):
        self.expdir = expdir
        self.cycles = expdir.raw / "cycles.parquet"
        self.topology = expdir.raw / "topology.yaml"
        self.tmp = expdir.root / "tmp"
        self.state = expdir.root / "state"

    def create(self) -> "SoakFiles":
        for folder in (self.tmp, self.state):
            folder.mkdir(parents=True, exist_ok=True)
        self.topology.write_text(yaml.safe_dump(soak_topology(), sort_keys=False))
        return self

    def run(self, cycle: int) -> Path:
        return self.expdir.run(f"cycle-{cycle:02d}").root

    def current_phase(self) -> Optional[str]:
        """The phase the running cycle's state file names, if it has one yet."""
        for path in self.state.glob("*.json"):
            try:
                return json.loads(path.read_text()).get("phase")
            except (OSError, ValueError):
                pass
        return None

    def ours(self, name: str) -> bool:
        """Whether an interface or mount point that appeared can be a soak run's."""
        return name.startswith((SWITCH, "tbq", str(self.expdir.root), f"/run/netns/{SWITCH}"))


def soak_topology() -> dict[str, Any]:
    ops = ["op1", "op2", "op3"]
    return {"name": "soak", "switch": {"name": SWITCH}, "hosts": {h: {} for h in ["src"] + ops},
            "streams": [{"id": 5, "source": "src", "window": {"kind": "count", "size": 4, "slide": 2},
                         "operators": ops, "events": 3000, "rate": 1000}]}


def reached(phase: Optional[str], target: str) -> bool:
    return phase in PHASES and PHASES.index(phase) >= PHASES.index(target)


def plan_cycles(cycles: int, rng: random.Random) -> list[tuple[str, str]]:
    """(phase, signal) per cycle: every phase and every signal as often as the cycles allow, in random order."""
    phases = (PHASES * cycles)[:cycles]
    signals = (SIGNALS * cycles)[:cycles]
    rng.shuffle(phases)
    rng.shuffle(signals)
    return list(zip(phases, signals))


class Soak(ExperimentKind):
    """Runs aborted at random phases with random signals, and the leaks counted after them."""

    Params = SoakParams
    #: Not compared with the papers: the soak checks the testbed's own cleanup.
    paper: dict[str, Any] = {}

    def measure(self) -> dict[str, Any]:
        p = self.params
        seed = p.seed if p.seed is not None else int(time.time())
        rng = random.Random(seed)
        files = SoakFiles(self.expdir).create()
        watched = [files.tmp, files.state]
        before = Footprint.take(watched)
        tags, rows = [], []
        # SIGTERM becomes an exception, so the cycle running then stops its run too
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"):
            for i, (phase, signame) in enumerate(plan_cycles(p.cycles, rng), start=1):
                tags.append(f"soak-{self.expdir.root.name}-{i}")
                row = self.cycle(files, i, p.targets[(i - 1) % len(p.targets)], phase, signame, rng, tags[-1])
                rows.append(row)
                pd.DataFrame(rows).to_parquet(files.cycles, index=False)
                self.log(f"cycle {i:2d}: aimed at {phase!r}, {signame} hit {row['hit']!r}: exit {row['exit']}, "
                         f"{row['processes_left']} processes left ({row['seconds']:.1f}s)")
        time.sleep(1)          # let the last namespaces go as their processes are reaped
        diff = leaks(before, Footprint.take(watched), tags)
        counted = {"processes": diff["processes"],
                   "interfaces": [n for n in diff["interfaces"] if files.ours(n)],
                   "namespaces": [n for n in diff["namespaces"] if files.ours(n)],
                   "mounts": [m for m in diff["mounts"] if files.ours(m)],
                   "temp_files": [f for f in diff["files"] if f.startswith(str(files.tmp))],
                   "state_files": [f for f in diff["files"] if f.startswith(str(files.state)) and f.endswith(".json")]}
        return {"seed": seed, "cycles": p.cycles, "phases_hit": sorted({row["hit"] for row in rows}),
                "leaks": {k: len(v) for k, v in counted.items()}, "leaked": counted,
                "appeared_elsewhere": {k: [n for n in diff[k] if n not in counted.get(k, [])]
                                       for k in ("interfaces", "namespaces", "mounts")}}

    def cycle(self, files: SoakFiles, index: int, target: str, phase: str, signame: str, rng: random.Random,
              tag: str) -> dict[str, Any]:
        """One start/abort cycle: what was aimed at, what was hit, and what was left right after."""
        spark = phase in SPARK_PHASES
        tmp = str(files.tmp)
        env = dict(os.environ, **{TAG_ENV: tag, "TESTBED_STATE_DIR": str(files.state), "TMPDIR": tmp,
                                  "SPARK_LOCAL_DIRS": tmp, "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp}"})
        cmd = [sys.executable, "-m", "testbed.cli", "run", str(files.topology), "--out", str(files.run(index)),
               "--target", target]
        cmd += ["--spark-master", "local[1]"] if spark else ["--no-spark"]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            seen = None
            while proc.poll() is None and not reached(seen, phase):
                time.sleep(0.02)
                seen = files.current_phase() or seen
            time.sleep(rng.uniform(0, 0.3))
            hit = files.current_phase() or seen
            if proc.poll() is None:
                os.kill(proc.pid, signal.Signals[signame])
            _, stderr = proc.communicate(timeout=EXIT_TIMEOUT_S)
        finally:
            if proc.poll() is None:          # the soak itself was stopped: its run goes with it
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=EXIT_TIMEOUT_S)
        row = {"cycle": index, "target": target, "aimed": phase, "signal": signame,
               "hit": hit if proc.returncode != 0 else "finished", "exit": proc.returncode, "spark": spark,
               "seconds": round(time.monotonic() - t0, 2), "message": (stderr.strip().splitlines() or [""])[-1],
               "clean": ""}
        if signame == "SIGKILL":
            # The run's watchdog ends what it started (emulation.lifeline); `testbed clean`
            # after it says whether it missed anything.
            deadline = time.monotonic() + WATCHDOG_S
            while tagged_processes(tag) and time.monotonic() < deadline:
                time.sleep(0.05)
            clean = subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], cwd=ROOT, env=env,
                                   capture_output=True, text=True)
            row["clean"] = clean.stdout.strip()
        row["processes_left"] = len(tagged_processes(tag))
        return row

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        from testbed.experiments.shipped import plan_cost
        from testbed.semantics.topology import parse_topology

        return {"soak": plan_cost(parse_topology(soak_topology(), "soak topology"))}

    def ok(self, ours: dict[str, Any]) -> bool:
        return not any(ours["leaks"].values())

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        rows = pd.read_parquet(SoakFiles(expdir).cycles)
        order = PHASES + ["finished"]
        fig, ax = plt.subplots(figsize=(9, 4))
        for i, signame in enumerate(SIGNALS):
            part = rows[rows["signal"] == signame]
            left = part["processes_left"] > 0
            y = part["hit"].map(lambda h: order.index(h) if h in order else -1)
            ax.scatter(part.loc[~left, "cycle"], y[~left], marker="o", color=f"C{i}", label=signame)
            ax.scatter(part.loc[left, "cycle"], y[left], marker="x", s=60, color="red")
        ax.set_yticks(range(len(order)), order)
        ax.set(xlabel="cycle", ylabel="phase the signal hit")
        ax.legend(fontsize=8)
        found = (record.get("ours") or {}).get("leaks", {})
        ax.set_title("soak: runs aborted at random phases (red x: processes left); leaks after: "
                     + (", ".join(f"{k}={v}" for k, v in found.items()) or "not counted"), fontsize=9)
        return [save_figure(fig, expdir.figure("soak"))]
