"""Every input the CLI reads: a bad one gets one line naming the file and field, and exit 2.

Topology files, replay files, experiment files and run directories, each
fed through the real command (click's test runner, in process).  Each case
names what must appear after the file name.
"""
from __future__ import annotations

import copy
import json
import os

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from support import topologies
from support.records import record_of
from testbed.cli import main
from testbed.rundir import RunDir, write_json_atomic
from testbed.semantics.addressing import plan_addresses, subnet
from testbed.semantics.topology import TopologyError

GOOD = {
    "name": "t", "hosts": {"h1": {}, "h2": {}, "h3": {}},
    "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 3, "slide": 1},
                 "operators": ["h2", "h3"], "events": 10, "rate": 100}],
}


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_refused(result, file, field: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr naming the file, then ``field``."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert result.stdout == ""
    line = result.stderr.rstrip("\n")
    assert "\n" not in line, line
    assert line.startswith(f"error: {file}"), line
    assert field in line, line


def with_(path: tuple, value):
    """GOOD with the value at ``path`` replaced (``KeyError`` deletes it)."""
    return topologies.edited(GOOD, path, value)


def stream_with(**fields):
    return with_(("streams", 0), {**GOOD["streams"][0], **fields})


def hosts(n: int, switch: str = "s1"):
    data = copy.deepcopy(GOOD)
    data["hosts"] = {f"h{i}": {} for i in range(1, n + 1)}
    data["switch"] = {"name": switch}
    return data


def own_order(ops: list[str], i: int) -> list[str]:
    """The ``i``-th of distinct orders of ``ops`` (a rotation, then the first swapped with a later one)."""
    turn, swap = i % len(ops), i // len(ops)
    out = ops[turn:] + ops[:turn]
    if swap:
        out[0], out[swap + 1] = out[swap + 1], out[0]
    return out


def many_operators(streams: int, operators: int):
    """A plan with ``streams * operators`` unicast entries: each stream deals
    its windows over its own order of the operators, so no two share an
    operator set (docs/p4.md)."""
    ops = [f"o{i}" for i in range(operators)]
    return {"name": "t", "hosts": {"src": {}} | {o: {} for o in ops},
            "streams": [topologies.stream(i, {"kind": "count", "size": 1, "slide": 1}, own_order(ops, i),
                                          source="src") for i in range(streams)]}


# ---------------------------------------------------------------------------
# topology files: (id, contents, what the message must name)
# ---------------------------------------------------------------------------
RAW = {   # files that are not YAML mappings at all
    "not-utf8": (b"name: t\n\xff\xfe\n", "not UTF-8"),
    "utf16": ("name: t\n".encode("utf-16"), "not UTF-8"),
    "empty": (b"", "(top level): expected a mapping, got NoneType"),
    "list": (b"- 1\n- 2\n", "(top level): expected a mapping, got list"),
    "scalar": (b"42\n", "(top level): expected a mapping"),
    "yaml-syntax": (b"streams: [unclosed\n", "not valid YAML"),
    "tab-indent": (b"name: t\n\thosts: {}\n", "not valid YAML"),
    "python-tag": (b"name: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
    "deep-nesting": (b"a: " + b"[" * 20000 + b"]" * 20000 + b"\n", "nested more than 64 deep"),
    "alias-bomb": (b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                   + b"".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n".encode()
                              for p, c in zip("abcdefg", "bcdefgh")), "YAML nodes"),
    "control-char": (b"name: \"t\x07\"\n", "not valid YAML"),
    "duplicate-key": (yaml.safe_dump(GOOD, sort_keys=False).encode() + b"streams: []\n",
                      "key 'streams' given twice in one mapping (first on line 6)"),
    "int-4301-digits": (b"name: t\nseed: " + b"9" * 4301 + b"\n", "an integer of 4301 digits"),
    "size-yes": (yaml.safe_dump(GOOD, sort_keys=False).replace("size: 3", "size: yes").encode(),
                 "streams[0].window.size: Input should be a valid integer"),
}

SEMANTIC = {   # YAML mappings that validation must refuse
    "ts-start-2^64": (stream_with(timestamps={"start": 2**64}), "streams[0].timestamps.start"),
    "ts-arithmetic": (stream_with(timestamps={"start": 2**62, "step": 2**61}), "streams[0].timestamps"),
    "ts-step-negative": (stream_with(timestamps={"step": -1}), "streams[0].timestamps.step"),
    "ts-not-int": (stream_with(timestamps={"start": "soon"}), "streams[0].timestamps.start"),
    "rate-inf": (stream_with(rate=float("inf")), "streams[0].rate"),
    "rate-nan": (stream_with(rate=float("nan")), "streams[0].rate"),
    "rate-zero": (stream_with(rate=0), "streams[0].rate"),
    "rate-negative": (stream_with(rate=-5), "streams[0].rate"),
    "rate-text": (stream_with(rate="fast"), "streams[0].rate"),
    "cap-32bit": (stream_with(window={"kind": "count", "size": 2**40, "slide": 1}), "streams[0].window"),
    "size-int64": (stream_with(window={"kind": "time", "size": 2**63, "slide": 2**62}), "streams[0].window.size"),
    "slide-zero": (stream_with(window={"kind": "count", "size": 3, "slide": 0}), "streams[0].window.slide"),
    "origin-int64": (stream_with(window={"kind": "time", "size": 3, "slide": 1, "origin": 2**63}),
                     "streams[0].window.origin"),
    "origin-count": (stream_with(window={"kind": "count", "size": 3, "slide": 1, "origin": 0}),
                     "streams[0].window"),
    "kind-session": (stream_with(window={"kind": "session", "size": 3, "slide": 1}), "streams[0].window.kind"),
    "window-list": (stream_with(window=[3, 1]), "streams[0].window"),
    "events-seq-32bit": (stream_with(events=2**32 + 1), "streams[0].events"),
    "events-zero": (stream_with(events=0), "streams[0].events"),
    "events-fraction": (stream_with(events=1.5), "streams[0].events"),
    "events-inf": (stream_with(events=float("inf")), "streams[0].events"),
    "id-16bit": (stream_with(id=65536), "streams[0].id"),
    "id-negative": (stream_with(id=-1), "streams[0].id"),
    "id-duplicate": (with_(("streams",), GOOD["streams"] * 2), "streams[1].id"),
    "source-unknown": (stream_with(source="h9"), "streams[0].source"),
    "operator-unknown": (stream_with(operators=["h2", "h9"]), "streams[0].operators[1]"),
    "operator-is-source": (stream_with(operators=["h1", "h2"]), "streams[0].operators[0]"),
    "operator-twice": (stream_with(operators=["h2", "h2"]), "streams[0].operators"),
    "operators-empty": (stream_with(operators=[]), "streams[0].operators"),
    "operators-string": (stream_with(operators="h2"), "streams[0].operators"),
    "query-unknown": (stream_with(query={"kind": "median"}), "streams[0].query.kind"),
    "stream-unknown-field": (stream_with(speed=3), "streams[0].speed"),
    "streams-empty": (with_(("streams",), []), "streams"),
    "streams-missing": (with_(("streams",), KeyError), "streams"),
    "hosts-511": (hosts(511), "hosts"),
    "hosts-one": (with_(("hosts",), {"h1": {}}), "hosts"),
    "hosts-list": (with_(("hosts",), ["h1", "h2"]), "hosts"),
    "host-name-bad": (with_(("hosts",), {"H-1": {}, "h2": {}}), "hosts.H-1"),
    "host-name-long": (with_(("hosts",), {"abcdefghijk": {}, "h2": {}}), "hosts.abcdefghijk"),
    "mac-multicast": (with_(("hosts", "h2"), {"mac": "01:00:5e:00:00:01"}), "hosts.h2.mac"),
    "mac-broadcast": (with_(("hosts", "h2"), {"mac": "ff:ff:ff:ff:ff:ff"}), "hosts.h2.mac"),
    "mac-zero": (with_(("hosts", "h2"), {"mac": "00:00:00:00:00:00"}), "hosts.h2.mac"),
    "mac-splitter": (with_(("hosts", "h2"), {"mac": "02:00:00:00:00:fe"}), "hosts.h2.mac"),
    "mac-upper": (with_(("hosts", "h2"), {"mac": "02:00:00:00:00:AA"}), "hosts.h2.mac"),
    "mac-short": (with_(("hosts", "h2"), {"mac": "02:00:00:00:aa"}), "hosts.h2.mac"),
    "mac-duplicate": (with_(("hosts",), {"h1": {"mac": "02:00:00:00:00:aa"}, "h2": {"mac": "02:00:00:00:00:aa"},
                                         "h3": {}}), "hosts.h2.mac"),
    "mac-auto-taken": (with_(("hosts",), {"h1": {"mac": "02:00:00:00:00:02"}, "h2": {}, "h3": {}}),
                       "hosts.h2.mac"),
    "ip-splitter": (with_(("hosts", "h2"), {"ip": "10.0.0.254"}), "hosts.h2.ip"),
    "ip-multicast": (with_(("hosts", "h2"), {"ip": "224.0.0.1"}), "hosts.h2.ip"),
    "ip-loopback": (with_(("hosts", "h2"), {"ip": "127.0.0.1"}), "hosts.h2.ip"),
    "ip-broadcast-all": (with_(("hosts", "h2"), {"ip": "255.255.255.255"}), "hosts.h2.ip"),
    "ip-unspecified": (with_(("hosts", "h2"), {"ip": "0.0.0.0"}), "hosts.h2.ip"),
    "ip-v6": (with_(("hosts", "h2"), {"ip": "fe80::1"}), "hosts.h2.ip"),
    "ip-garbage": (with_(("hosts", "h2"), {"ip": "ten.zero"}), "hosts.h2.ip"),
    "ip-network": (with_(("hosts", "h2"), {"ip": "10.0.0.0"}), "hosts.h2.ip"),
    "ip-broadcast": (with_(("hosts", "h2"), {"ip": "10.0.0.255"}), "hosts.h2.ip"),
    "ip-duplicate": (with_(("hosts",), {"h1": {"ip": "10.0.0.9"}, "h2": {"ip": "10.0.0.9"}, "h3": {}}),
                     "hosts.h2.ip"),
    "host-unknown-field": (with_(("hosts", "h2"), {"ipv4": "10.0.0.2"}), "hosts.h2.ipv4"),
    "link-bw-tclink": (with_(("links",), [{"host": "h2", "bw": 5000}]), "links[0].bw"),
    "link-bw-inf": (with_(("links",), [{"host": "h2", "bw": float("inf")}]), "links[0].bw"),
    "link-loss": (with_(("links",), [{"host": "h2", "loss": 150}]), "links[0].loss"),
    "link-delay": (with_(("links",), [{"host": "h2", "delay": "fast"}]), "links[0].delay"),
    "link-unknown-host": (with_(("links",), [{"host": "h9"}]), "links[0].host"),
    "link-twice": (with_(("links",), [{"host": "h2"}, {"host": "h2"}]), "links[0].host"),
    "switch-name-interfaces": (hosts(10, "abcdefghij"), "switch.name"),
    "switch-is-host": (with_(("switch",), {"name": "h1"}), "switch.name"),
    "switch-target": (with_(("switch",), {"name": "s1", "target": "tofino"}), "switch.target"),
    "seed-negative": (with_(("seed",), -1), "seed"),
    "seed-2^64": (with_(("seed",), 2**64), "seed"),
    "name-newline": (with_(("name",), "a\nb"), "name"),
    "name-missing": (with_(("name",), KeyError), "name"),
    "top-unknown-field": (with_(("colour",), "blue"), "colour"),
    "plan-unicast-table": (many_operators(1000, 263), "streams: the plan needs 263000 entries in table unicast"),
    "id-true": (stream_with(id=True), "streams[0].id: true is a boolean, not an integer"),
    "size-true": (stream_with(window={"kind": "count", "size": True, "slide": 1}), "streams[0].window.size: true"),
    "operator-false": (stream_with(operators=["h2", False]), "streams[0].operators[1]: false is a boolean"),
    "rate-1e18": (stream_with(rate=1e18), "streams[0].rate"),
    "rate-1e-300": (stream_with(rate=1e-300), "streams[0].rate"),
    "disorder-past-int64": (stream_with(perturb={"disorder": {"fraction": 0.1, "max_delay": 2**63 - 1}}),
                            "streams[0].perturb.disorder.max_delay: the last timestamp 9 plus"),
    "loss-everything": (stream_with(perturb={"loss": 1.0}), "streams[0].perturb.loss"),
    "pool-twice": (with_(("adapt",), {"elastic": [{"stream": 1, "pool": ["h2", "h2", "h3"], "high": 100,
                                                   "low": 10}]}), "adapt.elastic[0].pool: hosts listed twice: h2"),
    "schedule-after-the-end": (with_(("schedule",), [{"at": 5, "change": {"stream": 1, "operators": ["h3"]}}]),
                               "schedule[0].at: 5 s is after stream 1's last event"),
}


def write(tmp_path, contents) -> str:
    path = tmp_path / "topo.yaml"
    path.write_bytes(contents if isinstance(contents, bytes) else yaml.safe_dump(contents).encode())
    return str(path)


@pytest.mark.parametrize("case", sorted(RAW))
def test_topology_file_that_is_not_a_mapping(tmp_path, case):
    contents, field = RAW[case]
    path = write(tmp_path, contents)
    assert_refused(cli("validate", path), path, field)


@pytest.mark.parametrize("case", sorted(SEMANTIC))
def test_topology_beyond_what_can_run(tmp_path, case):
    contents, field = SEMANTIC[case]
    path = write(tmp_path, contents)
    assert_refused(cli("validate", path), f"{path}: {field}", "")


def test_validate_does_not_ask_this_machine(tmp_path):
    """2^32 events fit the file's limits; whether they fit this machine's memory
    is the run's preflight (tests/unit/test_run_phases.py), not validation's."""
    path = write(tmp_path, stream_with(events=2**32))
    result = cli("validate", path)
    assert result.exit_code == 0, result.output


def test_topology_path_that_is_not_a_file(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)                      # reading it would block forever
    assert_refused(cli("validate", str(fifo)), fifo, "not a file")
    assert_refused(cli("plan", str(tmp_path)), tmp_path, "not a file")
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(17 << 20)             # sparse: the size alone refuses it
    assert_refused(cli("validate", str(big)), big, "bytes, more than")


def test_paths_too_long_for_the_file_system(tmp_path):
    """A name over 255 bytes is one line, whichever argument or field holds it."""
    long_name = "a" * 300
    result = cli("validate", str(tmp_path / f"{long_name}.yaml"))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: /") and result.stderr.endswith("a.yaml: cannot read: name too long\n")
    path = write(tmp_path, stream_with(replay={"path": f"{long_name}.csv", "ts": "t", "value": "v"}))
    assert_refused(cli("validate", path), f"{path}: streams[0].replay.path", "name too long")


def test_words_yaml_1_1_took_for_booleans_are_names(tmp_path):
    """YAML 1.2 booleans only: a host called ``on`` is a host, not ``True``."""
    text = yaml.safe_dump(GOOD, sort_keys=False).replace("h3", "on")
    path = tmp_path / "on.yaml"
    path.write_text(text)
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.stderr
    assert "ok (3 hosts, 1 streams)" in result.stdout


def test_topology_at_the_limits_is_accepted(tmp_path):
    """What the wire and the switch can carry passes, including hosts past the /24."""
    data = hosts(510)
    data["streams"] = [topologies.stream(65535, {"kind": "time", "size": 2**62, "slide": 2**31}, ["h2"],
                                         events=3, timestamps={"start": 2**63 - 3, "step": 1})]
    path = write(tmp_path, data)
    res = cli("validate", path)
    assert res.exit_code == 0, res.stderr
    topo = topologies.parse_topology(data)
    addresses = plan_addresses(topo)
    assert str(subnet(topo)) == "10.0.0.0/22"
    ips = [ip for ip, _ in addresses.values()]
    assert len(set(ips)) == 510 and "10.0.0.254" not in ips and "10.0.3.255" not in ips
    assert len({mac for _, mac in addresses.values()}) == 510
    assert addresses["h1"] == ("10.0.0.1", "02:00:00:00:00:01")
    # hosts without anything after their name are hosts with defaults
    assert topologies.parse_topology(with_(("hosts", "h2"), None)).hosts["h2"].ip is None


def test_plan_only_topology_addresses_hosts_beyond_one_switch():
    """A plan no network carries takes its addresses from 10/8 (the resource sweep's N = 1,024);
    a topology to run still stops at the switch's ports."""
    data = hosts(1100)
    data["streams"] = [topologies.stream(1, {"kind": "count", "size": 4, "slide": 4}, ["h2"], events=1)]
    topo = topologies.parse_topology(data, plan_only=True)
    addresses = plan_addresses(topo)
    assert str(subnet(topo)) == "10.0.0.0/8"
    ips = [ip for ip, _ in addresses.values()]
    assert len(set(ips)) == 1100 and "10.0.0.254" not in ips
    assert addresses["h1"] == ("10.0.0.1", "02:00:00:00:00:01")
    with pytest.raises(TopologyError, match="hosts: 1100 hosts, but the switch has ports"):
        topologies.parse_topology(data)


# ---------------------------------------------------------------------------
# replay files
# ---------------------------------------------------------------------------
REPLAY = {   # file name -> (contents, field of the message, what it says)
    "text.csv": ("time,price\n0,1\nabc,2\n", "replay.ts", "line 3"),
    "empty-cell.csv": ("time,price\n0,1\n,2\n", "replay.ts", "line 3"),
    "fraction.csv": ("time,price\n0,1\n1.5,2\n", "replay.ts", "not an integer"),
    "negative.csv": ("time,price\n0,1\n-4,2\n", "replay.ts", "negative timestamp"),
    "huge.csv": ("time,price\n0,1e30\n1,2\n", "replay.value", "64-bit"),
    "inf.csv": ("time,price\n0,inf\n1,2\n", "replay.value", "finite"),
    "value-text.csv": ("time,price\n0,1\n1,cheap\n", "replay.value", "line 3"),
    "short.csv": ("time,price\n0,1\n", "replay.path", "fewer than"),
    "ragged.csv": ("time,price\n0,1\n1,2,3,4\n2,3\n", "replay.path", "cannot read"),
    "empty.csv": ("", "replay.path", "cannot read"),
    "not-utf8.csv": (b"time,price\n0,\xff\n1,2\n", "replay.path", "cannot read"),
    "no-column.csv": ("t,price\n0,1\n1,2\n", "replay.ts", "no column 'time'"),
    "corrupt.parquet": (b"PAR1 certainly not parquet", "replay.path", "cannot read"),
    "strings.parquet": (pd.DataFrame({"time": ["a", "b"], "price": [1, 2]}), "replay.ts", "row 0"),
    "nulls.parquet": (pd.DataFrame({"time": [0, None], "price": [1.0, 2.0]}), "replay.ts", "row 1"),
    "bools.parquet": (pd.DataFrame({"time": [0, 1], "price": [True, False]}), "replay.value", "not numeric"),
    "data.txt": ("time,price\n0,1\n1,2\n", "replay.path", "must be .csv or .parquet"),
    "wide.csv": ("time,price," + ",".join(f"c{i}" for i in range(2000)) + "\n0,1\n1,2\n", "replay.path",
                 "wide.csv has 2002 columns, more than 1024"),
    "long-header.csv": ("time,price," + "x" * (1 << 20) + "\n0,1,2\n1,2,3\n", "replay.path",
                        "long-header.csv's header line is longer than 65536 bytes"),
    "wide.parquet": (pd.DataFrame({"time": [0, 1], "price": [1, 2]} | {f"c{i}": [0, 0] for i in range(1100)}),
                     "replay.path", "wide.parquet has 1102 columns, more than 1024"),
}


@pytest.mark.parametrize("name", sorted(REPLAY))
def test_replay_file_that_cannot_be_sent(tmp_path, name):
    contents, field, says = REPLAY[name]
    file = tmp_path / name
    if isinstance(contents, pd.DataFrame):
        contents.to_parquet(file)
    else:
        file.write_bytes(contents if isinstance(contents, bytes) else contents.encode())
    path = write(tmp_path, stream_with(events=2, replay={"path": name, "ts": "time", "value": "price"}))
    res = cli("validate", path)
    assert_refused(res, f"{path}: streams[0].{field}", says)


def test_replay_file_missing(tmp_path):
    path = write(tmp_path, stream_with(replay={"path": "nowhere.csv", "ts": "t", "value": "v"}))
    assert_refused(cli("plan", path), f"{path}: streams[0].replay.path", "no such file")


def test_replay_path_that_is_not_a_file(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "loop.csv").symlink_to("loop.csv")
    for name, says in (("folder", "a directory, not a file"), ("loop.csv", "a symlink loop")):
        path = write(tmp_path, stream_with(replay={"path": name, "ts": "t", "value": "v"}))
        assert_refused(cli("validate", path), f"{path}: streams[0].replay.path", says)


def test_replay_parquet_with_decimal_timestamps_is_read_as_integers(tmp_path):
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({"t": pa.array([decimal.Decimal(i) for i in range(10)], pa.decimal128(10, 0)),
                      "v": pa.array([decimal.Decimal(i) / 4 for i in range(10)], pa.decimal128(10, 2))})
    pq.write_table(table, tmp_path / "dec.parquet")
    path = write(tmp_path, stream_with(replay={"path": "dec.parquet", "ts": "t", "value": "v"}))
    result = cli("validate", path)
    assert result.exit_code == 0, result.stderr
    from pathlib import Path

    from testbed.semantics.replay import read_replay
    data = read_replay(Path(tmp_path / "dec.parquet"), "t", "v", None, 10)
    assert data["ts"].tolist() == list(range(10))
    assert data["value"].tolist() == [round(i / 4) for i in range(10)]     # values are whole, as for CSV


# ---------------------------------------------------------------------------
# experiment files
# ---------------------------------------------------------------------------
EXPERIMENTS = {
    "not-utf8": (b"name: e\nkind: scenarios\nparams: {runs: [\xff]}\n", "not UTF-8"),
    "not-yaml": (b"name: e\nparams: {runs: [cbsw1\n", "not valid YAML"),
    "list": (b"[cbsw1]\n", "(top level)"),
    "unknown-field": (b"name: e\nkind: scenarios\nparams: {runs: [cbsw1]}\ncolour: red\n", "colour: unknown field"),
    "unknown-kind": (b"name: e\nkind: pie\nparams: {runs: [cbsw1]}\n", "kind: unknown kind 'pie'"),
    "no-runs": (b"name: e\nkind: scenarios\nparams: {runs: []}\n", "params.runs"),
    "twice": (b"name: e\nkind: scenarios\nparams: {runs: [cbsw1, cbsw1]}\n",
              "params.runs: scenarios listed twice: cbsw1"),
    "unknown-scenario": (b"name: e\nkind: scenarios\nparams: {runs: [cbsw1, nosuch]}\n", "params.runs: [1]: nosuch"),
    "figure": (b"name: e\nkind: scenarios\nparams: {runs: [cbsw1], figure: pie}\n", "params.figure"),
    "name": (b"name: E-1\nkind: scenarios\nparams: {runs: [cbsw1]}\n", "name"),
    "no-kind": (b"name: e\nparams: {runs: [cbsw1]}\n", "kind: Field required"),
    "seconds-inf": (b"name: e\nkind: rates\nparams: {seconds: .inf}\n", "params.seconds: must be a finite number"),
    "seconds-true": (b"name: e\nkind: rates\nparams: {seconds: true}\n", "params.seconds: true is a boolean"),
    "fraction-negative": (b"name: e\nkind: rates\nparams: {fractions: [-1]}\n", "params.fractions[0]"),
    "latency-rate-inf": (b"name: e\nkind: latency\nparams: {rate: .inf}\n", "params.rate: must be a finite"),
    "n-sweep-1e9": (b"name: e\nkind: resources\nparams: {n_sweep: [1000000000]}\n", "params.n_sweep[0]"),
    "run-name-too-long": (b"name: e\nkind: scenarios\nparams: {runs: [" + b"a" * 300 + b"]}\n",
                          "cannot name a file or folder"),
}


@pytest.mark.parametrize("case", sorted(EXPERIMENTS))
def test_experiment_file(tmp_path, case):
    contents, field = EXPERIMENTS[case]
    folder = tmp_path / "experiments"
    folder.mkdir()
    path = folder / "e.yaml"
    path.write_bytes(contents)
    assert_refused(cli("experiment", str(path)), path, field)


# ---------------------------------------------------------------------------
# run directories given to check and plot
# ---------------------------------------------------------------------------
def finished_run(tmp_path) -> RunDir:
    """A run directory as a lossless run leaves it (deliveries from the oracle)."""
    topo = topologies.build([topologies.stream(3, {"kind": "count", "size": 3, "slide": 1}, ["h2", "h3"],
                                               events=30)], 3)
    rundir = RunDir(tmp_path / "run").create()
    s = topo.streams[0]
    sent = pd.DataFrame({"stream": 3, "seq": range(30), "ts": range(30), "key": 0, "value": 0,
                         "send_ns": range(30)})
    oracle = s.oracle()
    got = [{"stream": 3, "seq": k, "ts": k, "key": 0, "value": 0, "recv_ns": k, "operator": op}
           for k in range(30) for op in oracle.step(k, k).operators]
    sent.to_parquet(rundir.sources)
    pd.DataFrame(got).to_parquet(rundir.deliveries)
    rundir.write_record(record_of({"3": s.record()}, name="t"))
    return rundir


def damage(rundir: RunDir, what: str) -> None:
    record = json.loads(rundir.record.read_text())
    if what == "no-record":
        rundir.record.unlink()
    elif what == "record-not-json":
        rundir.record.write_text("{not json")
    elif what == "record-not-utf8":
        rundir.record.write_bytes(b'{"name": "\xff"}')
    elif what == "record-list":
        rundir.record.write_text("[]")
    elif what == "record-no-streams":
        del record["streams"]
        write_json_atomic(rundir.record, record)
    elif what == "record-bad-stream":
        record["streams"]["3"]["window"]["size"] = 0
        write_json_atomic(rundir.record, record)
    elif what == "record-other-stream":
        write_json_atomic(rundir.record, {**record, "streams": {"7": record["streams"]["3"]}})
    elif what == "link-loop":
        rundir.root.rename(rundir.root.with_name("gone"))
        rundir.root.symlink_to(rundir.root)
    elif what == "record-unknown-key":
        write_json_atomic(rundir.record, {**record, "colour": "blue"})
    elif what == "record-wrong-type":
        write_json_atomic(rundir.record, {**record, "changes": ["not", "a", "mapping"]})
    elif what == "record-switch-wrong-type":
        write_json_atomic(rundir.record, {**record, "switch": [1]})
    elif what == "record-streams-list":
        write_json_atomic(rundir.record, {**record, "streams": list(record["streams"].values())})
    elif what == "record-nested-deep":
        rundir.record.write_text(json.dumps(record)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif what == "no-sources":
        rundir.sources.unlink()
    elif what == "corrupt-deliveries":
        rundir.deliveries.write_bytes(b"PAR1 garbage")
    elif what == "deliveries-no-operator":
        pd.read_parquet(rundir.deliveries).drop(columns=["operator"]).to_parquet(rundir.deliveries)
    elif what == "windows-without-reference":
        pd.DataFrame({"stream": [3], "window": [0], "operator": ["h2"], "key": [0], "result": [1.0],
                      "n_events": [1]}).to_parquet(rundir.windows)
    else:
        raise ValueError(what)


RUN_DAMAGE = {"no-record": "run.json: missing", "record-not-json": "run.json: not valid JSON",
              "record-not-utf8": "run.json: not valid JSON", "record-list": "run.json: (top level)",
              "record-no-streams": "run.json: streams: missing",
              "record-bad-stream": "run.json: streams.3.window.size",
              "record-unknown-key": "run.json: colour: unknown key",
              "record-other-stream": "sources.parquet: stream 3 is not among run.json's streams (7)",
              "link-loop": "a link that leads nowhere, or in a loop", "record-wrong-type": "run.json: changes",
              "record-nested-deep": "run.json: nested more than",
              "record-switch-wrong-type": "run.json: switch: Input should be a valid dictionary",
              "record-streams-list": "run.json: streams: Input should be a valid dictionary",
              "no-sources": "sources.parquet: missing", "corrupt-deliveries": "deliveries.parquet: not a readable",
              "deliveries-no-operator": "deliveries.parquet: no column 'operator'",
              "windows-without-reference": "windows_reference.parquet: missing"}


@pytest.mark.parametrize("command", ["check", "plot"])
@pytest.mark.parametrize("what", sorted(RUN_DAMAGE))
def test_damaged_run_directory(tmp_path, command, what):
    rundir = finished_run(tmp_path)
    assert cli("check", str(rundir.root)).exit_code == 0      # intact, it checks
    damage(rundir, what)
    if command == "plot" and what == "windows-without-reference":
        return                                                # plot does not read windows
    assert_refused(cli(command, str(rundir.root)), rundir.root, RUN_DAMAGE[what])


def test_run_directory_that_is_not_one(tmp_path):
    for command in ("check", "plot"):
        assert_refused(cli(command, str(tmp_path / "nowhere")), tmp_path / "nowhere", "no such run directory")
        assert_refused(cli(command, str(tmp_path)), tmp_path, "run.json: missing")


@pytest.mark.parametrize("what", ["no-sources", "record-streams-list", "record-other-stream", "corrupt-deliveries"])
def test_compare_with_a_damaged_run(tmp_path, what):
    intact = finished_run(tmp_path / "a")
    damaged = finished_run(tmp_path / "b")
    assert cli("compare", str(intact.root), str(damaged.root)).exit_code == 0     # the same run: no difference
    damage(damaged, what)
    assert_refused(cli("compare", str(intact.root), str(damaged.root)), damaged.root, RUN_DAMAGE[what])


EXPERIMENT_DAMAGE = {   # experiment.json's text -> what plot's one line says after the file name
    "truncated": ('{"kind": "resources", "name', "not valid JSON"),
    "no-kind": ('{"name": "s4resources"}', "kind: missing"),
    "kind-number": ('{"kind": 7}', "kind: expected a string, got int"),
    "kind-unknown": ('{"kind": "pie"}', "kind: unknown experiment kind 'pie'"),
    "nested-deep": ('{"kind": "resources", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than"),
    "a-list": ("[]", "(top level): expected an object"),
}


@pytest.mark.parametrize("case", sorted(EXPERIMENT_DAMAGE))
def test_plot_on_a_damaged_experiment_directory(tmp_path, case):
    text, says = EXPERIMENT_DAMAGE[case]
    (tmp_path / "experiment.json").write_text(text)
    assert_refused(cli("plot", str(tmp_path)), tmp_path / "experiment.json", says)
