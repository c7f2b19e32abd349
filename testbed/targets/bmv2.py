"""The bmv2 target: ``p4/splitter.p4`` on ``simple_switch``, driven over Thrift.

- ``Bmv2API`` is the control client.  It has p4-utils' method names (the
  ones ``testbed.control.Controller`` calls) and takes the short names of
  ``testbed.pipeline`` (``window_spec``, ``newest_op``, ...), which it maps
  to bmv2's qualified names (``MyIngress.window_spec``, ...) by reading the
  compiled JSON.  It talks to the switch with bmv2's own Python Thrift
  modules (``bm_runtime``), found through ``testbed.p4build``.
- ``simple_switch_command`` builds the switch's command line;
  ``Bmv2Process`` runs a switch outside Mininet (tests, benchmarks) and
  ``Bmv2Switch`` is the Mininet node.

bmv2's Thrift server listens on every interface (``0.0.0.0:<port>``); there
is no option to bind it to loopback.  ``docs/p4.md`` says what that means.
"""
from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from .. import p4build
from ..pipeline import SCHEMA
from ..ports import free_loopback_port, port_listening
from ..procs import register_path, register_pid, stop_group, wait_ready
from .. import netns
from .base import SplitterSwitch, SwitchNotReady

#: Context id of the single P4 program in a bmv2 switch.
CXT_ID = 0
#: bmv2 log verbosity in the run directory: warnings and errors only, so the
#: log costs nothing per packet but still shows what went wrong.
DEFAULT_LOG_LEVEL = "warn"
#: Longest path a Unix socket (the notifications IPC) may have, minus slack.
MAX_IPC_PATH = 100
THRIFT_TIMEOUT_MS = 30_000


class Bmv2Error(RuntimeError):
    """A control operation bmv2 refused; ``str()`` names the operation and bmv2's error code."""


# ----------------------------------------------------------------------
# the compiled program: names and widths
# ----------------------------------------------------------------------
@dataclass(frozen=True)
class TableInfo:
    name: str                       # qualified, e.g. MyIngress.window_spec
    key_names: tuple[str, ...]      # as @name gives them, e.g. ("stream", "newest_op")
    key_widths: tuple[int, ...]
    match_types: tuple[str, ...]
    actions: tuple[str, ...]        # qualified action names


@dataclass(frozen=True)
class ActionInfo:
    name: str
    param_names: tuple[str, ...]
    param_widths: tuple[int, ...]


@dataclass(frozen=True)
class ArrayInfo:
    name: str
    size: int
    bitwidth: int = 0               # registers only


def short_name(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


class ProgramInfo:
    """Tables, actions, registers and counters of a bmv2 JSON, by short name.

    A short name is the last component of the qualified one.  Qualified
    names are accepted as well; a short name that two objects share is
    refused rather than guessed.
    """

    def __init__(self, config: dict[str, Any]):
        header_types = {h["name"]: {f[0]: f[1] for f in h["fields"]} for h in config["header_types"]}
        header_of = {h["name"]: h["header_type"] for h in config["headers"]}

        def width(target: Sequence[str]) -> int:
            return header_types[header_of[target[0]]][target[1]]

        self.actions: dict[str, ActionInfo] = {}
        for a in config["actions"]:
            self.actions[a["name"]] = ActionInfo(
                a["name"], tuple(p["name"] for p in a["runtime_data"]),
                tuple(p["bitwidth"] for p in a["runtime_data"]))
        self.tables: dict[str, TableInfo] = {}
        for pipe in config["pipelines"]:
            for t in pipe["tables"]:
                self.tables[t["name"]] = TableInfo(
                    t["name"], tuple(k.get("name", "") for k in t["key"]),
                    tuple(width(k["target"]) for k in t["key"]),
                    tuple(k["match_type"] for k in t["key"]), tuple(t["actions"]))
        self.registers = {r["name"]: ArrayInfo(r["name"], r["size"], r["bitwidth"])
                          for r in config["register_arrays"]}
        self.counters = {c["name"]: ArrayInfo(c["name"], c["size"])
                         for c in config["counter_arrays"] if not c.get("is_direct")}

    @classmethod
    def from_file(cls, path: Path) -> "ProgramInfo":
        return cls(json.loads(Path(path).read_text()))

    @staticmethod
    def _resolve(kind: str, objects: dict[str, Any], name: str) -> Any:
        if name in objects:
            return objects[name]
        hits = [obj for q, obj in objects.items() if short_name(q) == name]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise KeyError(f"no {kind} named {name}")
        raise KeyError(f"{kind} name {name} is ambiguous: {', '.join(sorted(h.name for h in hits))}")

    def table(self, name: str) -> TableInfo:
        return self._resolve("table", self.tables, name)

    def action(self, table: TableInfo, name: str) -> ActionInfo:
        candidates = {a: self.actions[a] for a in table.actions}
        return self._resolve(f"action of {short_name(table.name)}", candidates, name)

    def register(self, name: str) -> ArrayInfo:
        return self._resolve("register", self.registers, name)

    def counter(self, name: str) -> ArrayInfo:
        return self._resolve("counter", self.counters, name)


def _to_int(value: Any, kind: Optional[str]) -> int:
    """A table value as an integer: ints, ``"0x1f"``, ``"aa:bb:cc:dd:ee:ff"``, ``"10.0.0.2"``."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if kind == "mac" or (kind is None and text.count(":") == 5):
        octets = text.split(":")
        if len(octets) != 6:
            raise ValueError(f"not a MAC address: {text!r}")
        return int.from_bytes(bytes(int(o, 16) for o in octets), "big")
    if kind == "ip" or (kind is None and text.count(".") == 3):
        return int(ipaddress.IPv4Address(text))
    return int(text, 0)


def _to_bytes(value: int, bitwidth: int, what: str) -> bytes:
    if value < 0 or value >> bitwidth:
        raise ValueError(f"{what}: {value} does not fit in {bitwidth} bits")
    return value.to_bytes((bitwidth + 7) // 8, "big")


# ----------------------------------------------------------------------
# the control client
# ----------------------------------------------------------------------
def _thrift_modules():
    """bmv2's generated Thrift modules, imported on first use."""
    p4build.add_bmv2_python_path()
    from bm_runtime.simple_pre_lag import SimplePreLAG
    from bm_runtime.simple_pre_lag import ttypes as pre_types
    from bm_runtime.standard import Standard
    from bm_runtime.standard import ttypes as std_types
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from thrift.transport import TSocket, TTransport
    return {"Standard": Standard, "SimplePreLAG": SimplePreLAG, "std": std_types, "pre": pre_types,
            "TSocket": TSocket, "TTransport": TTransport, "TBinaryProtocol": TBinaryProtocol,
            "TMultiplexedProtocol": TMultiplexedProtocol}


class Bmv2API:
    """Control client of one ``simple_switch`` over Thrift, with p4-utils' method names.

    ``json_path`` is the program the switch runs (the source of names and
    widths); without it the JSON is fetched from the switch.  Multicast
    goes through the ``simple_pre_lag`` service, the PRE simple_switch has.
    """

    def __init__(self, thrift_port: int, json_path: Optional[Path] = None,
                 host: str = "127.0.0.1", timeout_ms: int = THRIFT_TIMEOUT_MS,
                 netns_path: Optional[str] = None):
        m = _thrift_modules()
        self._std = m["std"]
        self._pre_types = m["pre"]
        sock = m["TSocket"].TSocket(host, thrift_port)
        sock.setTimeout(timeout_ms)
        if netns_path is not None:
            # The switch lives in its own namespace (its Thrift server binds
            # every interface there, and there only loopback has an address):
            # connect from inside it and hand Thrift the open socket.
            try:
                sock.handle = netns.connect(netns_path, thrift_port, timeout_ms / 1000)
            except OSError as err:
                raise Bmv2Error(f"cannot connect to bmv2 Thrift server at 127.0.0.1:{thrift_port} "
                                f"in {netns_path}: {err}") from None
        self._transport = m["TTransport"].TBufferedTransport(sock)
        proto = m["TBinaryProtocol"].TBinaryProtocol(self._transport)
        mux = m["TMultiplexedProtocol"].TMultiplexedProtocol
        self.client = m["Standard"].Client(mux(proto, "standard"))
        self.mc = m["SimplePreLAG"].Client(mux(proto, "simple_pre_lag"))
        try:
            if netns_path is None:
                self._transport.open()
        except m["TTransport"].TTransportException as err:
            raise Bmv2Error(f"cannot connect to bmv2 Thrift server at {host}:{thrift_port}: {err}") from None
        config = (json.loads(Path(json_path).read_text()) if json_path
                  else json.loads(self.client.bm_get_config()))
        self.program = ProgramInfo(config)
        self._mgrp_handles: dict[int, int] = {}

    # -- connection ---------------------------------------------------------
    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> "Bmv2API":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, what: str, fn, *args: Any) -> Any:
        """Run a Thrift call; bmv2's error codes become ``Bmv2Error`` with the code's name."""
        std = self._std
        try:
            return fn(*args)
        except std.InvalidTableOperation as err:
            code = std.TableOperationErrorCode._VALUES_TO_NAMES.get(err.code, err.code)
        except std.InvalidCounterOperation as err:
            code = std.CounterOperationErrorCode._VALUES_TO_NAMES.get(err.code, err.code)
        except std.InvalidRegisterOperation as err:
            code = std.RegisterOperationErrorCode._VALUES_TO_NAMES.get(err.code, err.code)
        except self._pre_types.InvalidMcOperation as err:
            code = self._pre_types.McOperationErrorCode._VALUES_TO_NAMES.get(err.code, err.code)
        raise Bmv2Error(f"{what}: {code}")

    # -- tables -------------------------------------------------------------
    def table_add(self, table: str, action: str, match_keys: Sequence[Any],
                  action_params: Sequence[Any] = ()) -> int:
        """Add an exact-match entry; values may be ints or strings (MAC, IPv4, decimal, 0x..)."""
        t = self.program.table(table)
        a = self.program.action(t, action)
        if len(match_keys) != len(t.key_widths):
            raise ValueError(f"table {table} takes {len(t.key_widths)} match keys, got {len(match_keys)}")
        if len(action_params) != len(a.param_widths):
            raise ValueError(f"action {action} takes {len(a.param_widths)} parameters, got {len(action_params)}")
        if any(mt != "exact" for mt in t.match_types):
            raise ValueError(f"table {table}: only exact-match keys are supported")
        std = self._std
        key = [std.BmMatchParam(type=std.BmMatchParamType.EXACT,
                                exact=std.BmMatchParamExact(_to_bytes(_to_int(v, "int"), w, f"{table} key")))
               for v, w in zip(match_keys, t.key_widths)]
        kinds = self._param_kinds(short_name(t.name), short_name(a.name), len(a.param_widths))
        data = [_to_bytes(_to_int(v, kind), w, f"{action}({name})")
                for v, kind, w, name in zip(action_params, kinds, a.param_widths, a.param_names)]
        return self._call(f"table_add {table} {action} {list(match_keys)}", self.client.bm_mt_add_entry,
                          CXT_ID, t.name, key, a.name, data, std.BmAddEntryOptions())

    @staticmethod
    def _param_kinds(table: str, action: str, n: int) -> list[Optional[str]]:
        """Parameter kinds (int/mac/ip) from ``pipeline.SCHEMA``; ``None`` = guess from the text."""
        spec = SCHEMA.get(table)
        if spec is not None and action in spec.actions:
            return [kind for _, kind in spec.actions[action].params]
        return [None] * n

    def table_delete(self, table: str, handle: int) -> None:
        t = self.program.table(table)
        self._call(f"table_delete {table} {handle}", self.client.bm_mt_delete_entry, CXT_ID, t.name, int(handle))

    def table_clear(self, table: str) -> None:
        t = self.program.table(table)
        self._call(f"table_clear {table}", self.client.bm_mt_clear_entries, CXT_ID, t.name, False)

    def table_entries(self, table: str) -> list[dict[str, Any]]:
        """``[{"match": [ints], "action": short name, "params": [ints]}]``, sorted by match,
        like ``SplitterPipeline.table_entries``."""
        t = self.program.table(table)
        out = []
        for e in self._call(f"table_entries {table}", self.client.bm_mt_get_entries, CXT_ID, t.name):
            match = [int.from_bytes(p.exact.key, "big") for p in e.match_key]
            act = e.action_entry
            out.append({"match": match, "action": short_name(act.action_name),
                        "params": [int.from_bytes(d, "big") for d in act.action_data]})
        return sorted(out, key=lambda e: e["match"])

    # -- multicast (packet replication engine) ------------------------------
    def mc_mgrp_create(self, mgid: int) -> int:
        handle = self._call(f"mc_mgrp_create {mgid}", self.mc.bm_mc_mgrp_create, CXT_ID, int(mgid))
        self._mgrp_handles[int(mgid)] = handle
        return handle

    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int:
        """An L1 node replicating to ``ports``; bmv2 wants them as a bitmap string, port 0 last."""
        ports = sorted({int(p) for p in ports})
        port_map = "".join("1" if p in ports else "0" for p in range(max(ports) + 1))[::-1] if ports else ""
        return self._call(f"mc_node_create {rid} {ports}", self.mc.bm_mc_node_create,
                          CXT_ID, int(rid), port_map, "")

    def mc_node_associate(self, mgid: int, handle: int) -> None:
        group = self._mgrp_handles.get(int(mgid), int(mgid))
        self._call(f"mc_node_associate {mgid} {handle}", self.mc.bm_mc_node_associate,
                   CXT_ID, group, int(handle))

    def mc_dump(self) -> dict[int, list[tuple[int, list[int]]]]:
        """``mgid -> [(rid, ports), ...]`` like ``SplitterPipeline.mc_dump``."""
        dump = json.loads(self._call("mc_dump", self.mc.bm_mc_get_entries, CXT_ID))
        l1 = {h["handle"]: (h["rid"], h["l2_handle"]) for h in dump["l1_handles"]}
        l2 = {h["handle"]: sorted(h["ports"]) for h in dump["l2_handles"]}
        out = {}
        for g in dump["mgrps"]:
            out[g["id"]] = [(l1[h][0], l2[l1[h][1]]) for h in g["l1_handles"]]
        return dict(sorted(out.items()))

    # -- registers ----------------------------------------------------------
    def register_read(self, name: str, index: Optional[int] = None):
        """One cell, or the whole array when ``index`` is None.

        bmv2 returns register cells as signed 64-bit Thrift integers; they are
        masked back to the register's width, which is exact below 2**63.
        """
        r = self.program.register(name)
        mask = (1 << r.bitwidth) - 1
        if index is None:
            cells = self._call(f"register_read {name}", self.client.bm_register_read_all, CXT_ID, r.name)
            return [v & mask for v in cells]
        return self._call(f"register_read {name}[{index}]", self.client.bm_register_read,
                          CXT_ID, r.name, int(index)) & mask

    def register_write(self, name: str, index: int, value: int) -> None:
        r = self.program.register(name)
        value = int(value) & ((1 << r.bitwidth) - 1)
        if value >= 1 << 63:            # Thrift i64 is signed
            value -= 1 << 64
        self._call(f"register_write {name}[{index}]", self.client.bm_register_write,
                   CXT_ID, r.name, int(index), value)

    def register_reset(self, name: str) -> None:
        r = self.program.register(name)
        self._call(f"register_reset {name}", self.client.bm_register_reset, CXT_ID, r.name)

    # -- counters -----------------------------------------------------------
    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """``(bytes, packets)``."""
        c = self.program.counter(name)
        v = self._call(f"counter_read {name}[{index}]", self.client.bm_counter_read, CXT_ID, c.name, int(index))
        return v.bytes, v.packets

    def counter_reset(self, name: str) -> None:
        c = self.program.counter(name)
        self._call(f"counter_reset {name}", self.client.bm_counter_reset_all, CXT_ID, c.name)


# ----------------------------------------------------------------------
# the switch process
# ----------------------------------------------------------------------
def notifications_address(run_dir: Path, name: str) -> str:
    """Where simple_switch puts its nanomsg notifications socket.

    Its default, ``/tmp/bmv2-<device-id>-notifications.ipc``, is shared by
    every switch with the same device id; this one lives in the run
    directory, or in a private temporary file when that path is too long
    for a Unix socket (registered for ``testbed clean``).
    """
    path = Path(run_dir).resolve() / f"{name}-notifications.ipc"
    if len(str(path)) > MAX_IPC_PATH:
        fd, tmp = tempfile.mkstemp(prefix=f"bmv2-{name}-", suffix=".ipc")
        os.close(fd)
        os.unlink(tmp)
        register_path(tmp)
        path = Path(tmp)
    return f"ipc://{path}"


def bmv2_log_path(run_dir: Path, name: str) -> Path:
    """bmv2's own log file.  ``--log-file X`` makes bmv2 write ``X.txt``
    (its rotating file sink adds the extension), so X is this minus ``.txt``."""
    return Path(run_dir) / f"{name}.bmv2.txt"


def simple_switch_command(json_path: Path, ports: dict[int, str], thrift_port: int, run_dir: Path,
                          name: str, device_id: int = 0, log_level: str = DEFAULT_LOG_LEVEL) -> list[str]:
    """The ``simple_switch`` command line for one switch.

    bmv2's log goes to ``bmv2_log_path(run_dir, name)`` at ``log_level``
    (bmv2 levels: trace, debug, info, warn, error, off); nothing is logged
    to the console.
    """
    switch = p4build.find_tool(p4build.SWITCH)
    if switch is None:
        raise SwitchNotReady(p4build.toolchain_missing() or "simple_switch not found")
    run_dir = Path(run_dir)
    cmd = [switch, "--device-id", str(device_id), "--thrift-port", str(thrift_port),
           "--log-file", str(bmv2_log_path(run_dir, name).with_suffix("")), "--log-level", log_level,
           "--notifications-addr", notifications_address(run_dir, name)]
    for port, intf in sorted(ports.items()):
        cmd += ["-i", f"{port}@{intf}"]
    cmd.append(str(json_path))
    return cmd


class Bmv2Process:
    """A ``simple_switch`` outside Mininet, on interfaces that already exist.

    For tests and benchmarks: ``start()`` compiles the program if needed and
    returns once the Thrift port listens; ``stop()`` ends the process.
    """

    def __init__(self, ports: dict[int, str], run_dir: Path, name: str = "bmv2",
                 thrift_port: Optional[int] = None, device_id: int = 0,
                 log_level: str = DEFAULT_LOG_LEVEL, json_path: Optional[Path] = None,
                 namespace: Optional[netns.NamedNamespace] = None):
        """``namespace`` holds the port interfaces; the switch runs in it so
        that its Thrift server is reachable only there, over loopback."""
        self.namespace = namespace
        self.ports = dict(ports)
        self.run_dir = Path(run_dir)
        self.name = name
        self.thrift_port = thrift_port or free_loopback_port()
        self.device_id = device_id
        self.log_level = log_level
        self.json_path = Path(json_path) if json_path else None
        self.proc: Optional[subprocess.Popen] = None
        self.console_log = self.run_dir / f"{name}.console.log"

    def start(self, timeout: float = 30.0) -> "Bmv2Process":
        self.json_path = self.json_path or p4build.compile_program()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        cmd = simple_switch_command(self.json_path, self.ports, self.thrift_port, self.run_dir,
                                    self.name, self.device_id, self.log_level)
        if self.namespace is not None:
            cmd = self.namespace.prefix() + cmd
        with open(self.console_log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        register_pid(self.proc.pid, f"bmv2 {self.name}")
        try:
            wait_ready(self.proc, self._listening, f"simple_switch (Thrift port {self.thrift_port})",
                       timeout, self.console_log, SwitchNotReady)
        except SwitchNotReady:
            self.stop()
            raise
        return self

    def _listening(self) -> bool:
        if self.namespace is not None:
            return netns.listening(self.namespace.path, self.thrift_port)
        return port_listening(self.thrift_port)

    def api(self) -> Bmv2API:
        return Bmv2API(self.thrift_port, self.json_path,
                       netns_path=self.namespace.path if self.namespace else None)

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> "Bmv2Process":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class Bmv2Switch(SplitterSwitch):
    """Mininet switch node running the splitter on bmv2's ``simple_switch``.

    Extra parameters: ``json_path`` (default: compile ``p4/splitter.p4`` into
    ``build/``) and ``log_level`` (default ``warn``).  bmv2's log goes to
    ``<run_dir>/logs/<name>.bmv2.txt``, the process's own output to
    ``<run_dir>/logs/<name>.log``.
    """

    target = "bmv2"

    def __init__(self, name: str, run_dir: str, json_path: Optional[str] = None,
                 log_level: str = DEFAULT_LOG_LEVEL, **kwargs: Any):
        # In a namespace of its own: simple_switch's Thrift server binds every
        # interface, and there the only address is loopback's.  (Mininet's
        # addSwitch passes its own inNamespace=False, hence the override.)
        kwargs["inNamespace"] = True
        super().__init__(name, run_dir, **kwargs)
        self.json_path = Path(json_path) if json_path else None
        self.log_level = log_level

    @classmethod
    def available(cls) -> Optional[str]:
        return p4build.toolchain_missing()

    def command(self) -> list[str]:
        self.json_path = self.json_path or p4build.compile_program()
        return simple_switch_command(self.json_path, self.port_map(), self.control_port,
                                     self.log_path.parent, self.name, self.device_id, self.log_level)

    def versions(self) -> dict[str, str]:
        found = p4build.versions()
        return {"simple_switch": found["simple_switch"], "p4c": found["p4c"]}

    def control_api(self) -> Bmv2API:
        return Bmv2API(self.control_port, self.json_path,
                       netns_path=self.netns_path if self.inNamespace else None)
