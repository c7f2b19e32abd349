"""Declarative topology files: hosts, links, the splitter switch and its streams.

A topology is YAML validated with pydantic.  Anything wrong with it becomes a
``TopologyError`` whose message is one line naming the file and the field, so
the CLI can print it and exit 2 before anything is started.
"""
from __future__ import annotations

import ipaddress
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Sequence, Union

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from testbed import ROOT
from testbed.rundir.files import why_unreadable
from testbed.rundir.names import NODE_NAME, UnsafeName, node_name
from testbed.semantics import instances as instances_
from testbed.semantics import limits, strict
from testbed.semantics import racks as racks_
from testbed.semantics.cep.changes import CepTimeline, plan_changes
from testbed.semantics.cep.rules import CepRules, ComplexEventRule
from testbed.semantics.datasets import Dataset, DatasetError, dataset_size
from testbed.semantics.families import expand_families
from testbed.semantics.limits import MAX_EVENTS, MAX_INT64, MAX_STREAM_ID, MAX_WINDOWS_PER_EVENT
from testbed.semantics.queries import QUERIES, QUERY_KINDS, query
from testbed.semantics.replay import resolve_replays
from testbed.semantics.schedule import Adapt, ScheduleEntry, ScheduleError, StreamPoint, last_send, rate_profile
from testbed.semantics.splitting import SPLITS
from testbed.semantics.strict import FieldError as _FieldError
from testbed.semantics.strict import StrictModel
from testbed.semantics.windows import (
    EVENT,
    GRID,
    MAX_EVENT_WINDOWS,
    MAX_LATE_SLIDES,
    StreamConfig,
    StreamOracle,
    WindowAssigner,
    make_assigner,
    max_windows,
)
from testbed.semantics.yamlfile import read_yaml

#: Node names end up in interface names (``h12-eth0``, at most 15 bytes) and
#: in command lines, so they are kept short and plain (``testbed.rundir.names``).
NAME_PATTERN = NODE_NAME
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
#: An operator in a stream's list: a host, or one instance of a host that runs several.
OperatorName = Annotated[str, Field(pattern=instances_.OPERATOR_NAME)]
# The splitter's addresses are the address plan's; named here too for the many readers of the schema.
from testbed.semantics.addressing import SPLITTER_IP, SPLITTER_MAC  # noqa: E402,F401


def at_most(limit: float, why: str) -> AfterValidator:
    """A bound that says where it comes from: ``Annotated[int, at_most(2**32, "seq is 32 bits")]``."""
    def check(value):
        if value is not None and value > limit:
            raise ValueError(f"{value} is more than {limit}: {why}")
        return value
    return AfterValidator(check)


def distinct(items: list[str], what: str) -> list[str]:
    """``items``, or ``ValueError`` naming those listed more than once."""
    twice = sorted(item for item, count in Counter(items).items() if count > 1)
    if twice:
        raise ValueError(f"{what} listed twice: {', '.join(twice)}")
    return items


INT64 = "the raw data and Spark hold it as a 64-bit signed integer"
Int64 = Annotated[int, at_most(MAX_INT64, INT64)]


class TopologyError(Exception):
    """A topology file that cannot be used; ``str()`` is the one-line message.

    Line breaks in the message (from a value or a path) are escaped, so
    the message stays one line whatever the input held.
    """

    def __init__(self, message: str):
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))


class WindowSpec(StrictModel):
    """``kind: count`` (size/slide in events) or ``kind: time`` (in timestamp units).

    Time windows may allow ``lateness``: an event up to that far behind the
    newest timestamp of its stream still goes to its own windows
    (docs/windows.md, "Late events").  They start on a fixed grid
    (``starts: grid``) or at events (``starts: event``, S4's rule;
    docs/windows.md, "Where windows start").
    """

    kind: Literal["count", "time"]
    size: Int64 = Field(gt=0)
    slide: Int64 = Field(gt=0)
    origin: Optional[Int64] = Field(default=None, ge=0)
    lateness: Int64 = Field(default=0, ge=0)
    starts: Literal[GRID, EVENT] = GRID  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _time_only_fields(self):
        if self.kind == "count" and self.origin is not None:
            raise ValueError("origin is only meaningful for time windows")
        if self.kind == "count" and self.lateness:
            raise ValueError("lateness is only meaningful for time windows: count windows number "
                             "events by arrival, so no event arrives late")
        if self.kind == "count" and self.starts == EVENT:
            raise _FieldError("starts", "only time windows can start at events: count windows start every "
                                        "slide events, under S4's rule as under the grid")
        if self.starts == EVENT and self.lateness:
            raise _FieldError("lateness", "starts: event takes no lateness: a late event may lie in windows "
                                          "older than the newest starts the switch keeps")
        if self.starts == EVENT and max_windows(self.size, self.slide) > MAX_EVENT_WINDOWS:
            raise _FieldError("size", f"starts: event lets at most {MAX_EVENT_WINDOWS} windows hold an event "
                                      f"(the switch keeps that many starts per stream), but size/slide = "
                                      f"{max_windows(self.size, self.slide)}")
        if self.lateness > MAX_LATE_SLIDES * self.slide:
            raise _FieldError("lateness", f"{self.lateness} exceeds what the splitter supports, "
                                          f"{MAX_LATE_SLIDES} slides ({MAX_LATE_SLIDES * self.slide})")
        if max_windows(self.size, self.slide) > MAX_WINDOWS_PER_EVENT:
            raise ValueError(f"size/slide = {max_windows(self.size, self.slide)} windows per event; the "
                             f"switch's 32-bit window counters hold at most {MAX_WINDOWS_PER_EVENT}")
        return self

    def assigner(self) -> WindowAssigner:
        """A fresh assigner: under ``starts: event`` it learns the stream's starts, so one per stream."""
        return make_assigner(self.kind, self.size, self.slide, self.starts)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump()


class Timestamps(StrictModel):
    """Event timestamps of a source: ``start + k*step`` for the k-th event."""

    start: Int64 = Field(default=0, ge=0)
    step: Int64 = Field(default=1, ge=0)

    def last(self, events: int) -> int:
        return self.start + (events - 1) * self.step


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


class Keys(StrictModel):
    """How a generated stream draws its keys, instead of the query's own draw
    (``testbed.semantics.keys``): ``uniform`` over ``0 .. n-1``, or ``zipf``
    with exponent ``s``, key ``k`` drawn with probability proportional to
    ``1 / (k + 1)**s``, so key 0 is the most frequent."""

    distribution: Literal["uniform", "zipf"]
    n: Annotated[int, at_most(MAX_INT64, "keys are 64-bit signed integers in the raw data and on Spark")] = \
        Field(gt=0, description="how many distinct keys")
    s: Optional[float] = Field(default=None, gt=0, le=limits.MAX_ZIPF_S, allow_inf_nan=False,
                               description="zipf exponent; s = 0 is the uniform distribution")

    @model_validator(mode="after")
    def _exponent(self):
        if self.distribution == "zipf" and self.s is None:
            raise _FieldError("s", "a zipf distribution needs its exponent s (> 0; for s = 0 use uniform)")
        if self.distribution == "uniform" and self.s is not None:
            raise _FieldError("s", "only a zipf distribution has an exponent")
        return self


class Disorder(StrictModel):
    """Send ``fraction`` of the events late: each such event waits until the
    stream is up to ``max_delay`` timestamp units past it; no other event moves
    (``testbed.semantics.workload.send_order``)."""

    fraction: float = Field(ge=0, le=1)
    max_delay: Int64 = Field(gt=0, description="timestamp units")


class Batching(StrictModel):
    """A stream's events several to a frame (docs/wire.md, "Batches"): up to
    ``events`` consecutive events per frame; a frame leaves with fewer when
    its first event would otherwise wait longer than ``max_delay``."""

    events: int = Field(ge=1, le=limits.MAX_BATCH, description="events per frame at most")
    max_delay: float = Field(ge=0, le=limits.MAX_SCHEDULE_S, description="seconds an event may wait for its frame")

    @property
    def packs_events(self) -> bool:
        """Whether a frame can carry two events or more.  With one, every frame
        leaves as a plain event frame (a lone event is never sent as a batch),
        so the stream needs nothing of the switch that unbatched streams do not."""
        return self.events >= 2


class Perturb(StrictModel):
    """What a source does to its stream on purpose, seeded by the run's seed:
    events sent late (``disorder``), not sent (``loss``), or sent twice
    (``duplicate``).  sources.parquet records what was actually sent."""

    disorder: Optional[Disorder] = None
    loss: float = Field(default=0, ge=0, lt=1, description="a stream that loses every event sends nothing to judge")
    duplicate: float = Field(default=0, ge=0, le=1)


class Stream(StrictModel):
    id: Annotated[int, at_most(MAX_STREAM_ID, "the stream id is 16 bits on the wire")] = Field(ge=0)
    name: Optional[str] = None
    source: Name
    window: WindowSpec
    operators: list[OperatorName] = Field(min_length=1)
    events: Annotated[int, at_most(MAX_EVENTS, "events are numbered by the 32-bit seq field")] = Field(gt=0)
    rate: float = Field(ge=limits.MIN_RATE, le=limits.MAX_RATE, description="events per second")
    timestamps: Timestamps = Timestamps()
    query: Query = Query()
    replay: Optional[Replay] = None
    dataset: Optional[Dataset] = None
    perturb: Optional[Perturb] = None
    keys: Optional[Keys] = None
    batch: Optional[Batching] = None
    #: ``windows``: window j to operator j mod N (the papers'); ``key``:
    #: every event to operator crc32(key) mod N (testbed.semantics.splitting).
    split: Literal[SPLITS] = "windows"  # type: ignore[valid-type]

    @field_validator("operators")
    @classmethod
    def _distinct(cls, ops: list[str]) -> list[str]:
        return distinct(ops, "operator hosts")

    @model_validator(mode="after")
    def _sources_of_events(self):
        if self.replay is not None and self.dataset is not None:
            raise _FieldError("dataset", "a stream replays a file or a dataset, not both")
        if self.keys is not None and (self.replay is not None or self.dataset is not None):
            raise _FieldError("keys", "the keys of a replayed stream come from its data")
        # Compared with the default rather than looked for among the fields set: a
        # stream's record (run.json, the Spark job) spells out the default.
        if not self.generated and self.timestamps != Timestamps():
            raise _FieldError("timestamps", "the timestamps of a replayed stream come from its data")
        if self.dataset is not None:
            try:
                held = dataset_size(self.dataset)
            except DatasetError as err:
                raise _FieldError("dataset", str(err)) from None
            if self.events > held:
                raise _FieldError("events", f"{self.events} events, but dataset {self.dataset.name} holds {held}")
        if self.window.starts == EVENT and self.sends_batches:
            raise _FieldError("batch", "starts: event takes events one to a frame: the switch's batch path "
                                       "finds a batch's windows on the grid")
        if self.split == "key" and not query(self.query.kind).group_by_key:
            keyed = ", ".join(q.kind for q in QUERIES.values() if q.group_by_key)
            raise _FieldError("split", f"split: key gives each key's windows to one operator, so the query must "
                                       f"group by key ({keyed}), not {self.query.kind}")
        return self

    @model_validator(mode="after")
    def _timestamps_fit(self):
        if self.generated and self.timestamps.last(self.events) > MAX_INT64:
            raise _FieldError("timestamps", f"start + (events-1)*step = {self.timestamps.last(self.events)} "
                                            f"exceeds {MAX_INT64}, the largest timestamp the raw data holds")
        disorder = self.perturb.disorder if self.perturb else None
        if self.generated and disorder and self.timestamps.last(self.events) + disorder.max_delay > MAX_INT64:
            # The source orders late events by timestamp + delay, in 64 bits.
            raise _FieldError("perturb.disorder.max_delay",
                              f"the last timestamp {self.timestamps.last(self.events)} plus {disorder.max_delay} "
                              f"exceeds {MAX_INT64}, the largest the source can order by")
        return self

    @property
    def generated(self) -> bool:
        """Whether the testbed draws the events (else a replay file or a dataset holds them)."""
        return self.replay is None and self.dataset is None

    @property
    def label(self) -> str:
        return self.name or str(self.id)

    @property
    def sends_batches(self) -> bool:
        """Whether the source packs two events or more in a frame.  A stream
        batched one event to a frame sends plain event frames only, and needs
        of the switch what an unbatched stream does."""
        return self.batch is not None and self.batch.packs_events

    def copies(self) -> int:
        """At most how many copies of the stream's events reach operators (each reaches <= min(cap, N);
        split by key, one)."""
        if self.split == "key":
            return self.events
        return self.events * min(max_windows(self.window.size, self.window.slide), len(self.operators))

    def oracle(self, changes: Sequence[tuple[int, StreamConfig]] = ()) -> StreamOracle:
        """The reference splitter for this stream (``docs/windows.md``), with
        the changes that took effect during a run, ``(start, config)``."""
        return StreamOracle(self.window.assigner(), self.operators, self.window.origin, self.window.lateness,
                            changes, self.split)

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

    def check_change(self, new: "Stream") -> None:
        """Refuse a change to ``new`` that the data plane cannot carry out exactly.

        The kind and origin fix the axis (``config`` refuses them).  The
        lateness may stay or shrink, not grow: under a larger lateness a late
        event could lie in windows of the epoch before the old one, which the
        splitter no longer holds (it keeps two configurations per stream).
        """
        if self.split == "key":
            raise _FieldError("split", f"stream {self.label} is split by key: its windows and operators stay as "
                                       f"they are for the whole run (a change would move keys between operators "
                                       f"in the middle of their windows)")
        if EVENT in (self.window.starts, new.window.starts):
            raise _FieldError("window.starts", f"stream {self.label}: a stream whose windows start at events "
                                               f"takes no change (the switch keeps one epoch's starts only)")
        self.config(new.window, new.operators)
        if new.window.lateness > self.window.lateness:
            raise ValueError(f"stream {self.label}: window.lateness cannot grow at run time "
                             f"({self.window.lateness} -> {new.window.lateness})")

    def recorded_changes(self, changes: Optional[Sequence[dict[str, Any]]]) -> list[tuple[int, StreamConfig]]:
        """The changes that took effect during a run, as run.json keeps them
        under ``changes`` per stream: ``{"start": B, "window": {...},
        "operators": [...]}`` in order, ``start`` being where the switch began
        the epoch on the stream's axis (docs/windows.md, "Reconfiguration").
        Other keys (timings) are the record's business, not the oracle's."""
        return [(int(c["start"]), self.config(WindowSpec.model_validate(c["window"]) if c.get("window") else None,
                                              c.get("operators")))
                for c in changes or ()]

    def record(self) -> dict[str, Any]:
        """The stream as JSON: the one shape run.json and the Spark job keep it in."""
        return self.model_dump(mode="json")

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> "Stream":
        return cls.model_validate(record)


class Host(StrictModel):
    ip: Optional[str] = None
    mac: Optional[str] = None
    #: Operator instances the host runs (``testbed.semantics.instances``): with
    #: more than one, each has an address of its own, and one receiver serves all.
    instances: int = Field(default=1, ge=1, le=instances_.MAX_INSTANCES_PER_HOST)

    @model_validator(mode="before")
    @classmethod
    def _empty(cls, data):
        return {} if data is None else data      # ``h1:`` with nothing after it

    @field_validator("ip")
    @classmethod
    def _ip(cls, v):
        if v is not None:
            addr = ipaddress.ip_interface(v if "/" in v else v + "/24").ip
            if addr.version != 4:
                raise ValueError(f"{v} is not an IPv4 address")
            if addr.is_multicast or addr.is_loopback or addr.is_link_local or addr.is_unspecified \
                    or addr.is_reserved:
                raise ValueError(f"{v} is not a unicast host address")
            if str(addr) == SPLITTER_IP:
                raise ValueError(f"{v} is the splitter's address")
        return v

    @field_validator("mac")
    @classmethod
    def _mac(cls, v):
        if v is not None and not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", v):
            raise ValueError("mac must look like 00:00:00:00:00:01 (lower case)")
        if v is not None and int(v[:2], 16) & 1:
            raise ValueError(f"{v} is a multicast (group) address; a host needs a unicast one")
        if v in ("00:00:00:00:00:00", SPLITTER_MAC):
            raise ValueError(f"{v} is {'the zero address' if v.startswith('00') else 'the splitter address'}")
        return v


class Link(StrictModel):
    """A host's link to the splitter, shaped when asked: ``bw`` with HTB;
    ``delay``, ``loss`` and ``reorder`` (netem's meanings) with netem where
    the kernel has it, else with a relay in user space (testbed.emulation.impairment)."""

    host: Name
    bw: Optional[Annotated[float, at_most(limits.MAX_BW_MBIT, "Mininet's TCLink ignores larger rates")]] = \
        Field(default=None, gt=0, allow_inf_nan=False, description="Mbit/s")
    delay: Optional[str] = Field(default=None, pattern=r"^\d{1,9}(\.\d{1,6})?(us|ms|s)$")
    loss: Optional[float] = Field(default=None, ge=0, le=100, allow_inf_nan=False, description="percent")
    reorder: Optional[float] = Field(default=None, ge=0, le=100, allow_inf_nan=False,
                                     description="percent sent without the delay")
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


class Rack(StrictModel):
    """A leaf switch below the splitter: an ordinary L2 bridge with one
    splitter port, its hosts hanging off it (docs/topology.md, "Racks").
    The splitter reaches each racked host as it reaches an instance of a
    shared host, through a group node whose rid is the host's instance id,
    so the egress rewrite's MAC picks the host and the bridge delivers by
    that MAC alone."""

    hosts: list[Name] = Field(min_length=1, max_length=limits.MAX_RACK_HOSTS)

    @field_validator("hosts")
    @classmethod
    def _distinct(cls, hosts: list[str]) -> list[str]:
        return distinct(hosts, "hosts")


class Switch(StrictModel):
    name: Name = "s1"
    target: Literal["model", "bmv2"] = "model"


def check_stream_hosts(streams, hosts) -> None:
    """Stream ids are unique, and each stream's source and operators are hosts of the topology,
    none of its operators on its source."""
    ids: dict[int, int] = {}
    # A family's members share their source and operators: each pair is
    # looked at once (65,536 streams of N = 64 made 4M look-ups otherwise).
    checked: set[tuple[str, tuple[str, ...]]] = set()
    for i, s in enumerate(streams):
        if s.id in ids:
            raise _FieldError(f"streams[{i}].id", f"duplicate stream id {s.id} (also streams[{ids[s.id]}])")
        ids[s.id] = i
        if s.source not in hosts:
            raise _FieldError(f"streams[{i}].source", f"unknown host {s.source!r}")
        pair = (s.source, tuple(s.operators))
        if pair in checked:
            continue
        checked.add(pair)
        for j, op in enumerate(s.operators):
            if instances_.host_of(op) not in hosts:
                raise _FieldError(f"streams[{i}].operators[{j}]", f"unknown host {op!r}")
            if instances_.host_of(op) == s.source:
                raise _FieldError(f"streams[{i}].operators[{j}]", f"{op!r} is the stream's source")


class Topology(StrictModel):
    name: Name
    description: str = ""
    seed: Int64 = Field(default=1, ge=0)
    switch: Switch = Switch()
    #: Leaf switches below the splitter (``racks``); read before ``hosts``, whose port count depends on them.
    racks: dict[Name, Rack] = {}
    hosts: dict[Name, Host] = Field(min_length=2)
    links: list[Link] = []
    streams: list[Stream] = Field(min_length=1)
    #: Timed changes, rate ramps and failures during the run (``testbed.semantics.schedule``).
    schedule: list[ScheduleEntry] = []
    #: Controller policies: failover, elastic N.
    adapt: Optional[Adapt] = None
    #: Complex event processing beside the splitter: windows and patterns (docs/cep.md).
    cep: Optional[CepRules] = None
    #: Set by ``parse_topology(plan_only=True)``: no network will carry this plan.
    _plan_only: bool = PrivateAttr(default=False)

    @field_validator("hosts")
    @classmethod
    def _ports(cls, hosts: dict[str, Host], info: ValidationInfo) -> dict[str, Host]:
        if info.data.get("racks"):        # ``check_racks`` counts ports; ``addressing`` must still hold the hosts
            return _few(hosts, limits.MAX_RACKED_HOSTS, "the address plan holds", "(a /16 beside the splitter)", info)
        return _few(hosts, limits.MAX_HOSTS, "the switch has ports for", f"(1..{limits.MAX_HOSTS}: bmv2's port "
                    f"space is {limits.MAX_HOSTS + 2}, and its last port drops)", info)

    @model_validator(mode="after")
    def _cross_references(self, info: ValidationInfo):
        hosts = self.hosts
        check_racks(self, _plan_only(info))
        self._check_switch_name("switch.name")
        self._check_instances()
        for i, link in enumerate(self.links):
            if link.host not in hosts:
                raise _FieldError(f"links[{i}].host", f"unknown host {link.host!r}")
        seen_links = [l.host for l in self.links]
        for i, link in enumerate(self.links):
            if seen_links.count(link.host) > 1:
                raise _FieldError(f"links[{i}].host", f"host {link.host!r} has two links")
        check_stream_hosts(self.streams, hosts)
        addrs: dict[str, str] = {}
        for name, h in hosts.items():
            for kind, value in (("ip", h.ip), ("mac", h.mac)):
                if value is None:
                    continue
                key = kind + ":" + value.split("/")[0]
                if key in addrs:
                    raise _FieldError(f"hosts.{name}.{kind}", f"{value} is also used by {addrs[key]}")
                addrs[key] = name
        try:
            check_schedule(self)
        except ScheduleError as err:
            raise _FieldError(err.field, err.message) from None
        if self.cep is not None:
            check_cep(self)
        if not _plan_only(info):
            from testbed.semantics.addressing import AddressError, plan_addresses

            try:
                plan_addresses(self)        # the file's addresses must leave room for the rest
            except AddressError as err:
                raise _FieldError(err.field, err.message) from None
        return self

    def memory_need(self, spark: bool = True) -> int:
        """Bytes a run of this topology needs at its peak (``limits.MemoryModel``)."""
        hosts = set(self.operator_hosts()) | set(self.source_hosts())
        return limits.MEMORY.need(*self.volume(), len(hosts), spark)

    def volume(self) -> tuple[int, int]:
        """Events the sources send, and at most how many copies the operators receive."""
        return sum(s.events for s in self.streams), sum(s.copies() for s in self.streams)

    # -- derived views -------------------------------------------------
    def link_for(self, host: str) -> Link:
        for link in self.links:
            if link.host == host:
                return link
        return Link(host=host)

    def switch_ports(self) -> dict[str, int]:
        """``host -> switch port`` (``testbed.semantics.racks``): 1.. in ``hosts`` order, a rack's hosts sharing one."""
        return racks_.switch_ports(self.hosts, self.rack_of())

    def rack_of(self) -> dict[str, str]:
        return {host: rack for rack, r in self.racks.items() for host in r.hosts}

    def port_count(self) -> int:
        return len(self.hosts) - len(self.rack_of()) + len(self.racks)

    def operator_hosts(self) -> list[str]:
        """Every host that runs, or may come to run, an operator instance: of a
        stream, of a scheduled change, or in an elastic policy's pool."""
        return list(dict.fromkeys(instances_.host_of(op) for op in self.operator_instances()))

    def sink_hosts(self) -> list[str]:
        """Every host that receives complex events (``cep:`` rules' sinks, and those of
        the patterns the schedule installs)."""
        return list(dict.fromkeys(h for rule in self.cep_rules_ever() for h in rule.sinks))

    def cep_rules_ever(self) -> list[ComplexEventRule]:
        """Every pattern the run installs: ``cep:``'s, then the schedule's adds and replaces."""
        if self.cep is None:
            return []
        return list(self.cep.complex_events) + [getattr(e.cep, e.cep.kind) for e in self.schedule
                                                if e.cep is not None and e.cep.kind in ("add", "replace")]

    def cep_timeline(self) -> CepTimeline:
        """The schedule's CEP changes as the run and the references apply them (validated already)."""
        return cep_timeline(self)

    def receiver_hosts(self) -> list[str]:
        """Every host that runs a receiver: operators, then sinks that are none."""
        return list(dict.fromkeys([*self.operator_hosts(), *self.sink_hosts()]))

    def source_hosts(self) -> list[str]:
        return list(dict.fromkeys(s.source for s in self.streams))

    def sends_batches(self) -> bool:
        """Whether some stream sends frames of several events: only then does a
        target that builds batches into a program of its own (bmv2) run that
        build, whose larger header vector every frame pays for (docs/p4.md, "Two builds")."""
        return any(s.sends_batches for s in self.streams)

    def changes_streams(self) -> bool:
        """Whether some stream's spec or operators may change during the run:
        a scheduled ``change``, or a failover or elastic policy.  Only then
        does bmv2 run a build that takes changes, whose boundary check every
        event pays for (docs/p4.md, "A build without changes")."""
        adapt = self.adapt
        return (any(entry.change is not None for entry in self.schedule)
                or (adapt is not None and (adapt.failover or bool(adapt.elastic))))

    @model_validator(mode="before")
    @classmethod
    def _instances_named(cls, data: Any) -> Any:
        """A host that runs several instances, listed as an operator, stands for
        all of them (``testbed.semantics.instances``).  The lists are expanded
        here, before they are validated, so every reader after sees instances."""
        if isinstance(data, dict) and "streams" in data:
            data = {**data, "streams": expand_families(data["streams"])}      # a family's members, written out
        if not isinstance(data, dict) or not isinstance(data.get("hosts"), dict):
            return data
        counts = {h: v["instances"] if isinstance(v, dict) and type(v.get("instances")) is int else 1
                  for h, v in data["hosts"].items()}

        # Thousands of streams share a handful of lists: each is expanded once.
        done: dict[tuple[str, ...], list[str]] = {}

        def expanded(listed: Any, where: str) -> Any:
            if not isinstance(listed, list) or not all(isinstance(op, str) for op in listed):
                return listed          # the field's own validation says what is wrong
            key = tuple(listed)
            if key not in done:
                try:
                    done[key] = instances_.expand(listed, counts)
                except instances_.InstanceError as err:
                    raise _FieldError(where + str(err).split(":")[0], str(err).split(": ", 1)[1]) from None
            return list(done[key])

        data = dict(data)
        if isinstance(data.get("streams"), list):
            data["streams"] = [
                {**s, "operators": expanded(s.get("operators"), f"streams[{i}].operators")}
                if isinstance(s, dict) and "operators" in s else s
                for i, s in enumerate(data["streams"])]
        if isinstance(data.get("schedule"), list):
            data["schedule"] = [
                {**e, "change": {**e["change"], "operators": expanded(e["change"].get("operators"),
                                                                      f"schedule[{i}].change.operators")}}
                if isinstance(e, dict) and isinstance(e.get("change"), dict) and "operators" in e["change"] else e
                for i, e in enumerate(data["schedule"])]
        return data

    def _check_instances(self) -> None:
        """What hosts that run several instances cannot do (yet)."""
        counts = instances_.instance_counts(self.hosts)
        shared = [h for h, k in counts.items() if k > 1]
        if len(shared) > instances_.MAX_SHARED_HOSTS:
            raise _FieldError(f"hosts.{shared[instances_.MAX_SHARED_HOSTS]}.instances",
                              f"at most {instances_.MAX_SHARED_HOSTS} hosts run several instances "
                              f"(each takes a /16 of {instances_.INSTANCE_NETWORKS})")
        total = sum(counts[h] for h in shared) + sum(counts[h] == 1 for h in self.rack_of())  # racked: ids too
        if total > instances_.MAX_SHARED_INSTANCES:
            raise _FieldError("hosts", f"{total} instances on shared or racked hosts, more than the "
                                       f"{instances_.MAX_SHARED_INSTANCES} that 16-bit instance ids leave them")
        for name, h in self.hosts.items():
            if shared and h.ip and ipaddress.ip_address(h.ip.split("/")[0]) in instances_.INSTANCE_NETWORKS:
                raise _FieldError(f"hosts.{name}.ip", f"{h.ip} lies in {instances_.INSTANCE_NETWORKS}, where "
                                                      f"the instances of shared hosts are addressed")
        for i, s in enumerate(self.streams):
            if counts.get(s.source, 1) > 1:
                raise _FieldError(f"streams[{i}].source", f"{s.source!r} runs operator instances; a source "
                                                          f"host runs none")
        if shared and self.adapt is not None:
            raise _FieldError("adapt", f"failover and elastic pools work on whole hosts; host {shared[0]!r} runs "
                                       f"several instances (not supported together yet)")
        for rule in self.cep_rules_ever():
            for sink in rule.sinks:
                if counts.get(sink, 1) > 1:
                    raise _FieldError("cep", f"sink {sink!r} runs several operator instances; a sink runs one")

    def instance_hosts(self) -> dict[str, str]:
        """``operator instance -> host`` for every instance a stream or change names."""
        return {op: instances_.host_of(op) for op in self.operator_instances()}

    def operator_instances(self) -> list[str]:
        """Every operator instance of a stream, of a scheduled change, or in an elastic pool, in that order."""
        seen: dict[str, None] = {}
        for s in self.streams:
            for op in s.operators:
                seen.setdefault(op, None)
        for entry in self.schedule:
            for op in (entry.change.operators or ()) if entry.change else ():
                seen.setdefault(op, None)
        for policy in self.adapt.elastic if self.adapt else ():
            for op in policy.pool:
                seen.setdefault(op, None)
        return list(seen)

    def _check_switch_name(self, field: str) -> None:
        if self.switch.name in self.hosts:
            raise _FieldError(field, f"{self.switch.name!r} is also a host name")
        longest = f"{self.switch.name}-eth{self.port_count()}"
        if len(longest.encode()) > limits.MAX_INTERFACE_NAME:
            raise _FieldError(field, f"with {self.port_count()} ports the switch's interfaces are named like "
                                     f"{longest}, longer than Linux's {limits.MAX_INTERFACE_NAME} bytes; "
                                     f"use a shorter switch name")

    def with_switch_name(self, name: str, source: str = "--switch-name") -> "Topology":
        """This topology with its switch renamed, so that runs on a shared machine
        never meet another's interfaces; ``TopologyError`` when the name cannot be used."""
        try:
            node_name(name, source)
            renamed = self.model_copy(update={"switch": self.switch.model_copy(update={"name": name})})
            renamed._check_switch_name(source)
        except (UnsafeName, _FieldError) as err:
            raise TopologyError(str(err)) from None
        return renamed

    def stream(self, stream_id: int) -> Stream:
        for s in self.streams:
            if s.id == stream_id:
                return s
        raise KeyError(stream_id)


def _few(hosts: dict, most: int, what: str, why: str, info: ValidationInfo) -> dict:
    """``hosts``, or ``ValueError`` when a network would need more than ``most`` of something for them."""
    if len(hosts) > most and not _plan_only(info):
        raise ValueError(f"{len(hosts)} hosts, but {what} {most} {why}")
    return hosts


def describe(err: ValidationError) -> str:
    """``field: message`` for the first error pydantic found, with the field spelt as in the file."""
    return strict.describe(err, NAME_PATTERN)


def _plan_only(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("plan_only"))


def check_cep(topo: "Topology") -> None:
    """The ``cep:`` rules' references to the rest of the file: streams and sink hosts.

    The rules themselves are checked by ``CepRules``.  Both targets run the
    CEP stage in a build of their own, which takes events one per frame, so
    a stream that packs events is refused beside rules (one batched a
    single event to a frame sends plain frames, and runs).  A sink must be no stream's
    source: sources run no receiver.
    """
    assert topo.cep is not None
    streams = {s.id for s in topo.streams}
    sources = {s.source for s in topo.streams}
    for i, s in enumerate(topo.streams):
        if s.sends_batches:
            raise _FieldError(f"streams[{i}].batch", "a topology with cep: rules takes events one per frame "
                                                     "(no switch build has both batches and the CEP stage)")
    for i, w in enumerate(topo.cep.windows):
        if w.stream not in streams:
            raise _FieldError(f"cep.windows[{i}].stream", f"no stream has id {w.stream}")
    rules = [(f"cep.complex_events[{i}]", rule) for i, rule in enumerate(topo.cep.complex_events)]
    rules += [(f"schedule[{i}].cep.{e.cep.kind}", getattr(e.cep, e.cep.kind)) for i, e in enumerate(topo.schedule)
              if e.cep is not None and e.cep.kind in ("add", "replace")]
    for at, rule in rules:
        if rule.stream not in streams:
            raise _FieldError(f"{at}.stream", f"no stream has id {rule.stream}")
        for j, sink in enumerate(rule.sinks):
            if sink not in topo.hosts:
                raise _FieldError(f"{at}.sinks[{j}]", f"unknown host {sink!r}")
            if sink in sources:
                raise _FieldError(f"{at}.sinks[{j}]", f"{sink!r} is a stream's source; a sink records, a source sends")
    try:
        cep_timeline(topo)
    except ScheduleError as err:
        raise _FieldError(err.field, err.message) from None


def check_racks(topo: "Topology", plan_only: bool) -> None:
    """Racks name known hosts, each once, that only receive: a racked host's
    link is a bridge port, and the splitter knows the rack, not the host, by its port."""
    if not topo.racks:
        return
    seen: dict[str, str] = {}
    sources = set(topo.source_hosts())
    sinks = {h for rule in topo.cep_rules_ever() for h in rule.sinks}
    linked = {link.host for link in topo.links}
    for rack, r in topo.racks.items():
        if rack in topo.hosts or rack == topo.switch.name:
            raise _FieldError(f"racks.{rack}", f"{rack!r} is also a {'host' if rack in topo.hosts else 'switch'} "
                                               f"name")
        longest = f"{rack}-eth{len(r.hosts)}"
        if len(longest.encode()) > limits.MAX_INTERFACE_NAME:
            raise _FieldError(f"racks.{rack}", f"with {len(r.hosts)} hosts the rack's interfaces are named "
                                               f"like {longest}, longer than Linux's "
                                               f"{limits.MAX_INTERFACE_NAME} bytes; use a shorter rack name")
        for j, host in enumerate(r.hosts):
            where = f"racks.{rack}.hosts[{j}]"
            if host not in topo.hosts:
                raise _FieldError(where, f"unknown host {host!r}")
            if host in seen:
                raise _FieldError(where, f"host {host!r} is also in rack {seen[host]!r}")
            seen[host] = rack
            if host in sources:
                raise _FieldError(where, f"{host!r} is a stream's source; racked hosts only receive "
                                         f"(a source keeps its own splitter port)")
            if host in sinks:
                raise _FieldError(where, f"{host!r} is a cep sink; sinks keep their own splitter port")
            if host in linked:
                raise _FieldError(where, f"{host!r} has an entry in links:; a racked host's link is a "
                                         f"bridge port and cannot be shaped (not supported yet)")
    if topo.adapt is not None:
        raise _FieldError("adapt", "failover and elastic pools watch whole splitter ports; a rack's port "
                                   "holds several hosts (not supported together yet)")
    if not plan_only and topo.port_count() > limits.MAX_HOSTS:
        raise _FieldError("racks", f"{topo.port_count()} splitter ports (hosts outside racks, and one per "
                                   f"rack), but the switch has {limits.MAX_HOSTS}")


def check_schedule(topo: "Topology") -> None:
    """Raise ``ScheduleError`` for the first entry that does not fit ``topo``.

    Changes are checked in time order against the configuration each one
    replaces, as the controller will apply them (``Stream.check_change``:
    kind and origin fixed, lateness not growing).
    """
    streams = {s.id: s for s in topo.streams}
    operator_hosts = set(topo.hosts) - {s.source for s in topo.streams}
    down: set[str] = set()        # hosts failed and not yet recovered, in time order
    ends = {s.id: last_send(rate_profile(s, topo.schedule), s.events) for s in topo.streams}
    due = nominal_times(topo)
    order = sorted(range(len(topo.schedule)), key=lambda i: due[i])
    for i in order:
        entry = topo.schedule[i]
        where = f"schedule[{i}].{entry.action}"
        if entry.hold == "failover" and (topo.adapt is None or not topo.adapt.failover):
            raise ScheduleError(f"schedule[{i}].hold", "waits for failover, which needs adapt.failover: true")
        target = (entry.change or entry.rate).stream if (entry.change or entry.rate) else None
        if entry.after is not None and target in ends and target != entry.after.stream and due[i] > ends[target]:
            raise ScheduleError(f"schedule[{i}].after", f"due at {due[i]:.3f} s at the streams' pace, after stream "
                                                        f"{target}'s last event at {ends[target]:.3f} s")
        if entry.at is not None and target in ends and entry.at > ends[target]:
            raise ScheduleError(f"schedule[{i}].at", f"{entry.at:g} s is after stream {target}'s last event, due "
                                                     f"at {ends[target]:.3f} s: the {entry.action} could never apply")
        if entry.change is not None:
            c = entry.change
            if c.stream not in streams:
                raise ScheduleError(f"{where}.stream", f"no stream {c.stream}")
            old = streams[c.stream]
            for j, op in enumerate(c.operators or ()):
                if instances_.host_of(op) not in topo.hosts:
                    raise ScheduleError(f"{where}.operators[{j}]", f"unknown host {op!r}")
                if instances_.host_of(op) == old.source:
                    raise ScheduleError(f"{where}.operators[{j}]", f"{op} is the stream's source")
            try:
                window = WindowSpec.model_validate(c.window) if c.window is not None else old.window
            except ValidationError as err:
                raise ScheduleError(f"{where}.window", describe(err)) from None
            new = old.model_copy(update={"window": window, "operators": list(c.operators or old.operators)})
            try:
                old.check_change(new)
            except ValueError as err:      # the field it names (window.kind, ...) is below the change
                field = getattr(err, "field", None)
                raise ScheduleError(f"{where}.{field}" if field else where, getattr(err, "message", str(err))) from None
            streams[c.stream] = new
        elif entry.rate is not None:
            if entry.rate.stream not in streams:
                raise ScheduleError(f"{where}.stream", f"no stream {entry.rate.stream}")
        elif entry.fail is not None:
            if entry.fail.host not in operator_hosts:
                raise ScheduleError(f"{where}.host", f"{entry.fail.host!r} is not an operator host")
            if entry.fail.host in down:
                raise ScheduleError(f"{where}.host", f"{entry.fail.host} has already failed and not recovered")
            down.add(entry.fail.host)
        elif entry.cep is not None:
            if topo.cep is None:
                raise ScheduleError(f"{where}", "the topology has no cep: section: a run with rules to change "
                                                "starts with some (the switch runs its CEP build for them)")
        elif entry.recover is not None:
            if entry.recover.host not in down:
                raise ScheduleError(f"{where}.host", f"{entry.recover.host!r} has not failed before this entry")
            down.discard(entry.recover.host)
    if topo.adapt is not None:
        for i, e in enumerate(topo.adapt.elastic):
            if e.stream not in streams:
                raise ScheduleError(f"adapt.elastic[{i}].stream", f"no stream {e.stream}")
            if streams[e.stream].split == "key":
                raise ScheduleError(f"adapt.elastic[{i}].stream", f"stream {e.stream} is split by key, so its N "
                                                                  f"stays fixed for the run")
            if streams[e.stream].window.starts == EVENT:
                raise ScheduleError(f"adapt.elastic[{i}].stream", f"stream {e.stream}'s windows start at events, "
                                                                  f"so its N stays fixed for the run (the switch "
                                                                  f"keeps one epoch's starts only)")
            for j, host in enumerate(e.pool):
                if host not in topo.hosts or host == streams[e.stream].source:
                    raise ScheduleError(f"adapt.elastic[{i}].pool[{j}]", f"{host!r} cannot be an operator")
        keyed = [s.id for s in topo.streams if s.split == "key"]
        if topo.adapt.failover and keyed:
            raise ScheduleError("adapt.failover", f"stream {keyed[0]} is split by key, and failover would move "
                                                  f"its keys to other operators mid-window")
        at_events = [s.id for s in topo.streams if s.window.starts == EVENT]
        if topo.adapt.failover and at_events:
            raise ScheduleError("adapt.failover", f"stream {at_events[0]}'s windows start at events, and failover "
                                                  f"would change its operators, which such a stream cannot take")


def cep_timeline(topo: "Topology") -> CepTimeline:
    """The schedule's CEP changes in the order the run applies them (its entries' nominal
    order), each with its slot; ``ScheduleError`` for one the switch cannot take."""
    if topo.cep is None:
        return CepTimeline()
    due = nominal_times(topo)
    streams = {s.id: s for s in topo.streams}
    entries = [(i, topo.schedule[i].after.stream, point_events(streams[topo.schedule[i].after.stream],
                                                                topo.schedule[i].after), topo.schedule[i].cep)
               for i in sorted(range(len(topo.schedule)), key=lambda i: due[i]) if topo.schedule[i].cep is not None]
    try:
        return plan_changes(topo.cep, entries)
    except _FieldError as err:
        raise ScheduleError(err.field, err.message) from None


def nominal_times(topo: "Topology") -> dict[int, float]:
    """Each schedule entry's time at the streams' own pace: its ``at``, or when
    its point's event is due.  A run carries the entries out in this order.
    ``ScheduleError`` for a point the stream never reaches."""
    streams = {s.id: s for s in topo.streams}
    due = {}
    for i, entry in enumerate(topo.schedule):
        if entry.after is None:
            due[i] = entry.at
            continue
        point, where = entry.after, f"schedule[{i}].after"
        if point.stream not in streams:
            raise ScheduleError(f"{where}.stream", f"no stream {point.stream}")
        held = streams[point.stream]
        sent = point_events(held, point)
        if sent is None:
            raise ScheduleError(f"{where}.ts", f"stream {held.id} replays a file or a dataset, whose timestamps "
                                              f"validate does not read: place the entry by events")
        if sent >= held.events:
            raise ScheduleError(f"{where}.{'events' if point.events is not None else 'ts'}",
                                f"stream {held.id} sends {held.events} events, and this point is at its "
                                f"{'event ' + str(sent) if point.events is None else 'end'} or later: "
                                f"the {entry.action} could never take effect before the stream ends")
        due[i] = last_send(rate_profile(held, topo.schedule), sent)
    return due


def point_events(stream: "Stream", point: StreamPoint) -> Optional[int]:
    """How many events ``stream``'s source has sent at ``point``: its
    ``events``, or the position of the first event stamped ``ts`` or later,
    counted from 1 (``stream.events + 1`` if there is none).  None for a
    ``ts`` point of a replayed stream, whose timestamps are in its file."""
    if point.events is not None:
        return point.events
    if not stream.generated:
        return None
    t = stream.timestamps
    if point.ts <= t.start:
        return 1
    if t.step == 0:
        return stream.events + 1
    return min(stream.events + 1, -(-(point.ts - t.start) // t.step) + 1)


def parse_topology(data: Any, source: str = "<topology>", plan_only: bool = False) -> Topology:
    """A validated topology, or a one-line ``TopologyError``.  ``plan_only``
    skips what only running it needs (ports, addresses, this machine's
    memory): for sweeps that compute plans and never start a network."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: (top level): expected a mapping, got {type(data).__name__}")
    try:
        topo = Topology.model_validate(data, context={"plan_only": plan_only})
    except ValidationError as err:
        raise TopologyError(f"{source}: {describe(err)}") from None
    except TopologyError as err:
        raise TopologyError(f"{source}: {err}") from None
    topo._plan_only = plan_only
    return topo


def load_topology(path: Union[str, Path]) -> Topology:
    """Read and validate a topology file; every failure is a ``TopologyError``."""
    path = Path(path)
    topo = parse_topology(read_yaml(path, TopologyError), str(path))
    return resolve_replays(topo, path, TopologyError)


def resolve_topology(name_or_path: str, root: Optional[Path] = None) -> Path:
    """A path as given, or a scenario name looked up in ``topologies/``."""
    p = Path(name_or_path)
    problem = why_unreadable(p)
    if problem is None or problem != "no such file" or "/" in name_or_path:
        return p          # read_yaml names any problem with it
    cand = (root or ROOT) / "topologies" / f"{name_or_path}.yaml"
    if why_unreadable(cand) is None:
        return cand
    raise TopologyError(f"{name_or_path}: no such topology file or scenario (looked in topologies/)")
