"""The run directory: every path a run writes or reads, in one place.

A run directory is the testbed's one interface between its phases and its
tools: the orchestrator, the host processes (sources, receivers), the Spark
application, ``testbed check`` and ``testbed plot`` all find their files
through ``RunDir``, and nothing else spells a file name.  The layout:

    run.json  verdicts.json  topology.yaml   the facts, the checks' verdicts, the topology as run
    switch.json                              the switch's target, control port, namespace
    sources.parquet  deliveries.parquet      raw events, merged from raw/
    windows.parquet  windows_reference.parquet   the operators' output, the reference
    complex_events.parquet  complex_events_reference.parquet   the CEP sinks' record, Spark's reference
    load.png  latency.png  analysis.png      figures, redrawn from the above
    logs/   raw/   pcaps/   spark/           logs, per-host files, captures, Spark's files

``ExperimentDir`` does the same for a set of runs.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from testbed.rundir.files import NO_SUCH_FILE, why_unreadable
from testbed.rundir.names import path_name
from testbed.rundir.record import (
    KeyShapeError,
    RunDirError,
    RunRecord,
    RunVerdicts,
    dump,
    load_run,
    parse,
    read_object,
    require_shapes,
)

#: Past this many bytes a JSON file is written without indentation: only the
#: compact form has json's C encoder, and the pure-Python one took minutes
#: on the 240 MB that 65,536 streams' run.json came to indented.
INDENT_UP_TO = 4 << 20


def write_json_atomic(path: Path, data: Any, compact: bool = False) -> None:
    """Write JSON under a temporary name and rename it, so a reader never sees half a file.

    Indented for a reader, unless it is large (``INDENT_UP_TO``) or ``compact``
    (a status file rewritten several times a second)."""
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(data, default=str)
    if not compact and len(text) <= INDENT_UP_TO:
        text = json.dumps(data, indent=2, default=str)
    tmp.write_text(text)
    tmp.replace(path)


def read_json(path: Path) -> dict:
    """A JSON file, or ``{}`` while it does not exist yet (or is being replaced), or while
    it is no regular file: a named pipe in its place would block the reader for good."""
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


class At:
    """A path inside a run or experiment directory, declared once as a class
    attribute: ``record = At("run.json")`` makes ``rundir.record`` that path."""

    def __init__(self, *parts: str):
        self.parts = parts

    def __get__(self, owner_obj, owner_type=None):
        return self if owner_obj is None else owner_obj.root.joinpath(*self.parts)


#: The columns each merged table has; the tools that read a table rely on them.
TABLE_COLUMNS = {
    "sources": ("stream", "seq", "ts", "key", "value", "send_ns"),
    "deliveries": ("stream", "seq", "ts", "key", "value", "recv_ns", "operator"),
    "windows": ("stream", "window", "operator", "key", "result", "n_events"),
    "windows_reference": ("stream", "window", "operator", "key", "result", "n_events"),
    # what the CEP stage's sinks recorded (docs/cep.md): one row per complex event
    "complex_events": ("pattern", "match", "stream", "seq", "ts", "value", "recv_ns", "at", "sink"),
    # the same complex events, computed by the Spark job from the stream (testbed.semantics.cep.reference)
    "complex_events_reference": ("pattern", "match", "stream", "seq", "ts", "value", "send_ns", "rank"),
}
#: Fields of spark/analysis.json that ``plot`` reads.
ANALYSIS_FIELDS = {"load": list, "completeness": list, "latency_us": list, "spark_master": str}


def make_folders(*folders: Path) -> None:
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)


def resolved(path: Path) -> Path:
    """``path`` made absolute with its links followed; a link in a loop is left
    as it is, for the reader to refuse with its name."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):
        return Path(path).absolute()


def _json_fields(path: Path, fields: dict[str, type]) -> dict:
    """A JSON object holding ``fields`` of the given types, or ``RunDirError`` naming what is wrong."""
    data = read_object(path)
    for name, kind in fields.items():
        if not isinstance(data.get(name), kind):
            raise RunDirError(f"{path}: {name}: {'missing' if name not in data else f'not a {kind.__name__}'}")
    return data


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory (``root``); creating it is ``create()``'s job."""

    root: Path

    # the record, the merged raw data, and the operators' output
    record = At("run.json")
    verdicts = At("verdicts.json")
    topology = At("topology.yaml")
    switch_info = At("switch.json")      # how to reach the switch while the run goes on
    sources = At("sources.parquet")
    deliveries = At("deliveries.parquet")
    windows = At("windows.parquet")
    windows_reference = At("windows_reference.parquet")
    link_drops = At("link_drops.parquet")          # events link relays dropped (user-space impairment)
    complex_events = At("complex_events.parquet")  # the CEP stage's sinks (topologies with cep:)
    complex_events_reference = At("complex_events_reference.parquet")  # Spark's, from the stream (with cep:)
    # logs, per-host files after the run, captures
    logs = At("logs")
    spark_log = At("logs", "spark.log")
    raw = At("raw")
    pcaps = At("pcaps")
    # the Spark application's files
    spark = At("spark")
    spark_job = At("spark", "job.json")
    spark_package = At("spark", "testbed.zip")     # the package, for spark-submit --py-files
    spark_in = At("spark", "in")
    spark_input_done = At("spark", "in", "_DONE")
    spark_ready = At("spark", "ready")
    spark_partials = At("spark", "partials")
    spark_checkpoint = At("spark", "checkpoint")
    spark_analysis = At("spark", "analysis.json")
    spark_live = At("spark", "live")               # windows the live merger emitted, one file per batch
    spark_live_status = At("spark", "live.json")   # the operators' progress and lag, while the run goes
    spark_changes = At("spark", "changes.json")    # the epochs the run went through, for the reference
    spark_unseen = At("spark", "unseen.json")      # events the switch never saw, left out of the reference
    spark_done = At("spark", "done.json")          # a warm Spark's word that it finished the run's job, or why not
    spark_cancel = At("spark", "cancel")           # the run asks a warm Spark to drop its job (it ended early)

    #: The files ``check``, ``compare``, ``plot`` and the API read when they are there.
    READ_BY_TOOLS = ("record", "verdicts", "sources", "deliveries", "windows", "windows_reference", "link_drops",
                     "complex_events", "complex_events_reference", "spark_analysis")

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", resolved(self.root))

    def refuse_unreadable(self) -> None:
        """``RunDirError`` naming the first file the tools would read that is there but is no
        regular file: a named pipe would make them wait forever, a device read without end."""
        paths = [getattr(self, name) for name in self.READ_BY_TOOLS]
        paths += sorted(self.raw.glob("*.status.json")) if self.raw.is_dir() else []
        for path in paths:
            problem = why_unreadable(path)
            if problem not in (None, NO_SUCH_FILE):
                raise RunDirError(f"{path}: cannot read: {problem}")

    def create(self) -> "RunDir":
        make_folders(self.root, self.logs, self.raw)
        return self

    def is_run(self) -> bool:
        return self.record.is_file()

    def unwritable(self, need_bytes: int) -> Optional[str]:
        """Why the run cannot write here (read-only, not a folder, short of ``need_bytes``), or ``None``.

        Probes the folder itself, or its nearest existing parent, with a
        temporary file that is removed at once, so it leaves nothing behind.
        """
        folder = self.root
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            return f"{folder} is not a folder"
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
            free = shutil.disk_usage(folder).free
        except OSError as err:
            return f"cannot write in {folder}: {err.strerror}"
        if free < need_bytes:
            return f"{folder} has {free / 2**20:.0f} MiB free; the run needs about {need_bytes / 2**20:.0f} MiB"
        return None

    def require(self, tables: tuple[str, ...], analysis: bool = False) -> RunRecord:
        """The record, once it and ``tables`` (keys of ``TABLE_COLUMNS``) are readable with
        the keys and columns the tools need; else ``RunDirError`` naming the file and key.

        Only schemas are read here; what a table holds is read by its user.
        """
        import pyarrow.parquet as pq

        if not self.root.is_dir():
            why = "a link that leads nowhere, or in a loop" if self.root.is_symlink() else "no such run directory"
            raise RunDirError(f"{self.root}: {why}")
        self.refuse_unreadable()
        record = self.read_record()
        for table in tables:
            path: Path = getattr(self, table)
            if not path.exists():
                raise RunDirError(f"{path}: missing (the run ended before writing it; see run.json's error)")
            try:
                names = set(pq.read_schema(path).names)
            except (OSError, ValueError) as err:
                raise RunDirError(f"{path}: not a readable Parquet file ({' '.join(str(err).split())})") from None
            absent = [c for c in TABLE_COLUMNS[table] if c not in names]
            if absent:
                raise RunDirError(f"{path}: no column {absent[0]!r}")
        if analysis:
            _json_fields(self.spark_analysis, ANALYSIS_FIELDS)
        return record

    def read_record(self) -> RunRecord:
        """run.json's facts; ``RunDirError`` naming the file and key if it cannot be used."""
        return load_run(self.record)[0]

    def write_record(self, record: RunRecord) -> None:
        write_json_atomic(self.record, dump(record))

    def read_verdicts(self) -> Optional[RunVerdicts]:
        """The verdicts of the last check (verdicts.json, or an earlier run.json's), or
        ``None`` for a run never checked."""
        if self.verdicts.exists():
            return parse(RunVerdicts, read_object(self.verdicts), self.verdicts)
        return load_run(self.record)[1] if self.record.exists() else None

    def write_verdicts(self, verdicts: RunVerdicts) -> None:
        write_json_atomic(self.verdicts, dump(verdicts))

    def figure(self, name: str) -> Path:
        """``load``, ``latency``, ``analysis``: ``<name>.png`` in the run directory."""
        return self.root / f"{name}.png"

    def log(self, host: str, role: str) -> Path:
        """Log of a process: ``logs/<host>.<role>.log`` (role: source, receiver, ...)."""
        return self.logs / f"{path_name(host, 'host')}.{path_name(role, 'role')}.log"

    def switch_log(self, switch: str) -> Path:
        return self.logs / f"{path_name(switch, 'switch')}.log"

    def bmv2_log(self, switch: str) -> Path:
        """bmv2's log.  ``--log-file X`` makes bmv2 write ``X.txt`` (its rotating
        sink adds the extension), so the switch is given this minus ``.txt``."""
        return self.logs / f"{path_name(switch, 'switch')}.bmv2.txt"

    def bmv2_notifications(self, switch: str) -> Path:
        return self.logs / f"{path_name(switch, 'switch')}-notifications.ipc"

    def pcap(self, intf: str) -> Path:
        return self.pcaps / f"{path_name(intf, 'interface')}.pcap"

    # -- what host processes write while the run goes on ----------------------
    # They write at the top level and the collect phase moves them to raw/,
    # so the top level of a finished run holds only merged data.  Receivers
    # write their deliveries in parts, one every flush, so a receiver that
    # dies loses at most its last fraction of a second.
    HOST_FILES = {"sources": "{host}.sources.parquet", "source_status": "{host}.source.status.json",
                  "deliveries": "{host}.deliveries.{part}.parquet", "status": "{host}.status.json",
                  "relay_status": "{host}.relay.status.json", "link_drops": "{host}.link_drops.parquet",
                  "complex_events": "{host}.complex_events.{part}.parquet"}

    def host_file(self, kind: str, host: str, part: int = 0) -> Path:
        return self.root / self.HOST_FILES[kind].format(host=path_name(host, "host"), part=f"{part:06d}")

    def source_events(self, host: str) -> Path:
        return self.host_file("sources", host)

    def source_status(self, host: str) -> Path:
        return self.host_file("source_status", host)

    def receiver_events(self, host: str, part: int = 0) -> Path:
        """Part ``part`` of what the receiver on ``host`` recorded."""
        return self.host_file("deliveries", host, part)

    def receiver_complex_events(self, host: str, part: int = 0) -> Path:
        """Part ``part`` of the complex events the receiver on sink host ``host`` recorded."""
        return self.host_file("complex_events", host, part)

    def receiver_status(self, host: str) -> Path:
        return self.host_file("status", host)

    def next_receiver_part(self, host: str, kind: str = "deliveries") -> int:
        """The first part number of ``kind`` (deliveries, complex_events) no receiver on
        ``host`` has written: where one restarted on the host (a recovered operator) carries on."""
        part = 0
        while self.host_file(kind, host, part).exists():
            part += 1
        return part

    # A schedule entry placed in stream terms holds its stream's source at the
    # point: the source creates ``reached`` there and waits for ``go``, which
    # the run creates once the entry has taken effect.  Collect removes both.
    def barrier_reached(self, entry: int) -> Path:
        return self.root / "barriers" / f"{entry}.reached"

    def barrier_go(self, entry: int) -> Path:
        return self.root / "barriers" / f"{entry}.go"

    def relay_status(self, host: str) -> Path:
        """Status of the link relay on ``host``'s link (user-space impairment)."""
        return self.host_file("relay_status", host)

    def host_files(self, kind: str) -> list[Path]:
        """Per-host files of ``kind`` (``sources``, ``deliveries``, ``link_drops``, ``status``) still at
        the top level; ``status`` covers every process's status file."""
        return sorted(self.root.glob(self.HOST_FILES[kind].format(host="*", part="*")))

    def raw_receiver_status(self, host: str) -> Path:
        return self.raw / self.receiver_status(host).name

    def spark_inbox(self, host: str) -> Path:
        """Where an operator host hands its events to Spark."""
        return self.spark_in / path_name(host, "host")

    def spark_inbox_part(self, host: str, part: int) -> Path:
        """One hand-over file; Spark reads every file of the inbox whose name starts with neither '.' nor '_'."""
        return self.spark_inbox(host) / f"{host}-{part:06d}.parquet"

    def spark_paths(self) -> dict[str, str]:
        """What the Spark job reads and writes, for its job description."""
        return {"in": str(self.spark_in), "input_done": str(self.spark_input_done),
                "ready": str(self.spark_ready), "partials": str(self.spark_partials),
                "checkpoint": str(self.spark_checkpoint), "analysis": str(self.spark_analysis),
                "live": str(self.spark_live), "live_status": str(self.spark_live_status),
                "sources": str(self.sources), "deliveries": str(self.deliveries),
                "windows": str(self.windows), "windows_reference": str(self.windows_reference),
                "complex_events_reference": str(self.complex_events_reference),
                "changes": str(self.spark_changes), "unseen": str(self.spark_unseen),
                "done": str(self.spark_done), "cancel": str(self.spark_cancel)}

    def link_latest(self) -> None:
        """Point ``<parent>/latest`` at this run (results/<name>/latest)."""
        latest = self.root.parent / "latest"
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            latest.symlink_to(self.root.name)
        except OSError:
            pass


@dataclass(frozen=True)
class ExperimentDir:
    """``results/<experiment>/<id>/`` (or ``results/figures/<experiment>/``):
    the record, the figures, the raw data they are drawn from, and one RunDir
    per emulation run.  The layout:

        experiment.json        parameters, our numbers and the paper's, side by side
        <figure>.png           drawn from raw/ and experiment.json alone (``testbed plot``)
        raw/*.parquet|json     the measurements, one row per sample
        runs/<name>/           emulation runs (scenario sets, the rate sweep)
        logs/                  logs of switches started outside Mininet (``RunDir(root)``'s
                               log paths, so a SwitchProcess takes ``root`` as its run directory)
    """

    root: Path

    record = At("experiment.json")
    runs_folder = At("runs")
    raw = At("raw")
    logs = At("logs")
    # raw data of the kinds of ``testbed.experiments``
    plan_by_n = At("raw", "plan_by_n.parquet")                # resources: one stream, N swept
    plan_by_streams = At("raw", "plan_by_streams.parquet")    # resources: N fixed, streams swept
    p4ss_growth = At("raw", "p4ss_growth.parquet")            # resources: P4SS's three streams, N swept
    readback = At("raw", "readback.parquet")                  # resources: installed vs read back
    program_stats = At("raw", "program.json")                 # resources: the compiled program
    control_times = At("raw", "control.parquet")              # control: one row per install
    latency_samples = At("raw", "latency.parquet")            # latency: one row per copy out
    rate_points = At("raw", "rates.parquet")                  # rates: one row per run
    cep_latency = At("raw", "cep_latency.parquet")            # cep: one row per complex event or copy out
    cep_rates = At("raw", "cep_rates.parquet")                # cep: one row per blast
    cep_capacity = At("raw", "cep_capacity.parquet")          # cep: one row per capacity trial
    cep_changes = At("raw", "cep_changes.parquet")            # cepadapt: one row per change applied
    cep_changes_events = At("raw", "cep_complex_events.parquet")  # cepadapt: switch's and oracle's complex events
    start_windows = At("raw", "start_windows.parquet")        # startrule: one row per window, per stream and rule
    start_load = At("raw", "start_load.parquet")              # startrule: copies per operator, per stream and rule

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", resolved(self.root))

    def run(self, name: str) -> RunDir:
        """The run called ``name`` (a label such as ``L2h-bmv2``), always inside this experiment."""
        return RunDir(self.runs_folder / path_name(name, "run name"))

    def paced_topology(self, target: str) -> Path:
        """The topology an adaptation experiment ran on ``target`` at another pace."""
        return self.raw / f"topology-{target}.yaml"

    def runs(self) -> Iterator[RunDir]:
        found = sorted(self.runs_folder.iterdir()) if self.runs_folder.is_dir() else []
        return (RunDir(path) for path in found if RunDir(path).is_run())

    def figure(self, name: str) -> Path:
        return self.root / f"{name}.png"

    def create(self) -> "ExperimentDir":
        make_folders(self.root, self.raw, self.logs)
        return self

    def is_experiment(self) -> bool:
        # exists(), not is_file(): an experiment.json that is a pipe or a folder is
        # this directory's record all the same, which read_record then refuses by name.
        return self.record.exists()

    def write_record(self, record: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.record, record)

    def read_record(self) -> dict:
        """experiment.json as a dict, or ``RunDirError`` naming the file and what is wrong with it."""
        record = read_object(self.record)
        if not isinstance(record.get("kind"), str):
            problem = "missing" if "kind" not in record else f"expected a string, got {type(record['kind']).__name__}"
            raise RunDirError(f"{self.record}: kind: {problem}")
        try:
            require_shapes(record, {"paper": "an object", "ours": "an object", "skipped": "an object"})
            require_shapes(record.get("ours") or {}, {"runs": "an object of objects"}, "ours.")
        except KeyShapeError as err:
            raise RunDirError(f"{self.record}: {err}") from None
        return record
