"""``simple_switch_CLI``'s commands and output, over any target's control API.

``simple_switch_CLI`` (bmv2's ``tools/runtime_CLI.py``) is how P4 users look
into a switch: ``table_dump``, ``mc_dump``, ``register_read``,
``counter_read``...  The embedded target has no Thrift server for it, so
``RuntimeCLI`` offers the same command names and prints the same lines for
everything ``contract.SwitchAPI`` serves.  A script written for one target
then runs on the other, and whoever reads bmv2's output reads this one.

What differs, because the control API has no such thing: no default
entries to change (every table misses to ``NoAction``), no LAGs, no
meters, no direct counters.  Match keys are shown by their ``@name``
(bmv2 shows the P4 field instead).  Names resolve as in bmv2: the
qualified name (``MyIngress.window_spec``) or a suffix of it
(``window_spec``).

Like ``cmd.Cmd`` (and simple_switch_CLI) it reads its commands from
standard input, so a script can be piped in.
"""
from __future__ import annotations

import cmd
import sys
from functools import wraps
from typing import Any, Callable, Optional, TextIO

from testbed.dataplane.contract import (
    ALL_COUNTERS,
    ALL_REGISTER_WIDTHS,
    ALL_TABLES,
    DEFAULT_ACTION,
    SCHEMA,
    SwitchAPI,
    TableSpec,
    to_bytes,
    to_int,
)

INTRO = "Control utility for runtime P4 table manipulation"
PROMPT = "RuntimeCmd: "
RULE, STARS = "=" * 10, "*" * 10
#: Every register and counter the embedded switch holds, the CEP stage's among them.
ARRAYS = {"register": ALL_REGISTER_WIDTHS, "counter": ALL_COUNTERS}


class CLIError(Exception):
    """Bad input, printed as ``Error: ...`` the way simple_switch_CLI prints it."""


def hexstr(value: int, width: int) -> str:
    """``value`` as the hex digits of the bytes a ``width``-bit field takes (bmv2's ``hexstr``)."""
    return to_bytes(value, width, "value").hex()


def data_hexstr(value: int) -> str:
    """Action data as bmv2 returns it: the fewest bytes that hold the value (at least one)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big").hex()


def byte_str(value: int, width: int) -> str:
    """``00:05``: bytes separated by colons (bmv2's ``printable_byte_str``)."""
    return ":".join(f"{b:02x}" for b in to_bytes(value, width, "value"))


def _suffix_match(name: str, qualified: str) -> bool:
    return qualified == name or qualified.endswith("." + name)


def command(operation: str) -> Callable:
    """A ``do_*`` method taking its arguments as a list.  Bad input prints
    ``Error: ...``, and what the switch refuses ``Invalid <operation>
    operation (...)``, as in simple_switch_CLI; the loop goes on either way."""
    def wrap(method: Callable) -> Callable:
        @wraps(method)
        def run(self: "CommandLoop", line: str) -> None:
            try:
                method(self, line.split())
            except CLIError as err:
                self.say(f"Error: {err}")
            except (KeyError, ValueError, RuntimeError) as err:
                reason = err.args[0] if isinstance(err, KeyError) and err.args else err
                self.say(f"Invalid {operation} operation ({reason})")
        return run
    return wrap


class CommandLoop(cmd.Cmd):
    """The loop and what every command shares: the API, output, resolving
    names and reading arguments as simple_switch_CLI does."""

    intro = INTRO
    prompt = PROMPT

    def __init__(self, api: SwitchAPI, stdin: Optional[TextIO] = None, stdout: Optional[TextIO] = None):
        super().__init__(stdin=stdin, stdout=stdout)
        self.api = api
        # A given stream is read with readline (cmd's raw input is sys.stdin only).
        self.use_rawinput = stdin is None

    def say(self, *parts: Any) -> None:
        print(*parts, file=self.stdout)

    # -- names ----------------------------------------------------------
    @staticmethod
    def table(name: str) -> tuple[str, TableSpec]:
        for short, spec in ALL_TABLES.items():
            if _suffix_match(name, spec.qualified(short)):
                return short, spec
        raise CLIError(f"Invalid table name ({name})")

    @staticmethod
    def action(table: str, spec: TableSpec, name: str) -> str:
        for short in spec.actions:
            if _suffix_match(name, spec.qualified(short)):
                return short
        raise CLIError(f"Table {table} has no action {name}")

    @staticmethod
    def array(kind: str, name: str) -> str:
        """A register or counter (``kind``): bmv2 qualifies them by control and
        instance (``MyIngress.slides.newest_op``); any suffix down to the name resolves."""
        short = name.rsplit(".", 1)[-1]
        if short not in ARRAYS[kind]:
            raise CLIError(f"Invalid {kind} name ({name})")
        return short

    def array_args(self, args: list[str], n: int, kind: str) -> str:
        """Exactly ``n`` arguments, the first a register or counter: its short name."""
        self.args(args, n)
        return self.array(kind, args[0])

    def table_args(self, args: list[str], n: int) -> tuple[str, TableSpec]:
        """Exactly ``n`` arguments, the first a table: its short name and spec."""
        self.args(args, n)
        return self.table(args[0])

    @staticmethod
    def args(args: list[str], n: int, at_least: bool = False) -> None:
        if at_least and len(args) < n:
            raise CLIError("Insufficient number of args")
        if not at_least and len(args) != n:
            raise CLIError(f"Wrong number of args, expected {n} but got {len(args)}")

    @staticmethod
    def integer(text: str, what: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise CLIError(f"Bad format for {what}") from None

    # -- the loop -------------------------------------------------------------
    def do_EOF(self, line: str) -> bool:
        self.say()
        return True

    def emptyline(self) -> bool:
        # cmd's default (which simple_switch_CLI keeps) repeats the last
        # command; a blank line in a script must not add an entry twice.
        return False


class TableCommands(CommandLoop):
    """What the program declares, and the entries of its match tables."""

    # -- what the program declares ----------------------------------------
    def do_show_tables(self, line: str) -> None:
        "List tables defined in the P4 program: show_tables"
        for short, spec in sorted(SCHEMA.items(), key=lambda item: item[1].qualified(item[0])):
            keys = ",\t".join(f"{k.name}(exact, {k.width})" for k in spec.keys)
            self.say("{0:30} [{1}, mk={2}]".format(spec.qualified(short), "implementation=None", keys))

    def _actions(self) -> dict[str, str]:
        """Qualified action name -> its ``show_actions`` line."""
        out = {DEFAULT_ACTION: "{0:30} [{1}]".format(DEFAULT_ACTION, "")}
        for spec in SCHEMA.values():
            for short, action in spec.actions.items():
                params = ",\t".join(f"{p.name}({p.width})" for p in action.params)
                out[spec.qualified(short)] = "{0:30} [{1}]".format(spec.qualified(short), params)
        return out

    def do_show_actions(self, line: str) -> None:
        "List actions defined in the P4 program: show_actions"
        for _name, text in sorted(self._actions().items()):
            self.say(text)

    @command("table")
    def do_table_show_actions(self, args: list[str]) -> None:
        "List one table's actions as per the P4 program: table_show_actions <table_name>"
        short, spec = self.table_args(args, 1)
        lines = self._actions()
        for name in sorted([spec.qualified(a) for a in spec.actions] + [DEFAULT_ACTION]):
            self.say(lines[name])

    @command("table")
    def do_table_info(self, args: list[str]) -> None:
        "Show info about a table: table_info <table_name>"
        short, spec = self.table_args(args, 1)
        keys = ",\t".join(f"{k.name}(exact, {k.width})" for k in spec.keys)
        self.say("{0:30} [{1}, mk={2}]".format(spec.qualified(short), "implementation=None", keys))
        self.say("*" * 80)
        self.do_table_show_actions(args[0])

    # -- table entries ----------------------------------------------------
    @command("table")
    def do_table_num_entries(self, args: list[str]) -> None:
        "Return the number of entries in a match table: table_num_entries <table name>"
        short, _spec = self.table_args(args, 1)
        self.say(len(self.api.table_entries(short)))

    @command("table")
    def do_table_clear(self, args: list[str]) -> None:
        "Clear all entries in a match table, but not the default entry: table_clear <table name>"
        short, _spec = self.table_args(args, 1)
        self.api.table_clear(short)

    @command("table")
    def do_table_add(self, args: list[str]) -> None:
        "Add entry to a match table: table_add <table name> <action name> <match fields> => <action parameters>"
        self.args(args, 3, at_least=True)
        short, spec = self.table(args[0])
        action = self.action(args[0], spec, args[1])
        rest = args[2:]
        split = rest.index("=>") if "=>" in rest else len(rest)
        keys, params = rest[:split], rest[split + 1:]
        if len(keys) != len(spec.keys):
            raise CLIError(f"Table {args[0]} needs {len(spec.keys)} key fields")
        declared = spec.actions[action].params
        if len(params) != len(declared):
            raise CLIError(f"Action {spec.qualified(action)} needs {len(declared)} parameters")
        key_values = [self._value(text, "int", k.width) for text, k in zip(keys, spec.keys)]
        param_values = [self._value(text, p.kind, p.width) for text, p in zip(params, declared)]
        self.say("Adding entry to exact match table", args[0])
        self.say("{0:20} {1}".format("match key:", "\t".join(
            "EXACT-" + byte_str(v, k.width) for v, k in zip(key_values, spec.keys))))
        self.say("{0:20} {1}".format("action:", args[1]))
        self.say("{0:20} {1}".format("runtime data:", "\t".join(
            byte_str(v, p.width) for v, p in zip(param_values, declared))))
        handle = self.api.table_add(short, action, key_values, param_values)
        self.say("Entry has been added with handle", handle)

    @staticmethod
    def _value(text: str, kind: str, width: int) -> int:
        try:
            value = to_int(text, kind)
            to_bytes(value, width, text)
        except ValueError as err:
            raise CLIError(f"Error while parsing {text} - {err}") from None
        return value

    @command("table")
    def do_table_delete(self, args: list[str]) -> None:
        "Delete entry from a match table: table_delete <table name> <entry handle>"
        short, spec = self.table_args(args, 2)
        handle = self.integer(args[1], "entry handle")
        self.say("Deleting entry", handle, "from", args[0])
        self.api.table_delete(short, self._entry(short, handle)["handle"])

    @command("table")
    def do_table_dump(self, args: list[str]) -> None:
        "Display entries in a match-table: table_dump <table name>"
        short, spec = self.table_args(args, 1)
        entries = self.api.table_entries(short)
        self.say(RULE)
        self.say("TABLE ENTRIES")
        for entry in entries:
            self.say(STARS)
            self._dump_entry(short, spec, entry)
        self.say(RULE)
        self.say("Dumping default entry")
        self.say(f"Action entry: {DEFAULT_ACTION} - ")
        self.say(RULE)

    @command("table")
    def do_table_dump_entry(self, args: list[str]) -> None:
        "Display some information about a table entry: table_dump_entry <table name> <entry handle>"
        short, spec = self.table_args(args, 2)
        self._dump_entry(short, spec, self._entry(short, self.integer(args[1], "entry handle")))

    def _entry(self, table: str, handle: int) -> dict[str, Any]:
        """The entry with ``handle``; an unknown handle is bmv2's ``INVALID_HANDLE``."""
        for entry in self.api.table_entries(table):
            if entry["handle"] == handle:
                return entry
        raise KeyError("INVALID_HANDLE")

    def _dump_entry(self, short: str, spec: TableSpec, entry: dict[str, Any]) -> None:
        width = max(20, max(len(k.name) for k in spec.keys))
        self.say(f"Dumping entry {hex(entry['handle'])}")
        self.say("Match key:")
        for key, value in zip(spec.keys, entry["match"]):
            self.say("* {0:{w}}: {1:10}{2}".format(key.name, "EXACT", hexstr(value, key.width), w=width))
        data = ", ".join(data_hexstr(v) for v in entry["params"])
        self.say(f"Action entry: {spec.qualified(entry['action'])} - {data}")



class MulticastCommands(CommandLoop):
    """The packet replication engine: groups and nodes."""

    @command("PRE")
    def do_mc_mgrp_create(self, args: list[str]) -> None:
        "Create multicast group: mc_mgrp_create <group id>"
        self.args(args, 1)
        mgid = self.integer(args[0], "multicast group id")
        self.say("Creating multicast group", mgid)
        self.api.mc_mgrp_create(mgid)

    @command("PRE")
    def do_mc_node_create(self, args: list[str]) -> None:
        "Create multicast node: mc_node_create <rid> <space-separated port list>"
        self.args(args, 1, at_least=True)
        rid = self.integer(args[0], "rid")
        ports = sorted({self.integer(p, "port") for p in args[1:]})
        port_map = "".join("1" if p in ports else "0" for p in range(max(ports) + 1))[::-1] if ports else ""
        self.say("Creating node with rid", rid, ", port map", port_map, "and lag map", "")
        self.say("node was created with handle", self.api.mc_node_create(rid, ports))

    @command("PRE")
    def do_mc_node_associate(self, args: list[str]) -> None:
        "Associate node to multicast group: mc_node_associate <group handle> <node handle>"
        self.args(args, 2)
        mgid, node = self.integer(args[0], "multicast group id"), self.integer(args[1], "node handle")
        self.say("Associating node", node, "to multicast group", mgid)
        self.api.mc_node_associate(mgid, node)

    @command("PRE")
    def do_mc_dump(self, args: list[str]) -> None:
        "Dump entries in multicast engine"
        dump = self.api.mc_dump()
        self.say(RULE)
        self.say("MC ENTRIES")
        for mgid, nodes in dump.items():
            self.say(STARS)
            self.say(f"mgrp({mgid})")
            for node in nodes:
                ports = ", ".join(str(p) for p in node["ports"])
                self.say(f"  -> (L1h={node['handle']}, rid={node['rid']}) -> (ports=[{ports}], lags=[])")
        self.say(RULE)
        self.say("LAGS")
        self.say(RULE)



class ArrayCommands(CommandLoop):
    """Registers and counters, by name and index."""

    @command("register")
    def do_register_read(self, args: list[str]) -> None:
        "Read register value: register_read <name> [index]"
        self.args(args, 1, at_least=True)
        name = self.array("register", args[0])
        if len(args) > 1:
            self.args(args, 2)
            index = self.integer(args[1], "index")
            self.say(f"{args[0]}[{index}]=", self.api.register_read(name, index))
        else:
            sys.stderr.write("register index omitted, reading entire array\n")
            self.say(f"{args[0]}=", ", ".join(str(v) for v in self.api.register_read(name)))

    @command("register")
    def do_register_write(self, args: list[str]) -> None:
        "Write register value: register_write <name> <index> <value>"
        name = self.array_args(args, 3, "register")
        index = self.integer(args[1], "index")
        try:
            value = int(args[2])
        except ValueError:
            raise CLIError("Bad format for value, must be an integer") from None
        self.api.register_write(name, index, value)

    @command("register")
    def do_register_reset(self, args: list[str]) -> None:
        "Reset all the cells in the register array to 0: register_reset <name>"
        self.api.register_reset(self.array_args(args, 1, "register"))

    @command("counter")
    def do_counter_read(self, args: list[str]) -> None:
        "Read counter value: counter_read <name> <index>"
        name = self.array_args(args, 2, "counter")
        index = self.integer(args[1], "index")
        nbytes, packets = self.api.counter_read(name, index)
        self.say("%s[%d]= (%d bytes, %d packets)" % (args[0], index, nbytes, packets))

    @command("counter")
    def do_counter_reset(self, args: list[str]) -> None:
        "Reset counter: counter_reset <name>"
        self.api.counter_reset(self.array_args(args, 1, "counter"))


class RuntimeCLI(TableCommands, MulticastCommands, ArrayCommands):
    """simple_switch_CLI's commands on a ``SwitchAPI`` (the embedded switch's client, the model, bmv2's)."""
