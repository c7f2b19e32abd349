"""The ``bench`` kind: runs the parts its file selects, one raw table each, and a summary per part."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal, Optional

import pandas as pd
from pydantic import Field, field_validator

from testbed.experiments.base import ExperimentKind, KindParams, interruptible
from testbed.experiments.bench import costs, figures, instructions, late, reconfig, runs, stalled
from testbed.experiments.bench.baseline import against_baseline
from testbed.experiments.bench.costs import CostParams
from testbed.experiments.bench.files import BenchFiles
from testbed.experiments.bench.instructions import InstructionParams
from testbed.experiments.bench.late import LateParams
from testbed.experiments.bench.reconfig import ReconfigParams
from testbed.experiments.bench.runs import SCALE_RUNS, ScaleRun, SweepParams
from testbed.experiments.bench.stalled import StalledParams
from testbed.rundir import ExperimentDir

Part = Literal["oracle", "pipeline", "lateness", "plan", "late_in_switch", "instructions", "reconfiguration",
               "stalled_input", "emulation", "scale"]
PARTS: list[Part] = ["oracle", "pipeline", "lateness", "plan", "late_in_switch", "instructions", "reconfiguration",
                     "stalled_input", "emulation", "scale"]
#: Parts on veth pairs (root), and parts in Mininet (root and Mininet).
VETH = {"late_in_switch", "instructions", "reconfiguration", "stalled_input"}
MININET = {"emulation", "scale"}
#: A part's rows for its raw table, and its summary for ``ours``.
Measured = tuple[list[dict[str, Any]] | pd.DataFrame, Any]


class BenchParams(KindParams):
    parts: list[Part] = Field(default=PARTS, min_length=1, description="the parts to run, in this order")
    # Each part's parameters.  Their classes are imported by name: a field named like its module
    # (costs, late) would hide the module inside this class body.
    costs: CostParams = CostParams()
    late: LateParams = LateParams()
    instructions: InstructionParams = InstructionParams()
    reconfiguration: ReconfigParams = ReconfigParams()
    stalled: StalledParams = StalledParams()
    sweep: SweepParams = SweepParams()
    #: Which scale runs the ``scale`` part makes (``parts: [scale]`` runs only those).
    scale: list[ScaleRun] = Field(default=SCALE_RUNS, min_length=1)

    @field_validator("parts", "scale")
    @classmethod
    def _once(cls, names: list[str]) -> list[str]:
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{twice[0]!r} is named twice")
        return names


def cannot_run(part: str) -> Optional[str]:
    """Why ``part`` cannot run on this machine, or ``None``."""
    from testbed.emulation.network import mininet_missing

    if part in VETH | MININET and os.geteuid() != 0:
        return "needs root"
    if part in MININET:
        return mininet_missing()
    if part == "instructions":
        return instructions.missing()
    return None


class Bench(ExperimentKind):
    """The testbed's own speed and memory, part by part."""

    Params = BenchParams
    #: Not compared with the papers: these are the testbed's own numbers.
    paper: dict[str, Any] = {}
    accepts = frozenset({"targets"})

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        """The plans of the runs the bench makes: the rate sweep's and each scale run's."""
        from testbed.experiments.bench.costs import one_stream
        from testbed.experiments.shipped import plan_cost
        from testbed.semantics.topology import parse_topology

        out = {f"sweep-{rate:g}": plan_cost(parse_topology(one_stream(5, 1, 4, events=params.sweep.events,
                                                                      rate=rate), f"sweep {rate:g}"))
               for rate in params.sweep.rates}
        for name, (topology, _spark) in runs.scale_topologies().items():
            if name in params.scale:
                out[name] = plan_cost(parse_topology(topology, name))
        return out

    def measure(self) -> dict[str, Any]:
        self.files = BenchFiles(self.expdir)
        self.runnable: Optional[list[str]] = None
        steps: dict[str, Callable[[], Measured]] = {
            "oracle": self.oracle, "pipeline": self.pipeline, "lateness": self.lateness, "plan": self.plan,
            "late_in_switch": self.late_in_switch, "instructions": self.instructions,
            "reconfiguration": self.reconfiguration, "stalled_input": self.stalled_input,
            "emulation": self.emulation, "scale": self.scale}
        ours: dict[str, Any] = {}
        for part in self.params.parts:
            reason = cannot_run(part)
            if reason:
                self.skipped[part] = reason
                self.log(f"skipping {part}: {reason}")
                continue
            self.log(part)
            rows, ours[part] = steps[part]()
            pd.DataFrame(rows).to_parquet(self.files.table(part), index=False)
        compared = against_baseline(ours, self.expdir)
        if compared is not None:
            ours["against_baseline"] = compared
            for rate in compared["slower"]:
                row = next(r for r in compared["rates"] if r["rate"] == rate)
                self.log(f"slower than {compared['baseline_revision']}: {rate} {row['now']:.0f}/s, "
                         f"{row['ratio']:.2f} x {row['baseline']:.0f}/s")
        return ours

    def targets(self) -> list[str]:
        """The switch targets available here, asked once for every part that uses them."""
        if self.runnable is None:
            self.runnable = super().targets()
        return self.runnable

    # -- the parts: each returns its raw rows and its summary -------------------
    def oracle(self) -> Measured:
        rows = costs.oracle_rate(self.params.costs.oracle_events)
        return rows, rows[0]

    def pipeline(self) -> Measured:
        rows = costs.pipeline_rates(self.params.costs.pipeline_events)
        return rows, rows

    def lateness(self) -> Measured:
        rows = costs.lateness_costs(self.params.costs.lateness_events)
        return rows, rows

    def plan(self) -> Measured:
        rows = costs.plan_costs()
        largest = max(row["N"] for row in rows)
        return rows, [row for row in rows if row["N"] == largest]

    def late_in_switch(self) -> Measured:
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"):
            copies = late.late_in_switch(self.targets(), self.expdir, self.params.late)
        return copies, late.summarize(copies)

    def instructions(self) -> Measured:
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"):
            rows = instructions.instructions_per_event(self.expdir, self.params.instructions)
        return rows, rows

    def reconfiguration(self) -> Measured:
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"):
            return reconfig.reconfigurations(self.targets(), self.expdir, self.params.reconfiguration)

    def stalled_input(self) -> Measured:
        with interruptible(f"{self.spec.name}-{self.expdir.root.name}"):
            rows = stalled.stalled_input(self.targets(), self.expdir, self.params.stalled)
        return rows, rows

    def emulation(self) -> Measured:
        rows = runs.rate_sweep(self.files, self.params.sweep, self.settings)
        return rows, rows

    def scale(self) -> Measured:
        rows = []
        for name in self.params.scale:
            self.log(f"scale run {name}")
            rows.append(runs.scale_run(self.files, name, tag=f"bench-{self.expdir.root.name}-{name}"))
            pd.DataFrame(rows).to_parquet(self.files.table("scale"), index=False)   # kept if a later run fails
        return rows, rows

    # -- verdict and figures ------------------------------------------------------
    def ok(self, ours: dict[str, Any]) -> bool:
        """Copies where the oracle says, and scale runs that pass ``testbed check``; timings never decide."""
        wrong = any(s["events_with_wrong_copies"] for s in ours.get("reconfiguration", []))
        return not wrong and all(row.get("check_passes") for row in ours.get("scale", []))

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        files = BenchFiles(expdir)
        drawn = []
        for part, draw in figures.FIGURES.items():
            table = files.table(part)
            if table.exists():
                rows = pd.read_parquet(table)
                if len(rows):
                    drawn.append(draw(rows, files.figure(part)))
        return drawn
