"""``Bmv2API``: the contract's control API over bmv2's Thrift services.

It takes the contract's short names and maps them to bmv2's qualified ones
through ``ProgramInfo``.  It talks to the switch with bmv2's own Python
Thrift modules (``bm_runtime``), found through ``toolchain``.  The switch's
Thrift server binds every interface, so the switch runs in a namespace of
its own and the client connects from inside it (``netns_path``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from testbed.dataplane.contract import param_kinds, to_bytes, to_int
from testbed.emulation import netns
from testbed.targets.bmv2 import toolchain
from testbed.targets.bmv2.program import ProgramInfo, short_name

#: Context id of the single P4 program in a bmv2 switch.
CXT_ID = 0
#: Requests a pipelined exchange sends before it reads their replies: the replies
#: of a chunk fit the socket buffers, so neither side ever waits on the other's.
PIPELINED = 512
THRIFT_TIMEOUT_MS = 30_000


def port_bitmap(ports: Sequence[int]) -> str:
    """Ports as the bitmap string bmv2's multicast nodes take, port 0 last."""
    chosen = {int(p) for p in ports}
    return "".join("1" if p in chosen else "0" for p in range(max(chosen) + 1))[::-1] if chosen else ""


class Bmv2Error(RuntimeError):
    """A control operation bmv2 refused; ``str()`` names the operation and bmv2's error code."""


def _thrift_modules():
    """bmv2's generated Thrift modules, imported on first use."""
    toolchain.add_bmv2_python_path()
    from bm_runtime.simple_pre_lag import SimplePreLAG
    from bm_runtime.simple_pre_lag import ttypes as pre_types
    from bm_runtime.standard import Standard
    from bm_runtime.standard import ttypes as std_types
    from sswitch_runtime import SimpleSwitch
    from sswitch_runtime import ttypes as sswitch_types
    from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
    from thrift.transport import TSocket, TTransport
    return {"Standard": Standard, "SimplePreLAG": SimplePreLAG, "std": std_types, "pre": pre_types,
            "SimpleSwitch": SimpleSwitch, "sswitch": sswitch_types,
            "TSocket": TSocket, "TTransport": TTransport, "TBinaryProtocol": TBinaryProtocol,
            "TMultiplexedProtocol": TMultiplexedProtocol}


def pipelined(call: Callable[..., Any], calls: Sequence[tuple[str, Any, Any, tuple]]) -> tuple[list[Any], Any]:
    """``(what, send, recv, args)`` Thrift calls, ``PIPELINED`` sent before
    their replies are read (``call(what, recv)`` reads one).  Returns each
    reply (``None`` where refused) and the first refusal; every reply of a
    chunk is read even after a refusal, so the connection stays in step, and
    no later chunk is sent."""
    out: list[Any] = []
    for start in range(0, len(calls), PIPELINED):
        chunk = calls[start:start + PIPELINED]
        for _what, send, _recv, args in chunk:
            send(*args)
        refused = None
        for what, _send, recv, _args in chunk:
            try:
                out.append(call(what, recv))
            except Bmv2Error as err:
                out.append(None)
                refused = refused or err
        if refused is not None:
            return out, refused
    return out, None


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
        self.sswitch = m["SimpleSwitch"].Client(mux(proto, "simple_switch"))
        self._sswitch_types = m["sswitch"]
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
        except self._sswitch_types.InvalidMirroringOperation as err:
            code = self._sswitch_types.MirroringOperationErrorCode._VALUES_TO_NAMES.get(err.code, err.code)
        raise Bmv2Error(f"{what}: {code}")

    # -- tables -------------------------------------------------------------
    def _entry_args(self, table: str, action: str, match_keys: Sequence[Any],
                    action_params: Sequence[Any] = ()) -> tuple:
        """``bm_mt_add_entry``'s arguments for one entry, checked as ``table_add`` promises."""
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
                                exact=std.BmMatchParamExact(to_bytes(to_int(v), w, f"{table} key")))
               for v, w in zip(match_keys, t.key_widths)]
        kinds = param_kinds(short_name(t.name), short_name(a.name)) or [None] * len(a.param_widths)
        data = [to_bytes(to_int(v, kind), w, f"{action}({name})")
                for v, kind, w, name in zip(action_params, kinds, a.param_widths, a.param_names)]
        return (CXT_ID, t.name, key, a.name, data, std.BmAddEntryOptions())

    def table_add(self, table: str, action: str, match_keys: Sequence[Any],
                  action_params: Sequence[Any] = ()) -> int:
        """Add an exact-match entry; values may be ints or strings (MAC, IPv4, decimal, 0x..)."""
        return self._call(f"table_add {table} {action} {list(match_keys)}", self.client.bm_mt_add_entry,
                          *self._entry_args(table, action, match_keys, action_params))

    def table_add_many(self, entries: Sequence[Sequence[Any]]) -> list[int]:
        """``table_add`` of each entry, ``pipelined``: a chunk of
        entries costs one round trip, not one per entry.  bmv2 serves one
        connection's requests in order."""
        calls = []
        for table, action, match_keys, *params in entries:
            calls.append((f"table_add {table} {action} {list(match_keys)}", self.client.send_bm_mt_add_entry,
                          self.client.recv_bm_mt_add_entry, self._entry_args(table, action, match_keys, *params)))
        handles, refused = pipelined(self._call, calls)
        if refused:
            raise refused
        return handles

    def table_delete(self, table: str, handle: int) -> None:
        t = self.program.table(table)
        self._call(f"table_delete {table} {handle}", self.client.bm_mt_delete_entry, CXT_ID, t.name, int(handle))

    def takes_changes(self) -> bool:
        """False on the build without changes (``p4/splitter_fixed.p4``), which
        has no ``previous_spec`` table, nor any other of a transition."""
        return any(short_name(name) == "previous_spec" for name in self.program.tables)

    def held_tables(self) -> list[str]:
        """The tables the running build holds: each build lacks some of the contract's."""
        return [short_name(name) for name in self.program.tables]

    def table_clear(self, table: str) -> None:
        t = self.program.table(table)
        self._call(f"table_clear {table}", self.client.bm_mt_clear_entries, CXT_ID, t.name, False)

    def table_entries(self, table: str) -> list[dict[str, Any]]:
        """``[{"handle", "match": [ints], "action": short name, "params": [ints]}]``, sorted by match,
        like ``SplitterPipeline.table_entries``."""
        t = self.program.table(table)
        out = []
        for e in self._call(f"table_entries {table}", self.client.bm_mt_get_entries, CXT_ID, t.name):
            match = [int.from_bytes(p.exact.key, "big") for p in e.match_key]
            act = e.action_entry
            out.append({"handle": e.entry_handle, "match": match, "action": short_name(act.action_name),
                        "params": [int.from_bytes(d, "big") for d in act.action_data]})
        return sorted(out, key=lambda e: e["match"])

    # -- multicast (packet replication engine) ------------------------------
    def mc_mgrp_create(self, mgid: int) -> int:
        handle = self._call(f"mc_mgrp_create {mgid}", self.mc.bm_mc_mgrp_create, CXT_ID, int(mgid))
        self._mgrp_handles[int(mgid)] = handle
        return handle

    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int:
        """An L1 node replicating to ``ports``; bmv2 wants them as a bitmap string, port 0 last."""
        return self._call(f"mc_node_create {rid} {sorted(ports)}", self.mc.bm_mc_node_create,
                          CXT_ID, int(rid), port_bitmap(ports), "")

    def mc_node_associate(self, mgid: int, handle: int) -> None:
        group = self._mgrp_handles.get(int(mgid), int(mgid))
        self._call(f"mc_node_associate {mgid} {handle}", self.mc.bm_mc_node_associate,
                   CXT_ID, group, int(handle))

    def mc_mgrp_create_many(self, groups: Sequence[Sequence[Any]]) -> list[list[int]]:
        """Every group, then every node, then every association, each step
        ``pipelined``: three round trips per chunk, not one per call.  A
        node's association needs its handle, hence the steps.  After a refused
        node the nodes made are still associated, so everything this call
        created shows in ``mc_dump`` for whoever clears the switch."""
        mc = self.mc
        groups = [(int(mgid), [(int(rid), list(ports)) for rid, ports in nodes]) for mgid, nodes in groups]
        made, refused = pipelined(self._call, [(f"mc_mgrp_create {mgid}", mc.send_bm_mc_mgrp_create,
                                                mc.recv_bm_mc_mgrp_create, (CXT_ID, mgid)) for mgid, _ in groups])
        self._mgrp_handles.update((mgid, h) for (mgid, _), h in zip(groups, made) if h is not None)
        if refused:
            raise refused
        nodes = [(mgid, rid, ports) for mgid, members in groups for rid, ports in members]
        handles, refused = pipelined(self._call, [
            (f"mc_node_create {rid} {sorted(ports)}", mc.send_bm_mc_node_create, mc.recv_bm_mc_node_create,
             (CXT_ID, rid, port_bitmap(ports), "")) for _mgid, rid, ports in nodes])
        _, refused_too = pipelined(self._call, [
            (f"mc_node_associate {mgid} {handle}", mc.send_bm_mc_node_associate, mc.recv_bm_mc_node_associate,
             (CXT_ID, self._mgrp_handles[mgid], handle))
            for (mgid, _rid, _ports), handle in zip(nodes, handles) if handle is not None])
        if refused or refused_too:
            raise refused or refused_too
        out, at = [], 0
        for _mgid, members in groups:
            out.append(handles[at:at + len(members)])
            at += len(members)
        return out

    def mc_node_destroy(self, handle: int) -> None:
        self._call(f"mc_node_destroy {handle}", self.mc.bm_mc_node_destroy, CXT_ID, int(handle))

    def mc_mgrp_destroy(self, mgid: int) -> None:
        group = self._mgrp_handles.pop(int(mgid), int(mgid))
        self._call(f"mc_mgrp_destroy {mgid}", self.mc.bm_mc_mgrp_destroy, CXT_ID, group)

    def mc_dump(self) -> dict[int, list[dict[str, Any]]]:
        """``mgid -> [{"handle", "rid", "ports"}, ...]`` like ``SplitterPipeline.mc_dump``."""
        dump = json.loads(self._call("mc_dump", self.mc.bm_mc_get_entries, CXT_ID))
        l1 = {h["handle"]: (h["rid"], h["l2_handle"]) for h in dump["l1_handles"]}
        l2 = {h["handle"]: sorted(h["ports"]) for h in dump["l2_handles"]}
        out = {}
        for g in dump["mgrps"]:
            out[g["id"]] = [{"handle": h, "rid": l1[h][0], "ports": l2[l1[h][1]]} for h in g["l1_handles"]]
        return dict(sorted(out.items()))

    # -- mirroring (simple_switch's own service) --------------------------------
    def mirroring_add_mc(self, session: int, mgid: int) -> None:
        config = self._sswitch_types.MirroringSessionConfig(mgid=int(mgid))
        self._call(f"mirroring_add_mc {session} {mgid}", self.sswitch.mirroring_session_add, int(session), config)

    def set_queue_depth(self, packets: int) -> None:
        """Every egress queue's depth (simple_switch_CLI's ``set_queue_depth``; 64 by default).
        simple_switch drops a packet whose queue is full and counts it nowhere."""
        self.sswitch.set_all_egress_queue_depths(int(packets))

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
