"""The analysis half of a run: its Spark application and its conclusion, as parts of ``Run``.

``Run`` drives the phases and knows nothing of checks; ``RunAnalysis`` is
handed to it (``RunParts.spark`` and ``RunParts.conclude``).  Both halves
need the frame check: the Spark application's centralized reference leaves
out the events the switch never saw, and the verdicts are made from it.
``RunAnalysis`` makes it once, for whichever asks first.
"""
from __future__ import annotations

from typing import Any, Optional

from rich.console import Console

from testbed.analysis.check import StreamCheck, events_the_switch_never_saw
from testbed.analysis.plots import plot_run
from testbed.analysis.spark import DEFAULT_SPARK_CPU, SparkApp, SparkService, job_description, spark_missing
from testbed.analysis.verdicts import evaluate, frame_check, verdict_summary
from testbed.rundir import RunDir, RunRecord
from testbed.semantics.topology import Topology


class RunSpark:
    """The run's Spark application as ``Run`` drives it (``testbed.runs.parts.Spark``)."""

    def __init__(self, app: SparkApp, analysis: "RunAnalysis", rundir: RunDir):
        self.app = app
        self.analysis = analysis
        self.rundir = rundir
        self.cpu_policy = app.cpu_policy

    def start(self) -> None:
        self.app.start()

    def wait_ready(self) -> None:
        self.app.wait_ready()

    def finish(self, record: RunRecord) -> dict[str, Any]:
        unseen = events_the_switch_never_saw(self.analysis.frames(self.rundir, record))
        return self.app.finish(changes=record.changes, unseen=unseen)

    def stop(self) -> None:
        self.app.stop()


class RunAnalysis:
    """Spark (when asked for) and the conclusion of one run."""

    def __init__(self, console: Console, spark_master: str = "local[*]", spark: bool = True,
                 spark_cpu: str = DEFAULT_SPARK_CPU, window_timeout_s: Optional[float] = None,
                 service: Optional[SparkService] = None):
        self.console = console
        self.spark_master = spark_master
        self.with_spark = spark
        self.spark_cpu = spark_cpu
        self.window_timeout_s = window_timeout_s
        #: A warm application the run's job goes to (an experiment's), instead of one of its own.
        self.service = service
        self._frames: Optional[dict[int, StreamCheck]] = None

    def missing(self) -> Optional[str]:
        """Why the Spark application cannot run here, or ``None``."""
        reason = spark_missing() if self.with_spark else None
        return f"cannot run the operators' Spark application: {reason} (or pass --no-spark)" if reason else None

    def spark(self, topo: Topology, run_id: str, rundir: RunDir) -> RunSpark:
        job = job_description(topo, run_id, rundir, self.window_timeout_s)
        app = self.service.app(rundir, job) if self.service is not None else \
            SparkApp(rundir, job, self.spark_master, self.spark_cpu)
        return RunSpark(app, self, rundir)

    def frames(self, rundir: RunDir, record: RunRecord) -> dict[int, StreamCheck]:
        if self._frames is None:
            self._frames = frame_check(record, rundir)
        return self._frames

    def conclude(self, rundir: RunDir, record: RunRecord) -> bool:
        """Verdicts into verdicts.json, the figures, and the summary on the console."""
        verdicts = evaluate(record, rundir, with_windows=self.with_spark, frames=self.frames(rundir, record))
        plot_run(rundir)
        for line in verdict_summary(record, verdicts):
            self.console.print(line)
        self.console.print(f"results: {rundir.root}")
        return verdicts.ok
