"""The embedded target's runtime CLI: simple_switch_CLI's commands and output shapes."""
import io

import pytest

from support import runtime_output, topologies
from testbed.dataplane.contract import SCHEMA, drop_counter_index
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.runtime_cli import INTRO, PROMPT, RuntimeCLI
from testbed.dataplane.wire import event_frame
from testbed.semantics.plan import SplitterPlan


def run_script(api, script: str) -> str:
    out = io.StringIO()
    RuntimeCLI(api, stdin=io.StringIO(script), stdout=out).cmdloop()
    return out.getvalue()


@pytest.fixture
def installed():
    topo = topologies.build([
        topologies.stream(7, {"kind": "count", "size": 5, "slide": 2}, ["h2", "h3", "h4"]),
        topologies.stream(9, {"kind": "time", "size": 30, "slide": 10, "origin": 100}, ["h3", "h5"]),
    ], hosts=5)
    plan = SplitterPlan(topo)
    model = SplitterPipeline()
    Controller(model).install(plan)
    return plan, model


def test_table_dumps_read_back_the_plan(installed):
    plan, model = installed
    out = run_script(model, "".join(f"table_dump {t}\n" for t in SCHEMA))
    assert out.startswith(INTRO + "\n" + PROMPT)
    dumps = runtime_output.table_dumps(out)
    assert len(dumps) == len(SCHEMA)
    planned = runtime_output.planned_tables(plan)
    for table, dump in zip(SCHEMA, dumps):
        assert sorted(e["handle"] for e in dump) == list(range(len(dump)))
        assert [{k: v for k, v in e.items() if k != "handle"} for e in dump] == planned[table]
    # the shape, line by line, of one entry (bmv2's table_dump)
    assert ("Dumping entry 0x0\nMatch key:\n* stream              : EXACT     0007\n"
            "* bank                : EXACT     00\n"
            "Action entry: MyIngress.set_count_window - 02, 02, 01, 03\n"
            ) in out
    assert "==========\nDumping default entry\nAction entry: NoAction - \n==========\n" in out


def test_mc_dump_and_counters_after_traffic(installed):
    plan, model = installed
    ip, mac = plan.addresses["h1"]
    for seq in range(10):
        model.process(event_frame(mac, "02:00:00:00:00:fe", ip, "10.0.0.254", 7, seq, seq))
    model.process(event_frame(mac, "02:00:00:00:00:fe", ip, "10.0.0.254", 11, 0, 0))   # unknown stream
    out = run_script(model, f"mc_dump\ncounter_read stream_in 7\ncounter_read MyEgress.stream_out 7\n"
                            f"counter_read stream_drops {drop_counter_index(11, 'unknown_stream')}\n"
                            f"register_read event_count 7\nregister_read MyIngress.slides.newest_op 7\n")
    assert runtime_output.groups(out) == {g.mgid: [(rid, list(ports)) for rid, ports in g.nodes]
                                          for g in plan.groups}
    counters = runtime_output.counters(out)
    assert counters[("stream_in", 7)] == model.counter_read("stream_in", 7)
    assert counters[("stream_in", 7)][1] == 10
    assert counters[("MyEgress.stream_out", 7)][1] == model.counter_read("stream_out", 7)[1] > 10
    assert counters[("stream_drops", drop_counter_index(11, "unknown_stream"))][1] == 1
    registers = runtime_output.registers(out)
    assert registers[("event_count", 7)] == 10
    assert registers[("MyIngress.slides.newest_op", 7)] == model.register_read("newest_op", 7)
    assert "  -> (L1h=0, rid=0) -> (ports=[" in out


def test_table_add_and_delete_change_the_switch_with_bmv2s_messages():
    model = SplitterPipeline()
    out = run_script(model, "table_add unicast to_operator 5 1 => 3\n"
                            "table_add egress_rewrite MyEgress.rewrite_dst 3 0 => 02:00:00:00:00:03 10.0.0.3 3\n"
                            "table_num_entries unicast\ntable_delete unicast 0\ntable_num_entries unicast\n"
                            "table_delete unicast 0\n")
    assert ("Adding entry to exact match table unicast\n"
            "match key:           EXACT-00:00:00:05\tEXACT-00:00:00:01\n"
            "action:              to_operator\n"
            "runtime data:        00:03\n"
            "Entry has been added with handle 0\n") in out
    assert model.table_entries("egress_rewrite") == [
        {"handle": 0, "match": [3, 0], "action": "rewrite_dst", "params": [0x020000000003, 0x0A000003, 3]}]
    assert "Deleting entry 0 from unicast\n" in out
    assert runtime_output.lines(out).count("1") == 1 and runtime_output.lines(out).count("0") == 1
    assert out.endswith("Deleting entry 0 from unicast\nInvalid table operation (INVALID_HANDLE)\nRuntimeCmd: \n")
    assert model.table_entries("unicast") == []


@pytest.mark.parametrize("line,message", [
    ("table_dump nosuch", "Error: Invalid table name (nosuch)"),
    ("table_add multicast to_operator 1 1 2 => 1", "Error: Table multicast has no action to_operator"),
    ("table_add unicast to_operator 1 => 1", "Error: Table unicast needs 2 key fields"),
    ("table_add operator_count set_operator_count 70000 0 => 1 1", "Error: Error while parsing 70000 - "),
    ("table_add operator_count set_operator_count 1 2 => 1 1", "Error: Error while parsing 2 - "),
    ("table_add unicast to_operator 1 1 => 512", "does not fit in 9 bits"),
    ("counter_read stream_in", "Error: Wrong number of args, expected 2 but got 1"),
    ("counter_read nosuch 1", "Error: Invalid counter name (nosuch)"),
    ("register_write newest_op 1 x", "Error: Bad format for value, must be an integer"),
    ("table_dump_entry unicast 4", "Invalid table operation (INVALID_HANDLE)"),
])
def test_bad_input_is_reported_and_the_loop_goes_on(line, message):
    model = SplitterPipeline()
    out = run_script(model, f"{line}\ncounter_read non_event 0\n")
    assert message in out
    assert runtime_output.counters(out) == {("non_event", 0): (0, 0)}


def test_show_tables_lists_the_contract_with_widths():
    out = run_script(SplitterPipeline(), "show_tables\ntable_info multicast\n")
    assert ("MyIngress.multicast            [implementation=None, mk=opset(exact, 32),\t"
            "newest_op(exact, 32),\tactive(exact, 32)]") in out
    assert "MyEgress.egress_rewrite" in out
    assert "MyIngress.to_group             [mgid(16)]" in out
