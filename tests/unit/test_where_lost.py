"""Where a lost event was lost: the kernel's counters along its path, read and attributed."""
import json

import pandas as pd
from test_record import judged, oracle_run

from testbed.analysis.verdicts import attribute, evaluate, verdict_summary
from testbed.emulation.pathstats import interface_counters, socket_drops
from testbed.rundir import PathCounters
from testbed.runs.record import base_record, collect
from testbed.semantics.plan import SplitterPlan

IP_JSON = json.dumps([{"ifindex": 2, "ifname": "s1-eth1@if3", "stats64": {
    "rx": {"bytes": 1, "packets": 3003, "errors": 1, "dropped": 7},
    "tx": {"bytes": 1, "packets": 0, "errors": 0, "dropped": 2}}}])
SS = ("Netid Recv-Q Send-Q Local Address:Port Peer Address:PortProcess\n"
      'p_raw 0 0 *:s1-eth1 * users:(("simple_switch",pid=41,fd=9)) skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d825)\n'
      'p_raw 0 0 *:s1-eth2 * users:(("simple_switch",pid=41,fd=10))\n'
      "\t skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d3)\n"
      'p_raw 0 0 *:s1-eth1 * users:(("tcpdump",pid=77,fd=3)) skmem:(r0,rb1,t0,tb1,f0,w0,o0,bl0,d99)\n')


def test_interface_counters_read_ip_s_json():
    assert interface_counters(IP_JSON) == {"s1-eth1": {"rx_packets": 3003, "rx_dropped": 7, "rx_errors": 1,
                                                       "tx_packets": 0, "tx_dropped": 2, "tx_errors": 0}}
    assert interface_counters("") == {}


def test_socket_drops_are_the_switch_process_own_per_interface():
    """skmem's d, on the line or the next; another process's socket on the same port is not the switch's."""
    assert socket_drops(SS, 41) == {"s1-eth1": 825, "s1-eth2": 3}
    assert socket_drops(SS, 77) == {"s1-eth1": 99}
    assert socket_drops(SS, 5) == {}


def test_attribute_fills_places_in_path_order_and_names_the_rest_unknown():
    assert attribute(10, [("a", 3), ("b", 0), ("c", 4)]) == {"a": 3, "c": 4, "unknown": 3}
    assert attribute(2, [("a", 5), ("b", 5)]) == {"a": 2}
    assert attribute(0, [("a", 5)]) == {}


def copies_out(rundir, ports, lost_at):
    """The switch's per-port copy counters of a run in which one copy to ``lost_at`` went
    missing after the switch's egress counted it (None: the switch never sent it)."""
    got = pd.read_parquet(rundir.deliveries)["operator"].value_counts()
    return {str(ports[op]): int(got[op]) + (op == lost_at) for op in ("h2", "h3", "h4")}


def counters(**fields):
    return {"rx_packets": 0, "rx_dropped": 0, "rx_errors": 0, "tx_packets": 0, "tx_dropped": 0, "tx_errors": 0} | fields


def lossy_run(topo, rundir, switch_saw: int, hosts: dict, sockets: dict, left_the_switch: bool = True,
              target: str = "model"):
    """A run of 60 events of which the switch saw ``switch_saw`` and whose copy of
    seq 10 to h3 went missing, with the path counters ``hosts`` (by host) and
    ``sockets`` (by host, the switch's socket drops on its port).  The missing
    copy left the switch (its egress counted it) unless ``left_the_switch`` is false."""
    sliding = topo.build([topo.stream(3, {"kind": "count", "size": 5, "slide": 2}, ["h2", "h3", "h4"],
                                      events=60)], 4)
    oracle_run(sliding, rundir, lose=(10, "h3"))
    collect(rundir)
    record = base_record(sliding, SplitterPlan(sliding), "r1", target, "t.yaml")
    ports = record.switch_ports
    record.switch = {"streams": {"3": {"in": switch_saw, "out": 146, "dropped": {}}}, "non_event": 0,
                     "ports": copies_out(rundir, ports, lost_at="h3" if left_the_switch else None)}
    record.path = PathCounters(hosts={h: counters(**hosts.get(h, {})) for h in ("h1", "h2", "h3", "h4")},
                               switch_ports={str(p): counters() for p in ports.values()},
                               switch_sockets={str(ports[h]): n for h, n in sockets.items()})
    rundir.write_record(record)
    return record, evaluate(record, rundir, with_windows=False)


def test_every_lost_event_gets_a_place_on_its_path(topo, rundir):
    """One event never reached the switch (its socket dropped it) and one copy to
    h3 never reached h3's receiver (h3's end of the link dropped it)."""
    record, verdicts = lossy_run(topo, rundir, 59, {"h3": {"rx_dropped": 1}}, {"h1": 1})
    where = judged(rundir)["accounting"]["where_lost"]
    assert where["sources"] == {"h1": {"lost": 1, "where": {"switch socket": 1}}}
    assert where["operators"]["h3"] == {"lost": 1, "where": {"operator link end": 1}}
    lines = verdict_summary(record, verdicts)
    assert "lost before the switch, from h1: 1 (switch socket 1)" in lines
    assert "lost in or after the switch, to h3: 1 (operator link end 1)" in lines


def test_a_loss_no_counter_explains_is_unknown(topo, rundir):
    lossy_run(topo, rundir, 60, {}, {})
    assert judged(rundir)["accounting"]["where_lost"]["operators"] == {"h3": {"lost": 1, "where": {"unknown": 1}}}


def test_a_copy_the_switch_never_sent_is_lost_in_its_egress_queue_on_bmv2(topo, rundir):
    """bmv2 drops a copy whose egress queue is full before egress counts it, and counts
    it nowhere: the copy the check misses beyond what left the switch is placed there."""
    record, verdicts = lossy_run(topo, rundir, 60, {"h3": {"rx_dropped": 5}}, {}, left_the_switch=False,
                                 target="bmv2")
    where = judged(rundir)["accounting"]["where_lost"]["operators"]
    assert where == {"h3": {"lost": 1, "where": {"switch egress queue (full)": 1}}}
    assert "lost in or after the switch, to h3: 1 (switch egress queue (full) 1)" in verdict_summary(record, verdicts)


def test_on_the_model_a_copy_that_never_left_is_named_inside_the_switch(topo, rundir):
    lossy_run(topo, rundir, 60, {}, {}, left_the_switch=False)
    assert judged(rundir)["accounting"]["where_lost"]["operators"] == {
        "h3": {"lost": 1, "where": {"inside the switch": 1}}}


def test_on_bmv2_an_event_no_counter_on_the_way_in_saw_is_placed_in_its_libpcap_ring(topo, rundir):
    """A full libpcap ring's drops show in no counter outside simple_switch: on
    bmv2 what the way in does not explain is placed there, after the counted
    places; on the model it stays unknown."""
    record, verdicts = lossy_run(topo, rundir, 57, {}, {"h1": 1}, target="bmv2")
    where = judged(rundir)["accounting"]["where_lost"]["sources"]
    assert where == {"h1": {"lost": 3, "where": {"switch socket": 1, "switch libpcap ring (no counter: the rest)": 2}}}
    assert ("lost before the switch, from h1: 3 (switch socket 1, switch libpcap ring (no counter: the rest) 2)"
            in verdict_summary(record, verdicts))
    lossy_run(topo, rundir, 57, {}, {"h1": 1})
    assert judged(rundir)["accounting"]["where_lost"]["sources"] == {
        "h1": {"lost": 3, "where": {"switch socket": 1, "unknown": 2}}}


def racked_record(topo, rundir):
    """A run of h2, h3 and h4 behind rack r1, h3 losing one copy on its link: its
    topology, its record with the switch's counts (one port for the three), that port, and
    the copies the operators got."""
    racked = topo.build([topo.stream(3, {"kind": "count", "size": 5, "slide": 2}, ["h2", "h3", "h4"], events=60)],
                        4, racks={"r1": {"hosts": ["h2", "h3", "h4"]}})
    oracle_run(racked, rundir, lose=(10, "h3"))
    collect(rundir)
    record = base_record(racked, SplitterPlan(racked), "r1", "model", "t.yaml")
    port = str(record.switch_ports["h2"])
    got = int(pd.read_parquet(rundir.deliveries)["operator"].value_counts().sum())
    record.switch = {"streams": {"3": {"in": 60, "out": 146, "dropped": {}}}, "non_event": 0,
                     "ports": {port: got + 1}}
    return racked, record, port, got


def test_a_racks_hosts_are_accounted_together_behind_their_one_port(topo, rundir):
    """The switch counts copies per port, and a rack's hosts share one: their
    copies add up against it, and a loss there is the rack's, placed on its path."""
    _racked, record, port, _got = racked_record(topo, rundir)
    assert {str(record.switch_ports[h]) for h in ("h2", "h3", "h4")} == {port}
    record.path = PathCounters(hosts={h: counters(**({"rx_dropped": 1} if h == "h3" else {}))
                                      for h in ("h1", "h2", "h3", "h4")},
                               switch_ports={str(p): counters() for p in set(record.switch_ports.values())},
                               switch_sockets={})
    rundir.write_record(record)
    verdicts = evaluate(record, rundir, with_windows=False)
    assert judged(rundir)["accounting"]["where_lost"]["operators"] == {
        "h2+h3+h4": {"lost": 1, "where": {"operator link end": 1}}}
    assert "lost in or after the switch, to h2+h3+h4: 1 (operator link end 1)" in verdict_summary(record, verdicts)


def test_a_copy_a_racks_bridge_dropped_is_placed_there(topo, rundir):
    _racked, record, _port, got = racked_record(topo, rundir)
    record.path = PathCounters(hosts={h: counters() for h in ("h1", "h2", "h3", "h4")},
                               switch_ports={str(p): counters() for p in set(record.switch_ports.values())},
                               switch_sockets={},
                               racks={"r1": {"r1-eth0": counters(rx_packets=got + 1),
                                             "r1-eth2": counters(tx_dropped=1)}})
    rundir.write_record(record)
    evaluate(record, rundir, with_windows=False)
    assert judged(rundir)["accounting"]["where_lost"]["operators"] == {
        "h2+h3+h4": {"lost": 1, "where": {"rack bridge": 1}}}
