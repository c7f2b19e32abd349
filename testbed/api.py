"""The testbed from Python, for notebooks: run a topology, load a run, list an experiment's runs.

    from testbed import api

    run = api.run("cbsw2", target="model", spark=False)   # what `testbed run cbsw2 --no-spark` does
    run.ok, run.accounting["streams"]["291"]["lost"]
    run.deliveries.groupby("operator").size()            # pandas DataFrames of the raw data
    run.load()                                           # events per operator and stream (the load figure)

    run = api.load("results/cbsw2/latest")               # any finished run directory
    runs = api.experiment("s4load")                      # {scenario: RunResult} of its newest results

Everything comes from the run directory (``RunDir``), so a loaded run and a
fresh one are the same thing.  Errors are the CLI's: ``TopologyError`` for a
bad topology and ``RunOptionsError`` for an option out of range (nothing
started either way), ``PreflightError`` when the run cannot work here,
``RunError`` when it failed.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd
from rich.console import Console

from testbed import ROOT
from testbed.rundir import ExperimentDir, RunDir, RunRecord, RunVerdicts
from testbed.semantics.topology import Topology, TopologyError, load_topology, parse_topology, resolve_topology

TopologyLike = Union[str, Path, dict, Topology]


class RunResult:
    """One run directory as Python values: the record, the raw data as
    DataFrames (read on first use), the accounting and the check verdicts."""

    def __init__(self, run_dir: Union[str, Path, RunDir]):
        self.rundir = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
        if not self.rundir.is_run():
            raise FileNotFoundError(f"{self.rundir.root}: not a run directory (no {self.rundir.record.name})")
        self.rundir.refuse_unreadable()       # a named pipe among its files would block the first read

    def __repr__(self) -> str:
        return f"RunResult({self.name!r} on {self.target}, ok={self.ok}, {self.path})"

    @property
    def path(self) -> Path:
        return self.rundir.root

    @cached_property
    def record(self) -> RunRecord:
        """``run.json``, typed: topology, target, versions, timings, counters, changes."""
        return self.rundir.read_record()

    @cached_property
    def verdicts(self) -> Optional[RunVerdicts]:
        """``verdicts.json``, typed: accounting and checks (``None`` for a run never checked)."""
        return self.rundir.read_verdicts()

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def target(self) -> str:
        return self.record.target

    @property
    def ok(self) -> bool:
        """Whether every check passed (``False`` for a run that did not finish)."""
        return self.verdicts is not None and self.verdicts.ok

    # -- raw data ---------------------------------------------------------------
    @cached_property
    def sources(self) -> pd.DataFrame:
        """Every event sent: stream, seq, ts, key, value, send_ns."""
        return pd.read_parquet(self.rundir.sources)

    @cached_property
    def deliveries(self) -> pd.DataFrame:
        """Every copy an operator received: stream, seq, ts, key, value, recv_ns, operator, and the
        Windows header the switch wrote into it (``hdr_*`` columns, docs/wire.md)."""
        return pd.read_parquet(self.rundir.deliveries)

    @cached_property
    def windows(self) -> Optional[pd.DataFrame]:
        """The operators' merged output (stream, window, operator, key, result, n_events,
        completed_ns), or ``None`` for a run without Spark."""
        return _table(self.rundir.windows)

    @cached_property
    def reference(self) -> Optional[pd.DataFrame]:
        """The same windows computed centrally over ``sources``, or ``None`` without Spark."""
        return _table(self.rundir.windows_reference)

    @cached_property
    def complex_events(self) -> Optional[pd.DataFrame]:
        """What the CEP stage's sinks received (pattern, match, stream, seq, ts, value, recv_ns,
        at, sink), or ``None`` for a topology without ``cep:`` rules."""
        return _table(self.rundir.complex_events)

    @cached_property
    def complex_events_reference(self) -> Optional[pd.DataFrame]:
        """The same complex events computed by the Spark job from the events the switch saw
        (pattern, match, stream, seq, ts, value, send_ns, rank), or ``None`` without rules or Spark."""
        return _table(self.rundir.complex_events_reference)

    # -- what the run concluded ------------------------------------------------------
    @property
    def accounting(self) -> dict[str, Any]:
        """Per stream: planned, sent, received per operator, dropped and why, lost."""
        return self.verdicts.accounting if self.verdicts else {}

    @property
    def checks(self) -> pd.DataFrame:
        """The deliveries' verdict per stream (rows): expected, delivered, missing, extra, ok..."""
        return _verdicts(self.verdicts.model_dump()["check"] if self.verdicts else {})

    @property
    def window_checks(self) -> pd.DataFrame:
        """The windows' verdict per stream; empty for a run without Spark."""
        return _verdicts(self.verdicts.model_dump()["window_check"] if self.verdicts else {})

    # -- views -------------------------------------------------------------------------
    def load(self) -> pd.DataFrame:
        """Events received per operator (rows, topology order) and stream (columns):
        the data of ``load.png`` and of S4's Fig. 6."""
        from testbed.analysis.plots import load_table

        return load_table(self.rundir)

    def latency(self) -> pd.DataFrame:
        """Delivery latency (microseconds) of every copy, per stream."""
        from testbed.analysis.plots import latency_table

        return latency_table(self.rundir)

    def compare(self, other: "RunResult") -> dict[int, Any]:
        """Where this run (A) and ``other`` (B) differ, per stream (``testbed compare``)."""
        from testbed.analysis.compare import compare_runs

        return compare_runs(self.rundir, other.rundir)


def _table(path: Path) -> Optional[pd.DataFrame]:
    return pd.read_parquet(path) if path.exists() else None


def _verdicts(by_stream: dict[str, dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame.from_dict(by_stream, orient="index")
    frame.index = frame.index.astype(int)
    frame.index.name = "stream"
    return frame


def _topology(topology: TopologyLike) -> tuple[Path, Topology]:
    """The topology and where it came from, held to the same rules as ``testbed run``'s
    (``TopologyError`` with one line, before anything starts).  A ``Topology`` object is
    validated again: ``model_copy`` or ``model_construct`` would have skipped its checks."""
    from testbed.semantics.plan import PlanError, SplitterPlan

    if isinstance(topology, Topology):
        path = Path(f"<{topology.name}>")
        topo = parse_topology(topology.model_dump(mode="json"), str(path))
    elif isinstance(topology, dict):
        path = Path(f"<{topology.get('name', 'topology')}>")
        topo = parse_topology(topology, str(path))
    else:
        path = resolve_topology(str(topology))
        topo = load_topology(path)
    try:
        SplitterPlan(topo)
    except PlanError as err:
        raise TopologyError(f"{path}: {err}") from None
    return path, topo


def run(topology: TopologyLike, target: Optional[str] = None, **options: Any) -> RunResult:
    """Run ``topology`` (a scenario name, a file, a dict in the YAML's shape or a
    ``Topology``) and return its result, passed or not.

    ``target`` is ``model`` or ``bmv2`` (default: the topology's).  ``options``
    are ``testbed run``'s: ``out``, ``seed``, ``timeout``, ``spark`` (``False``
    for ``--no-spark``), ``spark_master``, ``pcap``, ``window_timeout_s``, held to the
    same ranges (``RunOptionsError``, raised before anything starts).
    """
    from testbed.experiments.launch import check_options, real_parts
    from testbed.runs.orchestrator import Run, RunOptions

    path, topo = _topology(topology)
    run_options = RunOptions(target=target or topo.switch.target, **options)
    check_options(run_options)        # the CLI's rules for its options, before anything starts
    console = Console(stderr=True)
    runner = Run(topo, path, run_options, real_parts(run_options, console), console)
    runner.execute()
    return RunResult(runner.rundir)


def load(run_dir: Union[str, Path]) -> RunResult:
    """A finished run directory (``results/<name>/<run id>`` or ``.../latest``)."""
    return RunResult(run_dir)


def experiment_dir(name: Union[str, Path], results: Path = ROOT / "results") -> ExperimentDir:
    """An experiment directory: ``name`` itself if it is one, else the newest
    ``results/<name>/<id>/`` with an ``experiment.json``."""
    given = ExperimentDir(Path(name))
    if given.record.is_file():
        return given
    found = sorted(p for p in (results / str(name)).glob("*") if ExperimentDir(p).record.is_file())
    if not found:
        raise FileNotFoundError(f"no results of experiment {name} in {results / str(name)} "
                                f"(make experiment NAME={name}, or api.run_experiment({str(name)!r}))")
    return ExperimentDir(found[-1])


def experiment(name: Union[str, Path], results: Path = ROOT / "results") -> dict[str, RunResult]:
    """The runs of an experiment (its newest results, or the directory ``name``),
    by scenario, in the experiment's order."""
    expdir = experiment_dir(name, results)
    listed = expdir.read_record().get("ours", {}).get("runs", {})
    runs = {label: RunDir(expdir.root / entry["run_dir"]) for label, entry in listed.items()}
    return {label: RunResult(rundir) for label, rundir in runs.items() if rundir.is_run()}


def run_experiment(name: str, target: Optional[str] = None, out: Optional[Path] = None,
                   quick: bool = False, spark: bool = True) -> dict[str, RunResult]:
    """Run experiment ``name`` (``experiments/<name>.yaml``) as ``testbed experiment``
    does, figures included, and return its runs (for kinds that run scenarios)."""
    from testbed.experiments.base import Settings, experiment_path, load_experiment
    from testbed.experiments.base import run_experiment as run_kind

    path = experiment_path(name)
    if path is None:
        raise FileNotFoundError(f"no experiment named {name} in {ROOT / 'experiments'}")
    settings = Settings(quick=quick, target=target, spark=spark)
    spec, params = load_experiment(path, settings)
    _ok, expdir = run_kind(spec, params, settings, out)
    return experiment(expdir.root)
