"""Fuzzing the topology loader: every file ends in a usable topology or one clean error line.

Three kinds of input, drawn by hypothesis: random YAML documents, valid
topologies (the scenarios and a replay stream) with random edits to their
structure, and the scenarios' bytes with random corruption.  A file the
loader accepts must be usable as far as ``testbed`` goes before it starts
anything: addresses, plan, and the first events of every stream.  A file it
refuses must be refused with a ``TopologyError`` of one line that names the
file.  Any other exception fails the test.
"""
from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed import ROOT
from testbed.semantics.addressing import plan_addresses
from testbed.semantics.plan import load_planned
from testbed.semantics.topology import TopologyError, parse_topology
from testbed.semantics.workload import stream_events

SCENARIOS = sorted((ROOT / "topologies").glob("*.yaml"))
REPLAY_ROWS = "time,price,bidder\n" + "".join(f"{3 * i},{10 + i}.5,{i % 4}\n" for i in range(40))
REPLAY_BASE = {"name": "rp", "hosts": {"h1": {}, "h2": {"ip": "10.0.0.7"}, "h3": {"mac": "02:00:00:00:0a:0b"}},
               "links": [{"host": "h2", "bw": 10}],
               "streams": [{"id": 9, "source": "h1", "window": {"kind": "time", "size": 9, "slide": 4},
                            "operators": ["h2", "h3"], "events": 30, "rate": 50,
                            "replay": {"path": "bids.csv", "ts": "time", "value": "price", "key": "bidder"}}]}
#: CEP rules (docs/cep.md): windows, a pattern, a sink.
CEP_BASE = {"name": "cep", "hosts": {"h1": {}, "h2": {}, "h3": {}},
            "streams": [{"id": 5, "source": "h1", "window": {"kind": "count", "size": 4, "slide": 4},
                         "operators": ["h2"], "events": 20, "rate": 50}],
            "cep": {"windows": [{"name": "recent", "stream": 5, "field": "value", "size": 8}],
                    "complex_events": [{"name": "spike", "id": 1, "stream": 5, "strategy": "strict",
                                        "pattern": "([value > 5] && [key == 1]); [sum(recent) > 9]",
                                        "returns": "max(recent)", "sinks": ["h3"]}]}}
#: Scenarios past this many streams are left out of the bases: each edited
#: copy of s4s65536 takes half a minute to parse, and s4s4096 probes families already.
MOST_STREAMS = 4096


def _streams(doc: dict) -> int:
    return sum((s.get("family") or {}).get("count", 1) if isinstance(s, dict) else 1 for s in doc.get("streams") or ())


BASES = [doc for doc in (yaml.safe_load(p.read_text()) for p in SCENARIOS) if _streams(doc) <= MOST_STREAMS] \
    + [REPLAY_BASE, CEP_BASE]
#: Strings that mean something somewhere in a topology, so edits hit real paths.
WORDS = ["h1", "h2", "h3", "s1", "count", "time", "sum", "nexmark_q7", "10.0.0.254", "10.0.0.255", "10.0.0.2",
         "01:00:5e:00:00:01", "02:00:00:00:00:02", "ff:ff:ff:ff:ff:ff", "1ms", "bids.csv", "time", "price",
         "", " ", "\n", "\x00", "é", "-1", "1e400", ".inf", "nan", "0x10",
         "[value > 1]", "[sum(recent) < -9223372036854775809]", "[a] && [b] || [c]", "min(recent)", "recent",
         "skip-till-next-match", "[count(recent > 3) >= 2]; ([key == 0] || [seq != 4])", "(["]

scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(-3, 70),
    st.integers(-2**70, 2**70),
    st.sampled_from([2**16 - 1, 2**16, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(WORDS),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(WORDS), st.text(max_size=8)), inner, max_size=4)), max_leaves=12)
FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_loader(contents: bytes) -> None:
    """Load ``contents`` as a topology file; accept a usable topology or one clean error line."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bids.csv").write_text(REPLAY_ROWS)
        path = folder / "topo.yaml"
        path.write_bytes(contents)
        try:
            topo, plan = load_planned(path)
        except TopologyError as err:
            message = str(err)
            assert "\n" not in message and message.startswith(f"{path}: "), message
            return
        assert plan.cost()["window_spec"] == len(topo.streams)
        assert len(set(plan_addresses(topo).values())) == len(topo.hosts)
        for s in topo.streams:
            events = stream_events(s, topo.seed, limit=3)
            assert len(events["ts"]) == min(3, s.events)
            assert (events["ts"] >= 0).all()


def dump(doc) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode()


@FUZZ
@given(doc=values)
def test_random_documents(doc):
    check_loader(dump(doc))


def paths(node, prefix=()):
    """Every place in a document: mapping keys and list positions, depth first."""
    yield prefix
    if isinstance(node, dict):
        for key, child in node.items():
            yield from paths(child, prefix + (key,))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from paths(child, prefix + (i,))


def edit(doc, path, action, value):
    """Replace, delete, duplicate, or add a field at ``path``; the root is replaced whole."""
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete":
        del parent[last]
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(parent[last]))
    elif action == "add" and isinstance(parent[last], dict):
        parent[last][value if isinstance(value, str) else "extra"] = value
    return doc


@FUZZ
@given(data=st.data())
def test_edited_topologies(data):
    doc = copy.deepcopy(data.draw(st.sampled_from(BASES)))
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(list(paths(doc))))
        action = data.draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "add"]))
        doc = edit(doc, path, action, data.draw(values))
    check_loader(dump(doc))


@FUZZ
@given(data=st.data())
def test_corrupted_bytes(data):
    raw = bytearray(data.draw(st.sampled_from(SCENARIOS)).read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, max(0, len(raw) - 1)))
        action = data.draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
        if action == "flip" and raw:
            raw[at] = data.draw(st.integers(0, 255))
        elif action == "delete":
            del raw[at:at + data.draw(st.integers(1, 40))]
        elif action == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del raw[at:]
    check_loader(bytes(raw))


def test_the_bases_load():
    """The edited documents start from valid ones, so edits probe the limits, not the basics."""
    rules = parse_topology(CEP_BASE).cep
    assert rules is not None and rules.automata()[1].states > 1
    for base in BASES:
        check_loader(dump(base))
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "bids.csv").write_text(REPLAY_ROWS)
            (Path(tmp) / "t.yaml").write_bytes(dump(base))
            load_planned(Path(tmp) / "t.yaml")
