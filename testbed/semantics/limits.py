"""What the wire, the switch and this machine can carry: the limits a topology is held to.

A topology that passes validation must run without an overflow anywhere on
its way: in the event header, in the P4 program's registers and action
parameters, in the int64 columns of the raw data and on Spark, in Linux's
interface names, and in memory.  The widths and sizes the program gives
its fields and tables are declared here, once: the data plane's contract
(``testbed.dataplane.contract``) and wire format (``testbed.dataplane.wire``)
take them from this module, so a limit and the field it guards cannot drift
apart.
"""
from __future__ import annotations

from dataclasses import dataclass

#: The event header's fields and their widths in bits (p4/headers.p4).
EVENT_FIELD_BITS = {"stream": 16, "flags": 16, "seq": 32, "ts": 64, "key": 64, "value": 64}
#: Registers are indexed by the 16-bit stream id.
N_STREAMS = 1 << EVENT_FIELD_BITS["stream"]
#: bmv2's default port space; v1model drops what is sent to its last port.
N_PORTS = 512
DROP_PORT = N_PORTS - 1
#: Operator instance ids are 16 bits (a multicast replica's rid): testbed.semantics.instances.
N_INSTANCES = 1 << 16
#: Entries each table holds (``*_TABLE_SIZE`` in p4/constants.p4).
TABLE_SIZES = {"window_spec": 2 * N_STREAMS, "operator_count": 2 * N_STREAMS, "previous_spec": N_STREAMS,
               "unicast": 1 << 18, "multicast": 1 << 18, "handover": 65536, "egress_rewrite": N_INSTANCES,
               "operator_position": 1 << 18, "previous_position": 1 << 18,
               "operator_back": 1 << 20}
#: Back in the window's place (bits 64..127) and the span's (32..63) of a
#: Windows header half (p4/headers.p4) at once: operator_back's
#: ``windows_back`` is back times this.
WINDOWS_BACK_UNIT = (1 << 64) | (1 << 32)
#: Widths of the action parameters the limits below guard (p4/ingress actions).
WINDOWS_PER_EVENT_BITS = 32      # set_count_window's full and cap
GROUP_ID_BITS = 16               # to_group's mgid

#: Stream ids are the event header's 16-bit ``stream`` field.
MAX_STREAM_ID = (1 << EVENT_FIELD_BITS["stream"]) - 1
#: A stream's events are numbered by the 32-bit ``seq`` field: 0 .. 2^32 - 1.
MAX_EVENTS = 1 << EVENT_FIELD_BITS["seq"]
#: Timestamps, window sizes, slides and origins are 64 bits unsigned on the
#: wire and in the registers, but int64 in the raw data and on Spark, so the
#: narrower of the two holds.
MAX_INT64 = (1 << 63) - 1
#: ``full`` and ``cap`` (windows per event) are 32-bit action parameters.
MAX_WINDOWS_PER_EVENT = (1 << WINDOWS_PER_EVENT_BITS) - 1
#: The most events one frame carries (a batch, docs/wire.md): the P4
#: parser's header stack has this many elements.
MAX_BATCH = 16
#: Multicast group ids are 16 bits, and group 0 means "no group".
MAX_GROUPS = (1 << GROUP_ID_BITS) - 1
#: Host k is on switch port k, from 1 up to the port before v1model's drop port.
MAX_HOSTS = DROP_PORT - 1
#: A Linux bridge has at most 1,024 ports (BR_MAX_PORTS); a rack's uplink takes one.
MAX_RACK_HOSTS = 1023
#: Hosts the address plan can give addresses beside the splitter: a /16
#: less its network, broadcast and splitter addresses (``addressing.subnet``).
MAX_RACKED_HOSTS = (1 << 16) - 3
#: Table capacities, for the plan's entry counts.
TABLE_CAPACITY = TABLE_SIZES
#: Linux refuses interface names longer than this (IFNAMSIZ - 1).
MAX_INTERFACE_NAME = 15
#: Mininet's TCLink ignores (with a warning only) a bandwidth outside 0..1000 Mbit/s.
MAX_BW_MBIT = 1000.0
#: A source's pace, events per second.  One source process sends a few ten
#: thousand frames a second here; the bound keeps a typo (1e18) from
#: sizing a send schedule that no machine holds.  Below the minimum a
#: stream of even two events takes over a quarter of an hour between them.
MAX_RATE = 10_000_000.0
MIN_RATE = 0.001
#: A Zipf exponent above this puts all but a vanishing share of the events
#: on key 0; the bound keeps the sampler's arithmetic in double range.
MAX_ZIPF_S = 50.0
#: Schedule times and ramps, seconds: a week is longer than any run.  The
#: elastic policy's period and cool-down are held to it too: a thread waits
#: that long, and a wait past the platform's clock range kills the thread.
MAX_SCHEDULE_S = 7 * 24 * 3600.0
#: How long a run may stream before it gives up (``--timeout``), and how long
#: a window may stay unchanged before it leaves incomplete (``--window-timeout``),
#: seconds: beyond these a typo, and beyond the clock range of a thread's wait.
MAX_RUN_TIMEOUT_S = 1e9
MAX_WINDOW_TIMEOUT_S = 1e6
#: How often an operator host sends a heartbeat (seconds).  Declared here so
#: that validation can hold ``adapt.detect_timeout`` to it (a shorter silence
#: is seen between any two heartbeats, and failover never settles);
#: ``testbed.dataplane.liveness`` and the host programs take it from here.
HEARTBEAT_INTERVAL_S = 0.05
#: A topology file larger than this is refused before it is parsed; the
#: 1,000-stream scale topology is about 200 kB.
MAX_FILE_BYTES = 16 << 20
#: YAML aliases can make a small file expand into a huge document; more
#: nodes than this (counting each expansion) is refused.
MAX_YAML_NODES = 1_000_000
#: Levels a YAML document may nest (a topology needs 6).  Deeper documents
#: would reach Python's recursion limit in the parser, in pydantic or in
#: json.dumps, whichever came first; a run record nests no deeper (rundir.record.MAX_DEPTH).
MAX_YAML_DEPTH = 64
#: A replay file's columns, and a CSV header line's bytes: a stream reads at
#: most three columns, and every column of a CSV is parsed (to refuse ragged
#: rows), so a file far wider than any data set is refused before it is read.
MAX_REPLAY_COLUMNS = 1024
MAX_CSV_HEADER_BYTES = 64 << 10


@dataclass(frozen=True)
class MemoryModel:
    """What a run holds in memory at its peak, from what it sends and where.

    Every source and receiver host runs a Python process with pyarrow; the
    run itself and the switch are two more.  Per event, the source keeps
    its frame and send time and the run its event tables; per delivered
    copy, the run checks a set of (event, operator) pairs and the receivers
    hold their columns.  Spark's driver takes its configured heap.  The
    figures are the proportional set sizes ``make bench`` measured on its
    scale runs (64 operator hosts: 5.9 GiB), with room to spare; the bench
    records this estimate beside each measured peak.
    """

    per_event: int = 400             # bytes: source frames and send times, the run's event tables
    per_copy: int = 300              # bytes: oracle pairs, delivery tables, receiver columns
    per_host: int = 96 << 20         # a source or receiver process with pyarrow loaded
    base: int = 384 << 20            # the run's own process and the switch's
    spark: int = 2560 << 20          # the driver's 2 GiB heap and the JVM around it

    def need(self, events: int, copies: int, hosts: int, spark: bool = True) -> int:
        return (self.base + events * self.per_event + copies * self.per_copy + hosts * self.per_host
                + (self.spark if spark else 0))


MEMORY = MemoryModel()


def available_memory() -> int:
    """Bytes this machine can give a run now (``MemAvailable``)."""
    import psutil

    return int(psutil.virtual_memory().available)
