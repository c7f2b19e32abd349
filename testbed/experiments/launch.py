"""Runs put together from their real parts, for the CLI, the API and the experiments.

``Run`` is handed its parts (``testbed.runs.parts.RunParts``); this is the
one place that chooses them: the Mininet network around the target's switch
class, the Spark application at the options' master, and the analysis that
concludes the run.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from rich.console import Console

from testbed.analysis.conclude import RunAnalysis
from testbed.analysis.spark import SPARK_CPU, SparkService
from testbed.emulation.network import SplitterNetwork, mininet_missing
from testbed.runs.orchestrator import Run, RunOptions
from testbed.runs.parts import RunParts
from testbed.semantics.limits import MAX_INT64, MAX_RUN_TIMEOUT_S, MAX_WINDOW_TIMEOUT_S
from testbed.semantics.topology import Topology
from testbed.targets import PROCESSES, switch_class
from testbed.targets.base import CPU_POLICIES


class RunOptionsError(ValueError):
    """Options a run cannot be started with; ``field`` names the option (``RunOptions``'
    field), ``str()`` is one line.  Raised before anything starts."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_options(options: RunOptions) -> None:
    """``RunOptionsError`` for the first option a run cannot use.  The CLI's options are
    checked by click as well; this is what the Python API (``api.run``) has instead, and
    the combinations neither click nor a single option can see."""
    if options.target not in PROCESSES:
        raise RunOptionsError("target", f"{options.target!r} is not one of {', '.join(PROCESSES)}")
    seed = options.seed
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_INT64):
        raise RunOptionsError("seed", f"{seed!r} is not an integer in 0 .. {MAX_INT64}")
    for field, limit in (("timeout", MAX_RUN_TIMEOUT_S), ("window_timeout_s", MAX_WINDOW_TIMEOUT_S)):
        value = getattr(options, field)
        if value is not None and not (_number(value) and math.isfinite(value) and 0 < value <= limit):
            raise RunOptionsError(field, f"{value!r} is not a number of seconds above 0 and at most {limit:g}")
    if options.window_timeout_s is not None and not options.spark:
        # Only the Spark operators' windows time out: without them the option would be ignored.
        raise RunOptionsError("window_timeout_s", "only the Spark operators' windows time out, and this run "
                                                  "has none (--no-spark, or spark=False)")
    if options.cli not in (None, "before", "after"):
        raise RunOptionsError("cli", f"{options.cli!r} is not one of before, after")
    for field, known in (("switch_cpu", CPU_POLICIES), ("spark_cpu", SPARK_CPU)):
        if getattr(options, field) not in known:
            raise RunOptionsError(field, f"{getattr(options, field)!r} is not one of {', '.join(known)}")
    if not isinstance(options.spark_master, str) or not options.spark_master:
        raise RunOptionsError("spark_master", f"{options.spark_master!r} is not a master URL")


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
    """Run ``topo`` with its real parts; ``True`` when every check passed.
    ``RunOptionsError`` before anything starts for options it cannot use."""
    check_options(options)
    console = console or Console(stderr=True)
    return Run(topo, topology_path, options, real_parts(options, console, spark_service), console).execute()
