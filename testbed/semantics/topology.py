"""Declarative topology files: hosts, links, the splitter switch and its streams.

A topology is YAML validated with pydantic.  Anything wrong with it becomes a
``TopologyError`` whose message is one line naming the file and the field, so
the CLI can print it and exit 2 before anything is started.
"""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Sequence, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from testbed import ROOT
from testbed.semantics.queries import QUERY_KINDS
from testbed.semantics.windows import MAX_LATE_SLIDES, StreamConfig, StreamOracle, WindowAssigner, make_assigner

#: Node names end up in interface names (``h12-eth0``, at most 15 bytes) and
#: in command lines, so they are kept short and plain.
NAME_PATTERN = r"^[a-z][a-z0-9]{0,9}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
MAX_STREAM_ID = 0xFFFF  # the event type is 16 bits on the wire
SUBNET = ipaddress.ip_network("10.0.0.0/24")
SPLITTER_IP = "10.0.0.254"   # where sources address their events


class TopologyError(Exception):
    """A topology file that cannot be used; ``str()`` is the one-line message."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WindowSpec(StrictModel):
    """``kind: count`` (size/slide in events) or ``kind: time`` (in timestamp units).

    Time windows may allow ``lateness``: an event up to that far behind the
    newest timestamp of its stream still goes to its own windows
    (docs/windows.md, "Late events").
    """

    kind: Literal["count", "time"]
    size: int = Field(gt=0)
    slide: int = Field(gt=0)
    origin: Optional[int] = Field(default=None, ge=0)
    lateness: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _time_only_fields(self):
        if self.kind == "count" and self.origin is not None:
            raise ValueError("origin is only meaningful for time windows")
        if self.kind == "count" and self.lateness:
            raise ValueError("lateness is only meaningful for time windows: count windows number "
                             "events by arrival, so no event arrives late")
        if self.lateness > MAX_LATE_SLIDES * self.slide:
            raise _FieldError("lateness", f"{self.lateness} exceeds what the splitter supports, "
                                          f"{MAX_LATE_SLIDES} slides ({MAX_LATE_SLIDES * self.slide})")
        return self

    def assigner(self) -> WindowAssigner:
        return make_assigner(self.kind, self.size, self.slide)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump()


class Timestamps(StrictModel):
    """Event timestamps of a source: ``start + k*step`` for the k-th event."""

    start: int = Field(default=0, ge=0)
    step: int = Field(default=1, ge=0)


class Replay(StrictModel):
    """Replay a CSV or Parquet file as the stream, naming the columns to use.

    Rows are sent in file order; the k-th row is the event with seq k.  A
    relative path is taken from the topology file's folder.
    """

    path: str
    ts: str
    value: str
    key: Optional[str] = None


class Query(StrictModel):
    """What each operator computes per window (``testbed.semantics.queries``)."""

    kind: Literal[QUERY_KINDS] = "count"  # type: ignore[valid-type]


class Disorder(StrictModel):
    """Send ``fraction`` of the events late: each such event goes out after the
    events up to ``max_delay`` timestamp units newer than itself."""

    fraction: float = Field(ge=0, le=1)
    max_delay: int = Field(gt=0, description="timestamp units")


class Perturb(StrictModel):
    """What a source does to its stream on purpose, seeded by the run's seed:
    events sent late (``disorder``), not sent (``loss``), or sent twice
    (``duplicate``).  sources.parquet records what was actually sent."""

    disorder: Optional[Disorder] = None
    loss: float = Field(default=0, ge=0, le=1)
    duplicate: float = Field(default=0, ge=0, le=1)


class Stream(StrictModel):
    id: int = Field(ge=0, le=MAX_STREAM_ID, description="event type on the wire")
    name: Optional[str] = None
    source: Name
    window: WindowSpec
    operators: list[Name] = Field(min_length=1)
    events: int = Field(gt=0, description="number of events the source sends")
    rate: float = Field(gt=0, description="events per second")
    timestamps: Timestamps = Timestamps()
    query: Query = Query()
    replay: Optional[Replay] = None
    perturb: Optional[Perturb] = None

    @field_validator("operators")
    @classmethod
    def _distinct(cls, ops: list[str]) -> list[str]:
        dupes = sorted({o for o in ops if ops.count(o) > 1})
        if dupes:
            raise ValueError(f"operator hosts listed twice: {', '.join(dupes)}")
        return ops

    @property
    def label(self) -> str:
        return self.name or str(self.id)

    def oracle(self, changes: Sequence[tuple[int, StreamConfig]] = ()) -> StreamOracle:
        """The reference splitter for this stream (``docs/windows.md``), with
        the changes that took effect during a run, ``(start, config)``."""
        return StreamOracle(self.window.assigner(), self.operators, self.window.origin, self.window.lateness,
                            changes)

    def config(self, window: Optional["WindowSpec"] = None,
               operators: Optional[Sequence[str]] = None) -> StreamConfig:
        """This stream's configuration, or the one a change to ``window`` and/or
        ``operators`` gives it.  A change keeps the axis: the kind and a time
        stream's origin cannot change (docs/windows.md, "Reconfiguration")."""
        w = window or self.window
        if w.kind != self.window.kind:
            raise _FieldError("window.kind", f"a change cannot turn {self.window.kind} windows into {w.kind} ones")
        if w.origin != self.window.origin:
            raise _FieldError("window.origin", "a change cannot move the stream's origin")
        return StreamConfig(w.assigner(), tuple(self.operators if operators is None else operators), w.lateness)

    def record(self) -> dict[str, Any]:
        """The stream as JSON: the one shape run.json and the Spark job keep it in."""
        return self.model_dump(mode="json")

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Stream":
        return cls.model_validate(record)


class Host(StrictModel):
    ip: Optional[str] = None
    mac: Optional[str] = None

    @field_validator("ip")
    @classmethod
    def _ip(cls, v):
        if v is not None:
            ipaddress.ip_interface(v if "/" in v else v + "/24")
        return v

    @field_validator("mac")
    @classmethod
    def _mac(cls, v):
        if v is not None and not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", v):
            raise ValueError("mac must look like 00:00:00:00:00:01 (lower case)")
        return v


class Link(StrictModel):
    """A host's link to the splitter, shaped when asked: ``bw`` with HTB;
    ``delay``, ``loss`` and ``reorder`` (netem's meanings) with netem where
    the kernel has it, else with a relay in user space (testbed.emulation.impairment)."""

    host: Name
    bw: Optional[float] = Field(default=None, gt=0, description="Mbit/s")
    delay: Optional[str] = Field(default=None, pattern=r"^\d+(\.\d+)?(us|ms|s)$")
    loss: Optional[float] = Field(default=None, ge=0, le=100, description="percent")
    reorder: Optional[float] = Field(default=None, ge=0, le=100, description="percent sent without the delay")
    #: Who impairs the link: netem where the kernel has it and the relay
    #: elsewhere (``auto``), or one of them by name.  Only the relay can
    #: reorder, and only the relay names the events it drops.
    shaper: Literal["auto", "netem", "user"] = "auto"

    @model_validator(mode="after")
    def _reorder_needs_delay(self):
        if self.reorder and not self.delay:
            raise _FieldError("reorder", "needs a delay: reordered frames are the ones that skip it")
        if self.reorder and self.shaper == "netem":
            raise _FieldError("shaper", "netem is not asked to reorder here; use shaper: user or auto")
        return self

    @property
    def impaired(self) -> bool:
        """Whether the link delays, loses or reorders frames (bandwidth alone is not)."""
        return bool(self.delay or self.loss or self.reorder)


class Switch(StrictModel):
    name: Name = "s1"
    target: Literal["model", "bmv2"] = "model"


class Topology(StrictModel):
    name: Name
    description: str = ""
    seed: int = 1
    switch: Switch = Switch()
    hosts: dict[Name, Host]
    links: list[Link] = []
    streams: list[Stream] = Field(min_length=1)

    @model_validator(mode="after")
    def _cross_references(self):
        hosts = self.hosts
        if self.switch.name in hosts:
            raise _FieldError("switch.name", f"{self.switch.name!r} is also a host name")
        for i, link in enumerate(self.links):
            if link.host not in hosts:
                raise _FieldError(f"links[{i}].host", f"unknown host {link.host!r}")
        seen_links = [l.host for l in self.links]
        for i, link in enumerate(self.links):
            if seen_links.count(link.host) > 1:
                raise _FieldError(f"links[{i}].host", f"host {link.host!r} has two links")
        ids: dict[int, int] = {}
        for i, s in enumerate(self.streams):
            if s.id in ids:
                raise _FieldError(f"streams[{i}].id", f"duplicate stream id {s.id} (also streams[{ids[s.id]}])")
            ids[s.id] = i
            if s.source not in hosts:
                raise _FieldError(f"streams[{i}].source", f"unknown host {s.source!r}")
            for j, op in enumerate(s.operators):
                if op not in hosts:
                    raise _FieldError(f"streams[{i}].operators[{j}]", f"unknown host {op!r}")
                if op == s.source:
                    raise _FieldError(f"streams[{i}].operators[{j}]", f"{op!r} is the stream's source")
        addrs: dict[str, str] = {}
        for name, h in hosts.items():
            for kind, value in (("ip", h.ip), ("mac", h.mac)):
                if value is None:
                    continue
                key = kind + ":" + value.split("/")[0]
                if key in addrs:
                    raise _FieldError(f"hosts.{name}.{kind}", f"{value} is also used by {addrs[key]}")
                addrs[key] = name
        return self

    # -- derived views -------------------------------------------------
    def link_for(self, host: str) -> Link:
        for link in self.links:
            if link.host == host:
                return link
        return Link(host=host)

    def addresses(self) -> dict[str, tuple[str, str]]:
        """``host -> (ip, mac)``, filling in what the file leaves out.

        Auto-assigned addresses follow the host's position in ``hosts``,
        skipping addresses that another host was given explicitly.
        """
        taken_ip = {h.ip.split("/")[0] for h in self.hosts.values() if h.ip}
        taken_mac = {h.mac for h in self.hosts.values() if h.mac}
        out: dict[str, tuple[str, str]] = {}
        n = 1
        for name, h in self.hosts.items():
            ip, mac = (h.ip.split("/")[0] if h.ip else None), h.mac
            while ip is None:
                cand = str(SUBNET.network_address + n)
                n += 1
                if cand not in taken_ip and cand != SPLITTER_IP:
                    ip = cand
            if mac is None:
                last = int(ipaddress.ip_address(ip)) & 0xFFFFFF
                mac = "02:00:00:%02x:%02x:%02x" % (last >> 16, (last >> 8) & 0xFF, last & 0xFF)
                if mac in taken_mac:
                    raise TopologyError(f"hosts.{name}.mac: cannot auto-assign, {mac} is taken")
            out[name] = (ip, mac)
        return out

    def switch_ports(self) -> dict[str, int]:
        """``host -> switch port``: ports are numbered 1.. in ``hosts`` order."""
        return {name: i + 1 for i, name in enumerate(self.hosts)}

    def operator_hosts(self) -> list[str]:
        seen: dict[str, None] = {}
        for s in self.streams:
            for op in s.operators:
                seen.setdefault(op, None)
        return list(seen)

    def source_hosts(self) -> list[str]:
        return list(dict.fromkeys(s.source for s in self.streams))

    def stream(self, stream_id: int) -> Stream:
        for s in self.streams:
            if s.id == stream_id:
                return s
        raise KeyError(stream_id)


class _FieldError(ValueError):
    """Raised inside validators to name a field other than the one validated."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _describe(err: ValidationError) -> str:
    first = err.errors(include_url=False)[0]
    loc = ""
    for part in first["loc"]:
        if part == "[key]":
            continue
        if isinstance(part, int):
            loc += f"[{part}]"
        else:
            loc += ("." if loc else "") + str(part)
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, _FieldError):
        # A model's validator names a field relative to that model.
        return f"{loc + '.' if loc else ''}{ctx_error.field}: {ctx_error.message}"
    msg = first["msg"]
    msg = msg.removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    elif first["type"] == "string_pattern_mismatch" and "pattern" in (first.get("ctx") or {}):
        msg = f"{first['input']!r} is not a valid name (lower-case letter, then up to 9 letters or digits)" \
            if first["ctx"]["pattern"] == NAME_PATTERN else msg
    return f"{loc or '(top level)'}: {msg}"


def parse_topology(data: Any, source: str = "<topology>") -> Topology:
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: (top level): expected a mapping, got {type(data).__name__}")
    try:
        return Topology.model_validate(data)
    except ValidationError as err:
        raise TopologyError(f"{source}: {_describe(err)}") from None
    except TopologyError as err:
        raise TopologyError(f"{source}: {err}") from None


def load_topology(path: Union[str, Path]) -> Topology:
    """Read and validate a topology file; every failure is a ``TopologyError``."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise TopologyError(f"{path}: cannot read: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise TopologyError(f"{path}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    topo = parse_topology(data, str(path))
    return _resolve_replays(topo, path)


def _resolve_replays(topo: Topology, path: Path) -> Topology:
    """Make replay paths absolute and check the files and columns exist."""
    streams = []
    for i, s in enumerate(topo.streams):
        if s.replay is not None:
            file = Path(s.replay.path)
            if not file.is_absolute():
                file = (path.parent / file).resolve()
            if not file.exists():
                raise TopologyError(f"{path}: streams[{i}].replay.path: no such file {file}")
            if file.suffix not in (".csv", ".parquet"):
                raise TopologyError(f"{path}: streams[{i}].replay.path: must be .csv or .parquet")
            columns = _columns(file)
            for field_name in ("ts", "value", "key"):
                col = getattr(s.replay, field_name)
                if col is not None and col not in columns:
                    raise TopologyError(f"{path}: streams[{i}].replay.{field_name}: no column {col!r} in {file.name}")
            s = s.model_copy(update={"replay": s.replay.model_copy(update={"path": str(file)})})
        streams.append(s)
    return topo.model_copy(update={"streams": streams})


def _columns(file: Path) -> list[str]:
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq
        return pq.read_schema(file).names
    with open(file) as f:
        return [c.strip() for c in f.readline().rstrip("\n").split(",")]


def resolve_topology(name_or_path: str, root: Optional[Path] = None) -> Path:
    """A path as given, or a scenario name looked up in ``topologies/``."""
    p = Path(name_or_path)
    if p.exists():
        return p
    root = root or ROOT
    cand = root / "topologies" / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    raise TopologyError(f"{name_or_path}: no such topology file or scenario (looked in topologies/)")
