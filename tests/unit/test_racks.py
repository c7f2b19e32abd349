"""Racks: operators behind L2 bridges below the splitter, one splitter port per rack."""
from __future__ import annotations

import copy

import pytest
import yaml

from testbed.semantics import limits
from testbed.semantics.addressing import plan_addresses, subnet
from testbed.semantics.instances import FIRST_SHARED_ID
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import TopologyError, parse_topology

BASE = {
    "name": "rk",
    "hosts": {f"h{i}": {} for i in range(1, 9)},
    "racks": {"r1": {"hosts": ["h2", "h3", "h4"]}, "r2": {"hosts": ["h5", "h6", "h7"]}},
    "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 5, "slide": 2},
                 "operators": ["h2", "h3", "h4", "h5", "h6", "h7", "h8"], "events": 100, "rate": 1000}],
}


def topo(**changes):
    data = copy.deepcopy(BASE)
    data.update(changes)
    return parse_topology(data, "rk.yaml")


def test_a_rack_takes_one_port_where_its_first_host_comes():
    t = topo()
    assert t.switch_ports() == {"h1": 1, "h2": 2, "h3": 2, "h4": 2, "h5": 3, "h6": 3, "h7": 3, "h8": 4}
    assert t.port_count() == 4


def test_without_racks_ports_are_the_hosts_positions():
    data = copy.deepcopy(BASE)
    del data["racks"]
    t = parse_topology(data, "rk.yaml")
    assert t.switch_ports() == {f"h{i}": i for i in range(1, 9)}
    assert t.port_count() == 8
    assert all(not inst.shared for inst in SplitterPlan(t).instances.values())


def test_racked_hosts_are_reached_through_a_node_of_their_own_on_the_racks_port():
    plan = SplitterPlan(topo())
    racked = {h: plan.instances[h] for h in ("h2", "h3", "h4", "h5", "h6", "h7")}
    assert sorted(inst.id for inst in racked.values()) == list(range(FIRST_SHARED_ID, FIRST_SHARED_ID + 6))
    assert {h: inst.port for h, inst in racked.items()} == {"h2": 2, "h3": 2, "h4": 2, "h5": 3, "h6": 3, "h7": 3}
    assert plan.instances["h8"].id == 4 and not plan.instances["h8"].shared
    addresses = plan_addresses(plan.topology)
    # The egress rewrite gives each racked copy its own host's MAC: the bridge delivers by it.
    rewrite = {e.match: e.params for e in plan.egress}
    for h, inst in racked.items():
        assert rewrite[(inst.port, inst.id)] == (addresses[h][1], addresses[h][0], inst.id)
    for group in plan._group_ids.values():
        assert all(port in (2, 3) for _rid, port in group.shared)
        assert 2 not in group.ports and 3 not in group.ports
    assert plan.host_of_port()[2] == "r1" and plan.host_of_port()[4] == "h8"


@pytest.mark.parametrize("racks, field", [
    ({"r1": {"hosts": ["h2", "h9"]}}, "racks.r1.hosts[1]: unknown host 'h9'"),
    ({"r1": {"hosts": ["h2"]}, "r2": {"hosts": ["h2"]}}, "racks.r2.hosts[0]: host 'h2' is also in rack 'r1'"),
    ({"r1": {"hosts": ["h1"]}}, "racks.r1.hosts[0]: 'h1' is a stream's source"),
    ({"h2": {"hosts": ["h3"]}}, "racks.h2: 'h2' is also a host name"),
    ({"s1": {"hosts": ["h3"]}}, "racks.s1: 's1' is also a switch name"),
    ({"r1": {"hosts": []}}, "racks.r1.hosts"),
    ({"r1": {"hosts": ["h2", "h2"]}}, "racks.r1.hosts"),
    ({"r1": {"host": ["h2"]}}, "racks.r1"),
    ({"rackwithlongname": {"hosts": ["h2"]}}, "racks"),
])
def test_bad_racks_are_one_line_naming_file_and_field(racks, field):
    with pytest.raises(TopologyError) as err:
        topo(racks=racks)
    assert str(err.value).startswith("rk.yaml: ") and field in str(err.value)
    assert "\n" not in str(err.value)


def test_a_racked_link_cannot_be_shaped():
    with pytest.raises(TopologyError, match=r"rk.yaml: links\[0\]|racks.r1.hosts\[0\]: 'h2' has an entry in links"):
        topo(links=[{"host": "h2", "bw": 10}])


def test_racks_refuse_adapt():
    adapt = {"failover": True}
    with pytest.raises(TopologyError, match="rk.yaml: adapt: failover and elastic pools watch whole splitter ports"):
        topo(adapt=adapt)


def test_ports_not_hosts_are_counted_against_the_cap():
    n = 1100
    hosts = {f"h{i}": {} for i in range(1, n + 1)}
    ops = [f"h{i}" for i in range(2, n + 1)]
    racks = {f"r{k}": {"hosts": ops[k * 100:(k + 1) * 100]} for k in range(11)}
    data = {"name": "big", "hosts": hosts, "racks": racks,
            "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 4, "slide": 4},
                         "operators": ops, "events": 10, "rate": 1000}]}
    t = parse_topology(data, "big.yaml")
    assert t.port_count() == 1 + 11 - 0 and len(t.hosts) == n
    assert subnet(t).prefixlen == 20
    addresses = plan_addresses(t)
    assert len({ip for ip, _mac in addresses.values()}) == n
    assert len({mac for _ip, mac in addresses.values()}) == n
    del data["racks"]
    with pytest.raises(TopologyError, match=f"big.yaml: hosts: {n} hosts, but the switch has ports"):
        parse_topology(data, "big.yaml")


def test_too_many_ports_with_racks_names_racks():
    n = limits.MAX_HOSTS + 3
    hosts = {f"h{i}": {} for i in range(1, n + 1)}
    data = {"name": "big", "hosts": hosts, "racks": {"r1": {"hosts": ["h2", "h3"]}},
            "streams": [{"id": 1, "source": "h1", "window": {"kind": "count", "size": 4, "slide": 4},
                         "operators": ["h2"], "events": 10, "rate": 1000}]}
    with pytest.raises(TopologyError, match=rf"big.yaml: racks: {n - 1} splitter ports"):
        parse_topology(data, "big.yaml")


def test_a_shared_host_in_a_rack_keeps_its_instances_on_the_racks_port():
    hosts = copy.deepcopy(BASE["hosts"])
    hosts["h3"] = {"instances": 4}
    plan = SplitterPlan(topo(hosts=hosts))
    mine = [inst for inst in plan.instances.values() if inst.host == "h3"]
    assert len(mine) == 4 and {inst.port for inst in mine} == {2} and all(inst.shared for inst in mine)


@pytest.mark.parametrize("name", ["racks", "s4n1024"])
def test_plan_shows_egress_by_instance_id(name):
    """Ids past the ports (racked hosts, shared hosts' instances) name their operator and port."""
    from support.runs import run_cli

    res = run_cli("plan", name, "-k", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "egress rewrite ((port, rid) -> instance id, destination)" in res.stdout
    if name == "racks":
        rows = [[cell.strip() for cell in line.split("│")[1:5]] for line in res.stdout.splitlines()]
        assert ["2", "512", "512", "h2"] in rows


def test_validate_says_how_many_racks_and_splitter_ports(tmp_path):
    from click.testing import CliRunner

    from testbed.cli import main

    path = tmp_path / "rk.yaml"
    path.write_text(yaml.safe_dump(BASE))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok (8 hosts (6 in 2 racks), 4 splitter ports, 1 streams)" in result.output
