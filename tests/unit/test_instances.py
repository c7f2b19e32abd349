"""Operator instances on shared hosts (``testbed.semantics.instances``): how a topology
names them, how the plan addresses them, and what the embedded switch makes of it.

A host with ``instances: K`` runs K operator instances.  Listed as an operator it
stands for all of them; ``<host>.<i>`` names one.  Each instance has an id (a whole
host's is its port) that egress keys on, and an IP address of its own.
"""
from __future__ import annotations

import random
import re
import socket
from collections import Counter

import pytest
import yaml

from support import topologies
from testbed.dataplane.control import Controller, group_calls
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import WINDOWS_STRUCT, copy_windows, event_frame
from testbed.emulation.receiver import IN_PKTINFO, IP_PKTINFO, Arrivals, instance_index
from testbed.runs.orchestrator import run_topology
from testbed.semantics.families import COMPACT_AT_LEAST, compact_families, expand_families
from testbed.semantics.instances import FIRST_SHARED_ID, collapse, expand, host_of
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, TopologyError, WindowSpec, parse_topology, resolve_topology
from testbed.semantics.topology import load_topology as load

COUNT = {"kind": "count", "size": 4, "slide": 2}


def shared(streams, instances: dict[str, int], hosts: int = 5, **extra):
    data = topologies.topology_data(streams, hosts, **extra)
    data["hosts"].update({h: {"instances": k} for h, k in instances.items()})
    return data


def test_a_shared_host_in_an_operators_list_stands_for_all_its_instances():
    topo = parse_topology(shared([topologies.stream(1, COUNT, ["h3", "h2", "h4.1"])], {"h2": 3, "h4": 2}))
    assert topo.streams[0].operators == ["h3", "h2.0", "h2.1", "h2.2", "h4.1"]
    assert topo.operator_hosts() == ["h3", "h2", "h4"]
    assert topo.instance_hosts()["h4.1"] == "h4"
    again = parse_topology(topo.model_dump(mode="json"))          # what run.json keeps reads back the same
    assert again.streams[0].operators == topo.streams[0].operators


@pytest.mark.parametrize("operators,instances,field,message", [
    (["h2.3"], {"h2": 3}, "streams[0].operators[0]", "runs 3 instances"),
    (["h2.0"], {}, "streams[0].operators", "h2"),
    (["h3.0"], {"h2": 2}, "streams[0].operators[0]", "runs one instance"),
    (["h9.0"], {"h2": 2}, "streams[0].operators[0]", "unknown host 'h9'"),
    (["h2", "h2.1"], {"h2": 2}, "streams[0].operators", "listed twice: h2.1"),
    (["h2.01"], {"h2": 2}, "streams[0].operators[0]", "pattern"),
])
def test_an_operator_that_names_no_instance_is_refused(operators, instances, field, message):
    with pytest.raises(TopologyError, match="^<topology>: " + field.replace("[", r"\[").replace("]", r"\]")) as err:
        parse_topology(shared([topologies.stream(1, COUNT, operators)], instances))
    assert message in str(err.value)


@pytest.mark.parametrize("edit,field", [
    (lambda d: d["streams"][0].update(source="h2"), "streams[0].source"),
    (lambda d: d["hosts"]["h3"].update(ip="10.17.0.9"), "hosts.h3.ip"),
    (lambda d: d.update(adapt={"failover": True}), "adapt"),
    (lambda d: d["hosts"]["h2"].update(instances=0), "hosts.h2.instances"),
])
def test_what_a_shared_host_cannot_do_is_refused_up_front(edit, field):
    data = shared([topologies.stream(1, COUNT, ["h3", "h4"])], {"h2": 2})
    edit(data)
    with pytest.raises(TopologyError, match=re.escape(f"<topology>: {field}: ")):
        parse_topology(data)


def test_a_topology_without_instances_plans_as_it_always_did():
    """Egress keys on ports, every group is one node with rid 0 over its ports."""
    for path in sorted(resolve_topology("cbsw1").parent.glob("*.yaml")):
        hosts = yaml.safe_load(path.read_text())["hosts"]
        if any((h or {}).get("instances", 1) > 1 for h in hosts.values()):
            continue            # read first: s4s65536 takes half a minute to load
        topo = load(path)
        plan = SplitterPlan(topo)
        assert {name: inst.id for name, inst in plan.instances.items()} == plan.ports, path
        assert all(g.nodes == [(0, g.ports)] and not g.shared for g in plan.groups), path
        assert [e.match[0] for e in plan.egress] == [plan.ports[h] for h in topo.receiver_hosts()], path


def test_instances_get_ids_past_the_ports_addresses_of_their_own_and_nodes_named_by_them():
    topo = parse_topology(shared([topologies.stream(1, COUNT, ["h2", "h3"])], {"h2": 3}))
    plan = SplitterPlan(topo)
    h2 = [plan.instances[f"h2.{i}"] for i in range(3)]
    assert [i.id for i in h2] == [FIRST_SHARED_ID, FIRST_SHARED_ID + 1, FIRST_SHARED_ID + 2]
    assert [i.ip for i in h2] == ["10.16.0.1", "10.16.0.2", "10.16.0.3"]
    assert {i.mac for i in h2} == {plan.addresses["h2"][1]} and {i.port for i in h2} == {plan.ports["h2"]}
    assert plan.instances["h3"].id == plan.ports["h3"]
    unicast = [e for e in plan.entries() if e.table == "unicast"]
    assert [e.action for e in unicast] == ["to_group"] * 3 + ["to_operator"]
    groups = {g.mgid: g for g in plan.groups}
    assert groups[unicast[0].params[0]].nodes == [(FIRST_SHARED_ID, (plan.ports["h2"],))]
    mixed = groups[next(e.params[0] for e in plan.entries() if e.table == "multicast" and e.match[1] == 3)]
    assert mixed.nodes == [(0, (plan.ports["h3"],)), (FIRST_SHARED_ID + 2, (plan.ports["h2"],))]
    # egress keys on (port, rid): a whole host's copies carry rid 0, a shared
    # instance's its own node's, and the action names the instance.
    assert {(e.match, e.params[2]) for e in plan.egress} == \
        {((plan.ports["h3"], 0), plan.ports["h3"]), *(((i.port, i.id), i.id) for i in h2)}
    assert Controller(SplitterPipeline()).install(plan)["operations"] == \
        sum(group_calls(g) for g in plan.groups) + len(plan.entries())


@pytest.mark.parametrize("seed", range(4))
def test_the_embedded_switch_addresses_each_copy_to_the_oracles_instance(seed):
    """Frames through the model: each copy's destination IP is an instance the oracle
    gives the event, and its Windows header names exactly that instance's windows."""
    rng = random.Random(seed)
    instances = {"h2": rng.randint(2, 9), "h3": rng.randint(2, 5)}
    pool = expand(["h2", "h3", "h4", "h5"], instances)
    size, slide = rng.randint(1, 9), rng.randint(1, 9)
    window = {"kind": "count", "size": size, "slide": slide}
    topo = parse_topology(shared([topologies.stream(1, window, rng.sample(pool, rng.randint(1, len(pool))),
                                                    events=300)], instances))
    plan = SplitterPlan(topo)
    pipe = SplitterPipeline()
    Controller(pipe).install(plan)
    by_ip = {inst.ip: name for name, inst in plan.instances.items()}
    oracle = topo.streams[0].oracle()
    ip, mac = plan.addresses["h1"]
    copies = Counter()
    for seq in range(300):
        verdict = oracle.step(seq, seq)
        out = pipe.process(event_frame(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, 1, seq, seq))
        got = {by_ip[socket.inet_ntoa(frame[30:34])]: frame for _port, frame in out}
        assert sorted(got) == sorted(verdict.operators), seq
        copies.update(got.keys())
        for name, frame in got.items():
            assert plan.instances[name].port == next(p for p, f in out if f is frame)
            fields = WINDOWS_STRUCT.unpack_from(frame, 14 + 20 + 8 + 32)
            carried = sorted(copy_windows(fields[0], fields[1], fields[2]))
            assert carried == sorted(w for w in verdict.windows if oracle.owner(w) == name), (seq, name)
    assert copies, "no event reached an operator"
    for name, inst in plan.instances.items():
        assert pipe.counter_read("operator_out", inst.id)[1] == copies[name], name


def ancillary(destination: str):
    return [(socket.IPPROTO_IP, IP_PKTINFO, IN_PKTINFO.pack(2, socket.inet_aton(destination),
                                                            socket.inet_aton(destination)))]


def test_a_receiver_tells_instances_apart_by_the_datagrams_destination():
    first = int.from_bytes(socket.inet_aton("10.16.0.1"), "big")
    assert instance_index(ancillary("10.16.0.1"), first, 4) == 0
    assert instance_index(ancillary("10.16.0.4"), first, 4) == 3
    assert instance_index(ancillary("10.16.0.5"), first, 4) == -1       # not one of the host's instances
    assert instance_index([], first, 4) == -1
    assert instance_index(ancillary("10.0.0.3"), None, 1) == 0           # a whole host has one instance
    arrivals = Arrivals()
    frame = bytes(64)
    arrivals.event(memoryview(frame), 1, instance=2)
    arrivals.event(memoryview(frame), 2, instance=0)
    assert list(arrivals.instance_of_events()) == [2, 0]


def test_host_of_an_instance():
    assert host_of("h12.40") == "h12" and host_of("h12") == "h12"


# ---------------------------------------------------------------------------
# stream families (testbed.semantics.families)
# ---------------------------------------------------------------------------
FAMILY_WINDOWS = [{"kind": "count", "size": 2, "slide": 1}, {"kind": "time", "size": 3, "slide": 3}]


def family_topology(**family):
    entry = {"family": {"count": 5, "windows": FAMILY_WINDOWS, **family}, "id": 10, "name": "f",
             "source": "h1", "operators": ["h2", "h3"], "events": 8, "rate": 4}
    return topologies.topology_data([entry, topologies.stream(1, COUNT, ["h4"])], 5)


def test_a_family_stands_for_its_members_as_if_each_were_written_out():
    topo = parse_topology(family_topology(sources=["h1", "h5"]))
    members = topo.streams[:5]
    assert [s.id for s in members] == [10, 11, 12, 13, 14] and topo.streams[5].id == 1
    assert [s.window.kind for s in members] == ["count", "time", "count", "time", "count"]
    assert [s.source for s in members] == ["h1", "h5", "h1", "h5", "h1"]
    assert [s.name for s in members] == ["f-0", "f-1", "f-2", "f-3", "f-4"]
    written = topologies.topology_data([
        {"id": 10 + k, "name": f"f-{k}", "source": ["h1", "h5"][k % 2], "window": FAMILY_WINDOWS[k % 2],
         "operators": ["h2", "h3"], "events": 8, "rate": 4} for k in range(5)] + [topologies.stream(1, COUNT, ["h4"])],
        5)
    assert topo == parse_topology(written)
    assert SplitterPlan(topo).cost() == SplitterPlan(parse_topology(written)).cost()


def long_family(count: int, **fields) -> dict:
    return {"family": {"count": count, "windows": FAMILY_WINDOWS, "sources": ["h1", "h5"]}, "id": 100,
            "operators": ["h2", "h3"], "events": 8, "rate": 4, **fields}


def test_a_run_writes_a_long_familys_members_as_the_family_again():
    data = topologies.topology_data([topologies.stream(1, COUNT, ["h4"]), long_family(COMPACT_AT_LEAST, name="f"),
                                     long_family(COMPACT_AT_LEAST + 5) | {"id": 1000},
                                     long_family(COMPACT_AT_LEAST - 1) | {"id": 2000}], 5)
    topo = parse_topology(data)
    written = run_topology(topo, "model")
    assert [("family" in s, s["id"]) for s in written["streams"][:3]] == [(False, 1), (True, 100), (True, 1000)]
    family = written["streams"][1]
    assert family["family"]["count"] == COMPACT_AT_LEAST and family["family"]["sources"] == ["h1", "h5"]
    assert [(w["kind"], w["size"]) for w in family["family"]["windows"]] == [("count", 2), ("time", 3)]
    assert family["name"] == "f" and "window" not in family and "source" not in family
    # a run shorter than COMPACT_AT_LEAST stays written out, as its author wrote it
    assert len(written["streams"]) == 3 + COMPACT_AT_LEAST - 1
    assert parse_topology(written).streams == topo.streams


def test_a_member_unlike_the_others_ends_the_family_there():
    members = [s.model_dump(mode="json", exclude_none=True)
               for s in parse_topology(topologies.topology_data([long_family(200)], 5)).streams]
    members[130]["rate"] = 5                      # one member's own rate: it and what follows are another run
    members[150]["window"] = COUNT                # a window out of turn: the windows dealt are listed whole
    compacted = compact_families(members, least=10)
    assert [s["family"]["count"] if "family" in s else s["id"] for s in compacted] == [130, 230, 69]
    assert len(compacted[0]["family"]["windows"]) == 2 and len(compacted[2]["family"]["windows"]) > 2
    assert expand_families(compacted) == members


@pytest.mark.parametrize("family,field", [
    ({"count": 0}, "streams[0].family.count"),
    ({"count": 65530}, "streams[0].family.count"),            # ids 10 .. 65539 pass 16 bits
    ({"windows": []}, "streams[0].family.windows"),
    ({"bogus": 1}, "streams[0].family.bogus"),
    ({"windows": [{"kind": "count", "size": 0, "slide": 1}]}, "streams[0].window.size"),
])
def test_a_family_that_cannot_be_written_out_is_refused(family, field):
    with pytest.raises(TopologyError, match=re.escape(f"<topology>: {field}: ")):
        parse_topology(family_topology(**family))


def test_the_shipped_scale_topologies_validate_and_plan():
    streams = load(resolve_topology("s4s4096"))
    assert len(streams.streams) == 4096 and {len(s.operators) for s in streams.streams} == {64}
    assert {s.window.kind for s in streams.streams} == {"count", "time"}
    instances = load(resolve_topology("s4n1024"))
    assert len(instances.streams[0].operators) == 1024
    assert SplitterPlan(instances).cost()["egress_rewrite"] == 1024


@pytest.mark.parametrize("old,new,handover", [
    ({"kind": "count", "size": 4, "slide": 4}, {"kind": "count", "size": 4, "slide": 4}, False),   # tumbling
    ({"kind": "count", "size": 3, "slide": 5}, {"kind": "count", "size": 6, "slide": 2}, False),   # gaps: ends early
    ({"kind": "count", "size": 4, "slide": 2}, {"kind": "count", "size": 4, "slide": 4}, True),    # old overlaps
    ({"kind": "time", "size": 4, "slide": 4, "lateness": 4}, {"kind": "time", "size": 4, "slide": 4, "lateness": 4},
     True),                                                                                          # late events
])
@pytest.mark.parametrize("batch", [None, {"events": 4, "max_delay": 0.01}])
def test_a_change_installs_handover_only_where_an_event_can_lie_in_old_windows(old, new, handover, batch):
    """With the old windows ending at the boundary and nothing late past it, the
    transition ends at the first event of the new epoch: handover is never read.
    A batch across the boundary still goes to its events' union through handover."""
    extra = {"batch": batch} if batch else {}
    topo = parse_topology(shared([topologies.stream(1, old, ["h2"], **extra)], {"h2": 8}))
    plan = SplitterPlan(topo)
    new_stream = topo.streams[0].model_copy(update={"window": WindowSpec.model_validate(new),
                                                    "operators": topo.streams[0].operators[:6]})
    tables = {e.table for e in plan.change(topo.streams[0], new_stream, 1).entries}
    assert ("handover" in tables) == (handover or batch is not None)
    assert {"previous_spec", "previous_position", "unicast"} <= tables


@pytest.mark.parametrize("seed", range(20))
def test_collapse_is_the_shortest_list_that_expands_back(seed):
    rng = random.Random(seed)
    counts = {"h2": rng.randint(2, 6), "h3": rng.randint(2, 4), "h4": 1}
    pool = expand(["h2", "h3", "h4"], counts)
    listed = rng.choice([pool, rng.sample(pool, rng.randint(1, len(pool))), pool[::-1]])
    short = collapse(listed, counts)
    assert expand(short, counts) == listed
    assert len(short) <= len(listed)
    assert collapse(pool, counts) == ["h2", "h3", "h4"] and collapse(pool[::-1], counts) == pool[::-1]


def test_a_runs_topology_file_reads_back_as_the_same_streams():
    """The run directory's topology keeps operator lists short and means what the run ran."""
    data = shared([topologies.stream(1, COUNT, ["h2", "h3"]), topologies.stream(2, COUNT, ["h3.1", "h2.0", "h2.1"])],
                  {"h2": 2, "h3": 3})
    topo = parse_topology(data)
    written = run_topology(topo, "model")
    assert [s["operators"] for s in written["streams"]] == [["h2", "h3"], ["h3.1", "h2"]]
    again = parse_topology(written)
    assert [s.operators for s in again.streams] == [s.operators for s in topo.streams]
