"""What every experiment shares: its file, its settings, its record, its redraw.

An experiment file (``experiments/<name>.yaml``) names a kind and the
kind's parameters:

    name: s4control
    description: "S4 Fig. 9: ..."
    kind: control                 # a key of testbed.experiments.KINDS
    params: {repeat: 20}          # validated by the kind's Params model
    quick: {repeat: 2}            # what --quick changes
    in_figures: true              # whether ``testbed experiment all`` runs it

A kind (``ExperimentKind``) measures, writes its raw data through the
``ExperimentDir``, and draws its figures from that raw data and the record
alone, so ``testbed plot`` can redraw them later.  ``run_experiment`` does
the rest the same way for every kind: the record with our numbers beside
the paper's, the machine it ran on (load average included: the numbers are
only as quiet as the machine was), and cleanup on any exit.
"""
from __future__ import annotations

import os
import platform
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator, Optional

from pydantic import Field, ValidationError, field_validator
from rich.console import Console

from testbed import ROOT
from testbed.emulation import procs
from testbed.emulation.veth import VethRig
from testbed.rundir import ExperimentDir, RunDirError
from testbed.rundir.names import UnsafeName, node_name
from testbed.runs.record import git_revision
from testbed.semantics.strict import StrictModel
from testbed.semantics.topology import TopologyError
from testbed.targets import PROCESSES, switch_process

#: Experiment names become folder names under results/; they never reach an interface name.
EXPERIMENT_NAME = r"^[a-z][a-z0-9_-]{0,39}$"


class ExperimentError(TopologyError):
    """An experiment file that cannot be used; ``str()`` is the one-line message."""


class Interrupted(Exception):
    """SIGTERM or SIGINT arrived while an experiment ran; it stops and cleans up."""


class ExperimentFile(StrictModel):
    """The YAML an experiment is described by."""


    name: str = Field(pattern=EXPERIMENT_NAME)
    description: str = ""
    kind: str
    params: dict[str, Any] = {}
    quick: dict[str, Any] = {}
    #: A paper figure or table: ``testbed experiment all`` (``make figures``)
    #: runs it.  The bench and the soak measure the testbed itself and say ``false``.
    in_figures: bool = True

    @field_validator("kind")
    @classmethod
    def _known(cls, kind: str) -> str:
        from testbed.experiments import KINDS
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
        return kind


class KindParams(StrictModel):
    """Base of every kind's parameters: strict, and the targets to measure."""


    targets: list[str] = Field(default=["model", "bmv2"], min_length=1)

    @field_validator("targets")
    @classmethod
    def _targets(cls, targets: list[str]) -> list[str]:
        unknown = [t for t in targets or [] if t not in PROCESSES]
        if unknown:
            raise ValueError(f"unknown target {unknown[0]!r}; known: {', '.join(PROCESSES)}")
        return targets


@dataclass
class Settings:
    """What the command line adds to an experiment file."""

    quick: bool = False
    target: Optional[str] = None          # --target: measure this one only
    switch_name: Optional[str] = None     # --switch-name: Mininet switch of emulation runs
    switch_cpu: str = "fifo"              # the switch's CPU policy in emulation runs (targets.base.CPU_POLICIES)
    spark: bool = True
    spark_master: str = "local[*]"
    #: The experiment's runs share one warm Spark application (``False``: --spark-per-run, one each).
    warm_spark: bool = True
    #: That application, once ``run_experiment`` (or a repeat) made it; its runs' jobs go to it.
    spark_service: Optional[Any] = None
    #: --param KEY=VALUE: parameters of the file replaced, after quick's (any kind; its Params validate them)
    params: dict[str, Any] = field(default_factory=dict)
    console: Console = field(default_factory=lambda: Console(stderr=True))

    def __post_init__(self) -> None:
        if self.switch_name is not None:
            try:
                node_name(self.switch_name, "--switch-name")
            except UnsafeName as err:
                raise ExperimentError(str(err)) from None

    def overrides(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.target is not None:
            out["targets"] = [self.target]
        return out


class ExperimentKind:
    """One kind of experiment: its parameters, its measurement, its figures.

    A subclass sets ``Params`` and ``paper`` (the papers' numbers it is
    compared with, from ``testbed.experiments.paper``), and implements
    ``measure`` (returns our numbers for the record; writes raw data) and
    ``draw`` (figures from the raw data and the record only).
    """

    Params: ClassVar[type[KindParams]] = KindParams
    paper: ClassVar[dict[str, Any]] = {}
    #: Settings overrides this kind understands (others are ignored).
    accepts: ClassVar[frozenset[str]] = frozenset({"targets"})

    def __init__(self, spec: ExperimentFile, params: KindParams, settings: Settings, expdir: ExperimentDir):
        self.spec = spec
        self.params = params
        self.settings = settings
        self.expdir = expdir
        self.console = settings.console
        self.skipped: dict[str, str] = {}

    @classmethod
    def parse(cls, spec: ExperimentFile, settings: Settings, source: str) -> KindParams:
        """The kind's parameters: the file's, then ``quick``'s, then the command line's."""
        data = dict(spec.params)
        if settings.quick:
            data.update(spec.quick)
        data.update({k: v for k, v in settings.overrides().items() if k in cls.accepts})
        data.update(settings.params)
        try:
            return cls.Params.model_validate(data)
        except ValidationError as err:
            from testbed.semantics.topology import describe

            raise ExperimentError(f"{source}: params.{describe(err)}") from None

    def targets(self) -> list[str]:
        """The requested targets that can run here; the others go to ``skipped`` with the reason."""
        found = []
        for target in self.params.targets:
            reason = switch_process(target).available()
            if reason:
                self.skipped[target] = reason
                self.console.print(f"[yellow]{self.spec.name}: skipping {target}: {reason}")
            else:
                found.append(target)
        return found

    def log(self, message: str) -> None:
        self.console.log(f"{self.spec.name}: {message}")

    def papers(self) -> dict[str, Any]:
        """The papers' numbers this experiment sets ours beside: the kind's, unless its parameters choose."""
        return self.paper

    # -- what a kind implements --------------------------------------------------
    def measure(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def draw(cls, expdir: ExperimentDir, record: dict[str, Any]) -> list[Path]:
        raise NotImplementedError

    @classmethod
    def installs(cls, params: KindParams) -> dict[str, Any]:
        """What the experiment would install at these parameters (each plan's
        cost by name), computed without a network: it builds every topology
        and plan a run would, so a file the code cannot carry out fails here."""
        raise NotImplementedError

    def ok(self, ours: dict[str, Any]) -> bool:
        """Whether the measurement held what it must (checks, read-backs); timings never decide."""
        return True

    @classmethod
    def doc_table(cls, record: dict[str, Any]) -> list[str]:
        """Markdown lines that set the record's main result beside the paper's, for the
        generated docs; none by default (the docs then list the record's numbers only)."""
        return []


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------
EXPERIMENTS_DIR = ROOT / "experiments"
FIGURES_DIR = ROOT / "results" / "figures"


def experiment_path(name: str) -> Optional[Path]:
    """An experiment file given as a path, or by name from ``experiments/``."""
    p = Path(name)
    if p.suffix == ".yaml" and p.exists() and p.parent.name == "experiments":
        return p
    cand = EXPERIMENTS_DIR / f"{name}.yaml"
    return cand if cand.exists() else None


def all_experiments() -> list[Path]:
    return sorted(EXPERIMENTS_DIR.glob("*.yaml"))


def figure_experiments(settings: Optional[Settings] = None,
                       paths: Optional[list[Path]] = None) -> list[tuple[ExperimentFile, KindParams]]:
    """What ``testbed experiment all`` runs: every experiment file (all checked
    first, so a bad one stops everything before it starts) that is a paper
    figure, leaving out those that say ``in_figures: false`` (bench, soak)."""
    loaded = [load_experiment(path, settings) for path in (all_experiments() if paths is None else paths)]
    return [(spec, params) for spec, params in loaded if spec.in_figures]


def parse_params(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs from the command line, each VALUE read as YAML (``parts=[scale]``, ``cycles=3``)
    and held to what a file's YAML is (``yamlfile.parse_yaml``: its depth, its size, its booleans)."""
    from testbed.semantics.yamlfile import parse_yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ExperimentError(f"--param {pair!r}: expected KEY=VALUE")
        out[key] = parse_yaml(value, f"--param {key}", ExperimentError)
    return out


def load_experiment(path: Path, settings: Optional[Settings] = None) -> tuple[ExperimentFile, KindParams]:
    """Read and validate an experiment file and its kind's parameters; every
    failure is an ``ExperimentError`` naming the file and the field."""
    from testbed.experiments import kind_class
    from testbed.semantics.topology import TopologyError, describe
    from testbed.semantics.yamlfile import read_yaml

    try:
        data = read_yaml(path, TopologyError)      # not a file, too big, not UTF-8, bad YAML: one line each
    except TopologyError as err:
        raise ExperimentError(str(err)) from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: (top level): expected a mapping, got {type(data).__name__}")
    try:
        spec = ExperimentFile.model_validate(data)
    except ValidationError as err:
        raise ExperimentError(f"{path}: {describe(err)}") from None
    params = kind_class(spec.kind).parse(spec, settings or Settings(), str(path))
    return spec, params


# ---------------------------------------------------------------------------
# running and redrawing
# ---------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """The machine, with its load: other work running changes every timing."""
    return {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version(),
            "loadavg": os.getloadavg()}


@contextmanager
def interruptible(run_id: str) -> Iterator[None]:
    """Signals become ``Interrupted``; processes and interfaces started inside
    are recorded for ``testbed clean`` (a crash leaves nothing it cannot find)."""
    def _raise(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, _raise) for sig in (signal.SIGTERM, signal.SIGINT)}
    procs.begin_run(run_id)
    try:
        yield
    finally:
        procs.end_run()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_experiment(spec: ExperimentFile, params: KindParams, settings: Settings,
                   out: Optional[Path] = None) -> tuple[bool, ExperimentDir]:
    """Measure, record ours beside the paper's, draw; ``experiment.json`` says
    how far it got however it ends."""
    from testbed.analysis.spark import warm_spark
    from testbed.experiments import kind_class

    cls = kind_class(spec.kind)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    expdir = ExperimentDir(out or ROOT / "results" / spec.name / stamp).create()
    with warm_spark(expdir.root / "spark", settings, f"{spec.name}-{stamp}-spark") as settings:
        return _run_kind(cls, spec, params, settings, expdir)


def _run_kind(cls: type[ExperimentKind], spec: ExperimentFile, params: KindParams, settings: Settings,
              expdir: ExperimentDir) -> tuple[bool, ExperimentDir]:
    kind = cls(spec, params, settings, expdir)
    record: dict[str, Any] = {
        "experiment": spec.model_dump(), "kind": spec.kind, "quick": settings.quick,
        "params": params.model_dump(), "paper": kind.papers(), "started": time.time(),
        "git_revision": git_revision(), "machine_at_start": machine(),
    }
    expdir.write_record(record)
    try:
        ours = kind.measure()
        record.update(ours=ours, skipped=kind.skipped, ok=kind.ok(ours))
        expdir.write_record(record)
        record["figures"] = [str(p.relative_to(expdir.root)) for p in cls.draw(expdir, record)]
    except BaseException as err:
        record["error"] = f"{type(err).__name__}: {err}"
        raise
    finally:
        record.update(ended=time.time(), machine_at_end=machine(), skipped=kind.skipped)
        if settings.spark_service is not None and settings.spark_service.served:
            record["spark_application"] = settings.spark_service.describe()
        expdir.write_record(record)
    return record["ok"], expdir


@contextmanager
def live_switch(target: str, expdir: ExperimentDir, name: str, rig: VethRig,
                forward: Optional[dict[int, int]] = None, cep: bool = False,
                process_class: Optional[type] = None, changes: bool = True,
                cpus: Optional[frozenset[int]] = None) -> Iterator[tuple[Any, Any]]:
    """A switch process of ``target`` on the rig's switch ends (none for a rig
    of 0 pairs: the control API is all some experiments need), inside the
    rig's namespace, with a connected control client; both end on exit.
    ``cep``: the build with the CEP stage; ``changes=False``: the build
    without changes mid-stream.  ``process_class`` replaces the
    target's own ``SwitchProcess`` class (a variant of it); ``cpus``, the
    CPUs it runs on (testbed.emulation.placement)."""
    with (process_class or switch_process(target))(rig.switch_ends, expdir.root, name=name, namespace=rig.namespace,
                                forward=forward, cep=cep, changes=changes, cpus=cpus) as proc:
        api = proc.api()
        try:
            yield proc, api
        finally:
            api.close()


def redraw(expdir: ExperimentDir) -> list[Path]:
    """Draw an experiment's figures again from its raw data and record."""
    from testbed.experiments import kind_class

    record = expdir.read_record()
    try:
        kind = kind_class(record["kind"])
    except ValueError as err:
        raise RunDirError(f"{expdir.record}: kind: {err}") from None
    return kind.draw(expdir, record)
