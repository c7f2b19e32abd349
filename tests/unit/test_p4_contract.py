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
from testbed.semantics.plan import TRANSITION

pytestmark = pytest.mark.unit
PROGRAM = read_folder(ROOT / "p4")


#: Every table, register and counter of every build (the CEP stage's among them), with sizes.
TABLES = contract.ALL_TABLES
SIZES = contract.TABLE_SIZES | {name: contract.CEP_TABLE_SIZE for name in contract.CEP_SCHEMA}
REGISTER_CELLS = ({name: (bits, contract.N_STREAMS)
                   for name, bits in (contract.REGISTERS | contract.FIXED_REGISTERS).items()}
                  | contract.CEP_REGISTERS)
COUNTERS = contract.COUNTERS | contract.CEP_COUNTERS


def drift(prog) -> list[str]:
    """Every difference between a program's declarations and the contract."""
    out = []
    if set(prog.tables) != set(TABLES):
        out.append(f"tables: {sorted(set(prog.tables) ^ set(TABLES))}")
    for name, spec in TABLES.items():
        table = prog.tables.get(name)
        if table is None:
            continue
        if table.keys != [k.name for k in spec.keys]:
            out.append(f"{name} keys: {table.keys} against {[k.name for k in spec.keys]}")
        if table.actions != set(spec.actions):
            out.append(f"{name} actions: {sorted(table.actions)} against {sorted(spec.actions)}")
        if table.size != SIZES[name]:
            out.append(f"{name} size: {table.size} against {SIZES[name]}")
        for action, aspec in spec.actions.items():
            declared = [(p.name, p.width) for p in aspec.params]
            if prog.actions.get(action) != declared:
                out.append(f"{action} params: {prog.actions.get(action)} against {declared}")
    if prog.registers != REGISTER_CELLS:
        out.append(f"registers: {sorted(set(prog.registers.items()) ^ set(REGISTER_CELLS.items()))}")
    if prog.counters != COUNTERS:
        out.append(f"counters: {sorted(set(prog.counters.items()) ^ set(COUNTERS.items()))}")
    c = prog.constants
    expected = {"N_STREAMS": contract.N_STREAMS, "N_PORTS": contract.N_PORTS, "DROP_SLOTS": contract.DROP_SLOTS,
                "LATE_STEPS": contract.LATE_STEPS, "EVENT_UDP_PORT": wire.EVENT_UDP_PORT,
                "HEARTBEAT_UDP_PORT": wire.HEARTBEAT_UDP_PORT, "FLAG_WINDOWS": wire.FLAG_WINDOWS,
                "WINDOWS_HEADER_BYTES": wire.WINDOWS_LEN, "BATCH_UDP_PORT": wire.BATCH_UDP_PORT,
                "MAX_BATCH": limits.MAX_BATCH, "BATCH_HEADER_BYTES": wire.BATCH_LEN, "EVENT_BYTES": wire.EVENT_LEN,
                **{f"DROP_{reason.upper()}": code for reason, code in contract.DROP_CODES.items()},
                "CEP_UDP_PORT": wire.CEP_UDP_PORT, "CEP_HEADER_BYTES": wire.CEP_LEN,
                "COMPLEX_EVENT_BYTES": wire.COMPLEX_EVENT_LEN, "CEP_WINDOWS": contract.CEP_WINDOWS,
                "CEP_DEPTH": contract.CEP_DEPTH, "CEP_RING_CELLS": contract.CEP_WINDOWS * contract.CEP_DEPTH,
                "CEP_PATTERNS": contract.CEP_PATTERNS, "CEP_COMPARISONS": contract.CEP_COMPARISONS,
                "CEP_COMPARISON_CELLS": contract.CEP_PATTERNS * contract.CEP_COMPARISONS,
                "CEP_TRANSITION_TABLE_SIZE": contract.CEP_TABLE_SIZE, "CEP_SESSION": contract.CEP_SESSION,
                **{f"CEP_FIELD_{k.upper()}": v for k, v in contract.CEP_FIELD_CODES.items()},
                **{f"CEP_OPERAND_{k.upper()}": v for k, v in contract.CEP_OPERAND_CODES.items()},
                **{f"CEP_OP_{name}": contract.CEP_OP_CODES[op] for op, name in
                   (("<", "LT"), ("<=", "LE"), ("==", "EQ"), ("!=", "NE"), (">=", "GE"), (">", "GT"))}}
    out += [f"constant {k}: {c.get(k)} against {v}" for k, v in expected.items() if c.get(k) != v]
    return out


def test_the_p4_source_and_the_contract_agree():
    assert len(PROGRAM.tables) == len(TABLES) > 5 and PROGRAM.registers and PROGRAM.counters
    assert drift(PROGRAM) == []


def test_the_limits_use_the_programs_widths():
    assert limits.WINDOWS_PER_EVENT_BITS == dict(PROGRAM.actions["set_count_window"])["cap"]
    assert limits.GROUP_ID_BITS == dict(PROGRAM.actions["to_group"])["mgid"]


@pytest.mark.parametrize("edit, found", [
    (("register<bit<32>, bit<16>>(N_STREAMS) epoch;", "register<bit<16>, bit<16>>(N_STREAMS) epoch;"), "registers"),
    (("size = UNICAST_TABLE_SIZE;", "size = 1024;"), "unicast size"),
    (("action to_group(bit<16> mgid)", "action to_group(bit<16> group)"), "to_group params"),
    (("const bit<32> DROP_TOO_LATE       = 3;", "const bit<32> DROP_TOO_LATE       = 5;"), "DROP_TOO_LATE"),
    (("#define MAX_BATCH 16", "#define MAX_BATCH 8"), "MAX_BATCH"),
    (("register<bit<8>, bit<32>>(CEP_PATTERNS)          cep_state;",
      "register<bit<16>, bit<32>>(CEP_PATTERNS)          cep_state;"), "registers"),
    (("register<bit<64>, bit<32>>(CEP_RING_CELLS) cep_ring;", "register<bit<64>, bit<32>>(CEP_WINDOWS) cep_ring;"),
     "registers"),
    (("const bit<8> CEP_OP_GE = 5;", "const bit<8> CEP_OP_GE = 7;"), "CEP_OP_GE"),
    (("actions = { to_operator; to_group; @defaultonly NoAction; }", "actions = { to_group; @defaultonly NoAction; }"),
     "unicast actions"),
])
def test_a_drifted_program_is_caught(edit, found):
    texts = [path.read_text() for path in sorted((ROOT / "p4").glob("*.p4"))]
    old, new = edit
    assert sum(old in t for t in texts) == 1, old
    drifted = read_program([t.replace(old, new) for t in texts])
    assert any(found in line for line in drift(drifted)), drift(drifted)


@pytest.mark.parametrize("build", ["plain", "cep", "fixed"])
def test_the_compiled_program_agrees_where_p4c_exists(build):
    """The plain build holds the splitter's tables and registers and nothing
    else, but the build without changes' own egress table; the CEP build
    holds the CEP stage's as well; the build without changes mid-stream
    lacks the transition's tables, egress_rewrite and operator_position,
    whose work its operator_back does."""
    from testbed.targets.bmv2 import toolchain

    reason = toolchain.compiler_missing()
    if reason:
        pytest.skip(f"p4c is not here: {reason}")
    program = {"cep": toolchain.CEP_PROGRAM, "fixed": toolchain.FIXED_PROGRAM}.get(build, toolchain.PROGRAM)
    # The project's build (compiled again when a source is newer): the bmv2 tests run the same
    # files, so the suite compiles each program once.
    compiled = json.loads(toolchain.compile_program(program=program).read_text())
    tables = {t["name"].rsplit(".", 1)[-1] for p in compiled["pipelines"] for t in p["tables"]}
    registers = {r["name"].rsplit(".", 1)[-1]: (r["bitwidth"], r["size"]) for r in compiled["register_arrays"]}
    counters = {c["name"].rsplit(".", 1)[-1]: c["size"] for c in compiled["counter_arrays"]}
    splitter = {name: (bits, contract.N_STREAMS) for name, bits in contract.REGISTERS.items()}
    if build == "cep":
        assert set(contract.ALL_TABLES) - set(contract.FIXED_ONLY) <= tables
        assert not set(contract.FIXED_ONLY) & tables
        assert registers == splitter | contract.CEP_REGISTERS
        assert counters == contract.COUNTERS | contract.CEP_COUNTERS
    elif build == "fixed":
        assert tables >= set(contract.SCHEMA) - set(TRANSITION) - set(contract.NOT_FIXED)
        assert not (set(TRANSITION) | set(contract.NOT_FIXED) | set(contract.CEP_SCHEMA)) & tables
        # Registers stay, so that the control plane reads and resets every build alike;
        # a count stream's state is in one more (p4/counts.p4).
        assert registers == splitter | {name: (bits, contract.N_STREAMS)
                                        for name, bits in contract.FIXED_REGISTERS.items()}
        assert counters == contract.COUNTERS
    else:
        assert set(contract.SCHEMA) - set(contract.FIXED_ONLY) <= tables
        assert not (set(contract.CEP_SCHEMA) | set(contract.FIXED_ONLY)) & tables
        assert registers == splitter
        assert counters == contract.COUNTERS
