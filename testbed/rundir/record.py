"""The run record, typed: what ``run.json`` and ``verdicts.json`` hold.

A run writes two files, and each has one writer:

- ``run.json`` (``RunRecord``): the raw facts, written by the run as it
  goes: what was configured, sent, seen by the switch and changed, how long
  each phase took, and how the run ended.  Nothing in it is a judgement.
- ``verdicts.json`` (``RunVerdicts``): what the analysis concluded from the
  facts and the raw data: the accounting of every event, the frame check and
  the window check per stream.  ``testbed check`` rewrites this file only.

Both models forbid unknown keys and require the keys every run has, so a
damaged or foreign file is refused with its path and the key
(``RunDirError``), never half read.  Runs written before this split kept
their verdicts inside ``run.json`` (``LEGACY_VERDICT_KEYS``); they still
load: their facts as a ``RunRecord``, their verdicts as ``RunVerdicts``.

This module depends on nothing else in the package but ``files``: every
layer may read a record, and ``docs/results.md``'s schema is generated from
these models.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from testbed.rundir.files import NO_SUCH_FILE, why_unreadable

#: The record format this code writes; records without ``format`` are the
#: earlier one, whose verdicts lived in run.json.
FORMAT = 2
#: Keys of the earlier run.json that are verdicts, now in verdicts.json.
LEGACY_VERDICT_KEYS = ("accounting", "check", "window_check", "ok")
#: JSON nested deeper than this is refused before it is parsed: Python's
#: parser would otherwise recurse into a RecursionError.
MAX_DEPTH = 64


class RunDirError(ValueError):
    """A record file that cannot be used; ``str()`` is one line naming the file and the key."""


class KeyShapeError(ValueError):
    """Raised inside validators to name a key below the field validated (``adaptation.decisions``)."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


#: The shapes ``require_shapes`` knows, and the Python type of each.
SHAPES = {"an object": dict, "a list of objects": list, "an object of objects": dict, "text": str,
          "true/false": bool}


def json_type(value: Any) -> str:
    """What a JSON reader calls ``value``'s type."""
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def require_shapes(data: dict[str, Any], shapes: dict[str, str], prefix: str = "") -> None:
    """``KeyShapeError`` for the first key of ``data`` named in ``shapes`` whose value is not of
    that shape (a key of ``SHAPES``).  An absent key is left to the reader's default.

    The free-form parts of a record (``adaptation``, ``spark``, an experiment's
    ``ours``) are read as plain dicts and lists; a damaged one must stop the
    reader with the key's name, not with an AttributeError deep inside it."""
    for key, shape in shapes.items():
        if key not in data:
            continue
        value, where = data[key], f"{prefix}{key}"
        if not isinstance(value, SHAPES[shape]):
            raise KeyShapeError(where, f"expected {shape}, got {json_type(value)}")
        members = ({f"[{i}]": item for i, item in enumerate(value)} if shape == "a list of objects" else
                   {f".{name}": item for name, item in value.items()} if shape == "an object of objects" else {})
        for inner, item in members.items():
            if not isinstance(item, dict):
                raise KeyShapeError(f"{where}{inner}", f"expected an object, got {json_type(item)}")


class Model(BaseModel):
    """Strict JSON objects: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


# -- run.json: the facts ------------------------------------------------------
class Install(Model):
    """What installing the plan took (``Controller.install``)."""

    groups_s: float = Field(description="seconds to create the multicast groups")
    tables_s: float = Field(description="seconds to add the table entries")
    groups: int = Field(description="multicast groups created")
    entries: int = Field(description="table entries added")
    operations: int = Field(description="control calls made")
    cep_rules_s: Optional[float] = Field(
        default=None, description="seconds to install the CEP stage's windows and patterns (topologies with cep:)")


class StreamCounters(Model):
    """A stream's switch counters: packets accepted, copies sent, drops by reason."""

    accepted: int = Field(alias="in", description="events the pipeline accepted")
    out: int = Field(description="copies sent to operators")
    dropped: dict[str, int] = Field(description="events dropped, by reason")


class SwitchCounters(Model):
    """The switch's counters read after the stream (``Controller.stream_counters``)."""

    streams: dict[str, StreamCounters]
    ports: dict[str, int] = Field(description="copies sent per egress port")
    non_event: int = Field(description="frames that were not events, dropped")
    socket: dict[str, Any] = Field(default_factory=dict, description="the target's socket statistics, if any")


class InterfaceCounters(Model):
    """One network interface's kernel counters (``ip -s link``)."""

    rx_packets: int = 0
    rx_dropped: int = 0
    rx_errors: int = 0
    tx_packets: int = 0
    tx_dropped: int = 0
    tx_errors: int = 0


class PathCounters(Model):
    """Drop counters along every host's path to the switch, read after the stream
    (``testbed.emulation.pathstats``): frames of every kind, heartbeats too."""

    hosts: dict[str, InterfaceCounters] = Field(description="each host's end of its link")
    switch_ports: dict[str, InterfaceCounters] = Field(description="the switch's end of each link, by port")
    switch_sockets: dict[str, int] = Field(description="frames the switch's packet socket on each port dropped")
    racks: dict[str, dict[str, InterfaceCounters]] = Field(
        default_factory=dict, description="each rack bridge's ports, by rack and interface (port 0, eth0, is "
                                          "the uplink; empty without racks)")


class Fault(Model):
    """A process that ended on its own during the run."""

    what: str = Field(description="e.g. 'receiver on h3'")
    phase: str = Field(description="the run's phase when it ended")
    exit: int = Field(description="exit code; negative for a signal")
    planned: bool = Field(default=False, description="a schedule's fail entry asked for it")


#: The lists ``adaptation`` holds (``testbed.runs.adaptation``), each of objects.
ADAPTATION_LISTS = ("decisions", "failures", "recoveries", "not_applied", "detections", "heard_again",
                    "elastic_samples", "cep_changes")


class RunRecord(Model):
    """``run.json``: the raw facts of one run, written by the run alone."""

    format: int = Field(default=FORMAT, description="the record format; absent in runs before verdicts.json")
    name: str = Field(description="the topology's name")
    run_id: str = Field(description="start time, target and process id")
    target: str = Field(description="model or bmv2")
    topology_file: str = Field(description="the file the topology was read from")
    seed: int = Field(description="the seed of the sources' generators")
    start: float = Field(description="Unix time the run started")
    git_revision: str = Field(description="the testbed's commit, '-dirty' with local changes")
    versions: dict[str, str] = Field(description="Python, kernel, packages and the switch")
    command: list[str] = Field(description="the command line")
    streams: dict[str, dict[str, Any]] = Field(description="each stream as run, by id (topology format)")
    operator_hosts: list[str] = Field(description="every host that is or may become an operator")
    switch_ports: dict[str, int] = Field(description="host -> switch port")
    topology: dict[str, Any] = Field(description="the topology as run")
    links: dict[str, Any] = Field(default_factory=dict, description="how each shaped link was impaired")
    phases_s: dict[str, float] = Field(default_factory=dict, description="seconds per phase")
    spark_master: Optional[str] = Field(default=None, description="the Spark master URL, for runs with Spark")
    install: Optional[Install] = Field(default=None, description="installing the plan")
    plan_cost: dict[str, int] = Field(default_factory=dict, description="entries per table, groups")
    expected_deliveries: Optional[int] = Field(default=None, description="copies the oracle expects")
    stream_end: Optional[str] = Field(default=None, description="why the stream phase ended")
    changes: dict[str, list[dict[str, Any]]] = Field(
        default_factory=dict, description="per stream, the changes the switch applied, with their boundary")
    adaptation: Optional[dict[str, Any]] = Field(
        default=None, description="decisions, failures, recoveries, detections and CEP rule changes "
                                  "(cep_changes) of the schedule and policies")
    faults: list[Fault] = Field(default_factory=list, description="processes that ended on their own")
    switch: Optional[SwitchCounters] = Field(default=None, description="the switch's counters after the stream")
    path: Optional[PathCounters] = Field(default=None, description="the kernel's drop counters along each path")
    cpu_policy: dict[str, str] = Field(default_factory=dict, description="how each kind of process was scheduled")
    spark: Optional[dict[str, Any]] = Field(
        default=None, description="the Spark application's analysis, or its error with computed: false")
    error: Optional[str] = Field(default=None, description="why the run stopped early")
    left_running: list[str] = Field(default_factory=list, description="processes the run could not stop")
    signals: list[str] = Field(default_factory=list, description="signals received")
    end: Optional[float] = Field(default=None, description="Unix time the run ended")

    @field_validator("adaptation")
    @classmethod
    def _adaptation_lists(cls, adaptation: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        if adaptation is not None:
            require_shapes(adaptation, {key: "a list of objects" for key in ADAPTATION_LISTS})
        return adaptation

    @field_validator("spark")
    @classmethod
    def _spark_parts(cls, spark: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        if spark is not None:
            require_shapes(spark, {"error": "text", "computed": "true/false", "live": "an object",
                                   "result_latency_s": "a list of objects"})
            require_shapes(spark.get("live") or {}, {"streams": "a list of objects", "batches": "a list of objects"},
                           "live.")
        return spark

    def spark_failed(self) -> Optional[str]:
        """The Spark application's error, if it failed."""
        return (self.spark or {}).get("error")

    def spark_started(self) -> bool:
        """The run had the operators' Spark application (``--no-spark`` leaves both facts unset)."""
        return self.spark_master is not None or self.spark is not None

    def spark_computed(self) -> bool:
        """The Spark application finished: its analysis is recorded, so the
        windows, their reference and the complex events' reference it writes
        before the analysis are part of the run."""
        return self.spark is not None and self.spark_failed() is None

    def stream_changes(self, sid: int | str) -> list[dict[str, Any]]:
        return self.changes.get(str(sid), [])

    def failed_hosts(self) -> set[str]:
        """Hosts a schedule failed during the run."""
        return {f["host"] for f in (self.adaptation or {}).get("failures", [])}


# -- verdicts.json: what the analysis concluded ------------------------------------
class FrameVerdict(Model):
    """One stream's deliveries against the oracle (``testbed.analysis.check.StreamCheck``)."""

    sent: int
    expected_deliveries: int
    delivered: int = Field(description="expected copies deliveries.parquet holds, each once")
    missing: int
    missing_by_operator: dict[str, int]
    extra: int
    duplicates: int
    lost_on_link: int
    lost_before_switch: int
    lost_at_failed_operators: int
    windows_affected_by_failure: list[int]
    undelivered_by_design: dict[str, int]
    ok: bool = Field(description="nothing missing, extra or twice, nothing lost before the switch, something delivered")
    examples: list[str]


class WindowVerdict(Model):
    """One stream's windows against the centralized reference (``WindowCheck``)."""

    reference_windows: int
    produced_windows: int
    matching: int
    mismatched: int
    incomplete: int
    missing: int
    extra: int
    affected_by_lateness: int
    affected_by_failure: int
    live_differs: int = 0
    ok: bool
    examples: list[str]


class SparkLag(Model):
    """How far the operators' Spark application fell behind while the run went
    (``testbed.analysis.operatorlag``), beside what the switch lost meanwhile."""

    micro_batches: int = Field(description="micro-batches that took copies")
    max_backlog_events: Optional[int] = Field(default=None, description="most copies received and not yet processed")
    max_lag_s: Optional[float] = Field(default=None, description="longest time the newest processed copy had waited")
    lag_growth: Optional[float] = Field(default=None,
                                        description="seconds of lag gained per second while copies arrived")
    keeps_up: bool = Field(description="the lag did not grow (lag_growth below the threshold)")
    result_p50_s: Optional[float] = Field(default=None, description="median result latency over the streams' windows")
    result_p99_s: Optional[float] = Field(default=None, description="99th percentile result latency")
    switch_lost: int = Field(description="events lost before or after the switch while Spark shared the CPU")


class RunVerdicts(Model):
    """``verdicts.json``: the accounting and the checks; ``testbed check`` rewrites it."""

    format: int = FORMAT
    checked_at: Optional[float] = Field(default=None, description="Unix time of the check; none for old runs")
    accounting: dict[str, Any] = Field(description="every event: sent, received per operator, dropped, lost")
    check: dict[str, FrameVerdict] = Field(description="per stream: deliveries against the oracle")
    window_check: dict[str, WindowVerdict] = Field(
        default_factory=dict, description="per stream: windows against the reference (runs with Spark)")
    windows_not_computed: Optional[str] = Field(
        default=None, description="why the window check could not be made")
    not_applied: list[str] = Field(
        default_factory=list, description="schedule entries that never took effect, and why (not a failed check)")
    spark_lag: Optional[SparkLag] = Field(
        default=None, description="how far the Spark operators fell behind (runs with Spark; not a check)")
    complex_events: Optional[dict[str, dict[str, Any]]] = Field(
        default=None, description="per sink: the CEP stage's complex events against the oracle (runs with cep: rules)")
    complex_events_spark: Optional[dict[str, dict[str, Any]]] = Field(
        default=None, description="per sink: the same against the Spark job's reference (runs with cep: and Spark)")
    complex_events_spark_missing: Optional[str] = Field(
        default=None, description="why Spark's complex events could not be compared (a failed check)")
    ok: bool = Field(description="every check passed")


M = TypeVar("M", bound=Model)


def describe(err: ValidationError) -> str:
    """``key.path: message`` for the first error, as the file spells the key."""
    first = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    below = (first.get("ctx") or {}).get("error")
    if isinstance(below, KeyShapeError):         # a validator naming a key below the field it validated
        return f"{loc}.{below.key}: {below.message}"
    msg = {"extra_forbidden": "unknown key", "missing": "missing"}.get(first["type"], first["msg"])
    return f"{loc}: {msg}"


def parse(model: type[M], data: Any, path: Path) -> M:
    """``data`` as ``model``, or ``RunDirError`` naming ``path`` and the key."""
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: (top level): expected an object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise RunDirError(f"{path}: {describe(err)}") from None


def read_object(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or ``RunDirError`` saying why not."""
    problem = why_unreadable(path)
    if problem == NO_SUCH_FILE:
        raise RunDirError(f"{path}: missing")
    if problem:
        raise RunDirError(f"{path}: cannot read: {problem}")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RunDirError(f"{path}: missing") from None
    except OSError as err:
        raise RunDirError(f"{path}: cannot read: {err.strerror}") from None
    if _depth(raw) > MAX_DEPTH:
        raise RunDirError(f"{path}: nested more than {MAX_DEPTH} deep")
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as err:          # not UTF-8, not JSON
        raise RunDirError(f"{path}: not valid JSON ({' '.join(str(err).split())})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: (top level): expected an object, got {type(data).__name__}")
    return data


#: Every byte but brackets: ``_depth`` walks only the brackets.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _depth(raw: bytes) -> int:
    """How deep brackets nest in ``raw`` (strings are not skipped: an over-count only refuses sooner).

    The brackets are picked out in C and summed by numpy: a byte-by-byte loop
    took a minute over 65,536 streams' run.json, on every read."""
    brackets = np.frombuffer(raw.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1).astype(np.int32)
    return int(max(0, np.cumsum(steps).max(initial=0)))


def load_run(path: Path) -> tuple[RunRecord, Optional[RunVerdicts]]:
    """A run.json's facts, and the verdicts an earlier-format run.json kept
    inside it (``None`` when it kept none, or kept them in a shape this code
    no longer reads: ``testbed check`` makes them anew)."""
    data = read_object(path)
    legacy = None
    if "format" not in data:
        kept = {k: data.pop(k) for k in LEGACY_VERDICT_KEYS if k in data}
        try:
            legacy = RunVerdicts.model_validate(kept) if "check" in kept else None
        except ValidationError:
            legacy = None
    return parse(RunRecord, data, path), legacy


def dump(model: Model) -> dict[str, Any]:
    """The JSON object a model is written as: keys as the files spell them, unset optionals left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
