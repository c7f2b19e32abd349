"""One source for the P4 contract: ``p4/*.p4`` and ``contract.py`` declare the same things.

Read from the P4 text itself (no compiler needed), so drift shows up in
every test run; where p4c exists the compiled JSON is held to it as well.
"""
import json

import pytest

from testbed import ROOT
from testbed.dataplane import contract, wire
from testbed.dataplane.p4source import read_folder, read_program
from testbed.semantics import limits

pytestmark = pytest.mark.unit
PROGRAM = read_folder(ROOT / "p4")


def drift(prog) -> list[str]:
    """Every difference between a program's declarations and the contract."""
    out = []
    if set(prog.tables) != set(contract.SCHEMA):
        out.append(f"tables: {sorted(set(prog.tables) ^ set(contract.SCHEMA))}")
    for name, spec in contract.SCHEMA.items():
        table = prog.tables.get(name)
        if table is None:
            continue
        if table.keys != [k.name for k in spec.keys]:
            out.append(f"{name} keys: {table.keys} against {[k.name for k in spec.keys]}")
        if table.actions != set(spec.actions):
            out.append(f"{name} actions: {sorted(table.actions)} against {sorted(spec.actions)}")
        if table.size != contract.TABLE_SIZES[name]:
            out.append(f"{name} size: {table.size} against {contract.TABLE_SIZES[name]}")
        for action, aspec in spec.actions.items():
            declared = [(p.name, p.width) for p in aspec.params]
            if prog.actions.get(action) != declared:
                out.append(f"{action} params: {prog.actions.get(action)} against {declared}")
    registers = {name: bits for name, (bits, _cells) in prog.registers.items()}
    if registers != contract.REGISTERS:
        out.append(f"registers: {sorted(set(registers.items()) ^ set(contract.REGISTERS.items()))}")
    if any(cells != contract.N_STREAMS for _bits, cells in prog.registers.values()):
        out.append("a register is not sized by stream")
    if prog.counters != contract.COUNTERS:
        out.append(f"counters: {sorted(set(prog.counters.items()) ^ set(contract.COUNTERS.items()))}")
    c = prog.constants
    expected = {"N_STREAMS": contract.N_STREAMS, "N_PORTS": contract.N_PORTS, "DROP_SLOTS": contract.DROP_SLOTS,
                "LATE_STEPS": contract.LATE_STEPS, "EVENT_UDP_PORT": wire.EVENT_UDP_PORT,
                "HEARTBEAT_UDP_PORT": wire.HEARTBEAT_UDP_PORT, "FLAG_WINDOWS": wire.FLAG_WINDOWS,
                "WINDOWS_HEADER_BYTES": wire.WINDOWS_LEN, "BATCH_UDP_PORT": wire.BATCH_UDP_PORT,
                "MAX_BATCH": limits.MAX_BATCH, "BATCH_HEADER_BYTES": wire.BATCH_LEN, "EVENT_BYTES": wire.EVENT_LEN,
                **{f"DROP_{reason.upper()}": code for reason, code in contract.DROP_CODES.items()}}
    out += [f"constant {k}: {c.get(k)} against {v}" for k, v in expected.items() if c.get(k) != v]
    return out


def test_the_p4_source_and_the_contract_agree():
    assert len(PROGRAM.tables) == len(contract.SCHEMA) > 5 and PROGRAM.registers and PROGRAM.counters
    assert drift(PROGRAM) == []


def test_the_limits_use_the_programs_widths():
    assert limits.WINDOWS_PER_EVENT_BITS == dict(PROGRAM.actions["set_count_window"])["cap"]
    assert limits.GROUP_ID_BITS == dict(PROGRAM.actions["to_group"])["mgid"]


@pytest.mark.parametrize("edit, found", [
    (("register<bit<32>>(N_STREAMS) epoch;", "register<bit<16>>(N_STREAMS) epoch;"), "registers"),
    (("size = UNICAST_TABLE_SIZE;", "size = 1024;"), "unicast size"),
    (("action to_group(bit<16> mgid)", "action to_group(bit<16> group)"), "to_group params"),
    (("const bit<32> DROP_TOO_LATE       = 3;", "const bit<32> DROP_TOO_LATE       = 5;"), "DROP_TOO_LATE"),
    (("#define MAX_BATCH 16", "#define MAX_BATCH 8"), "MAX_BATCH"),
    (("actions = { to_operator; @defaultonly NoAction; }", "actions = { @defaultonly NoAction; }"),
     "unicast actions"),
])
def test_a_drifted_program_is_caught(edit, found):
    texts = [path.read_text() for path in sorted((ROOT / "p4").glob("*.p4"))]
    old, new = edit
    assert sum(old in t for t in texts) == 1, old
    drifted = read_program([t.replace(old, new) for t in texts])
    assert any(found in line for line in drift(drifted)), drift(drifted)


def test_the_compiled_program_agrees_where_p4c_exists(tmp_path):
    from testbed.targets.bmv2 import toolchain

    reason = toolchain.compiler_missing()
    if reason:
        pytest.skip(f"p4c is not here: {reason}")
    compiled = json.loads(toolchain.compile_program(out_dir=tmp_path).read_text())
    tables = {t["name"].rsplit(".", 1)[-1] for p in compiled["pipelines"] for t in p["tables"]}
    assert set(contract.SCHEMA) <= tables
    registers = {r["name"].rsplit(".", 1)[-1]: r["bitwidth"] for r in compiled["register_arrays"]}
    assert registers == contract.REGISTERS
    counters = {c["name"].rsplit(".", 1)[-1]: c["size"] for c in compiled["counter_arrays"]}
    assert counters == contract.COUNTERS
