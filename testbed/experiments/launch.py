"""Runs put together from their real parts, for the CLI, the API and the experiments.

``Run`` is handed its parts (``testbed.runs.parts.RunParts``); this is the
one place that chooses them: the Mininet network around the target's switch
class, the Spark application at the options' master, and the analysis that
concludes the run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.console import Console

from testbed.analysis.conclude import RunAnalysis
from testbed.analysis.spark import SparkService
from testbed.emulation.network import SplitterNetwork, mininet_missing
from testbed.runs.orchestrator import Run, RunOptions
from testbed.runs.parts import RunParts
from testbed.semantics.topology import Topology
from testbed.targets import switch_class


def real_parts(options: RunOptions, console: Console, spark_service: Optional[SparkService] = None) -> RunParts:
    """Mininet, the target's switch, Spark (unless ``options.spark`` is off) and the analysis.

    ``spark_service``: the warm application of the experiment the run is part
    of, which takes the run's job (its master and CPU policy are then its own);
    without one, the run submits an application of its own."""
    switch_cls = switch_class(options.target)
    analysis = RunAnalysis(console, options.spark_master, options.spark, options.spark_cpu,
                           options.window_timeout_s, service=spark_service if options.spark else None)

    def missing() -> Optional[str]:
        reason = mininet_missing()
        if reason:
            return f"cannot run: {reason}"
        reason = switch_cls.available()
        return f"cannot run on target {options.target}: {reason}" if reason else analysis.missing()

    return RunParts(network=lambda topo, rundir: SplitterNetwork(topo, switch_cls, rundir,
                                                                 {"cpu_policy": options.switch_cpu}),
                    conclude=analysis.conclude, spark=analysis.spark if options.spark else None,
                    missing=missing)


def launch(topo: Topology, topology_path: Path, options: RunOptions, console: Optional[Console] = None,
           spark_service: Optional[SparkService] = None) -> bool:
    """Run ``topo`` with its real parts; ``True`` when every check passed."""
    console = console or Console(stderr=True)
    return Run(topo, topology_path, options, real_parts(options, console, spark_service), console).execute()
