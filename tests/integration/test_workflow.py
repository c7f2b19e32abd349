"""The researcher's workflow on real runs: Mininet's CLI, the switch's CLI,
the Wireshark dissector, the Python API and ``testbed compare``.

Everything runs on the embedded target, and on bmv2 where the toolchain
exists (those cases skip with its reason otherwise).  One run with Spark
and captures (``reference_run``) serves the API, dissector and compare tests.
"""
from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from support import runtime_output, topologies
from support.records import written
from testbed import ROOT, api
from testbed.analysis.spark import spark_missing
from testbed.dataplane.contract import NOT_FIXED, SCHEMA
from testbed.dataplane.control import Controller
from testbed.dataplane.model import SplitterPipeline
from testbed.dataplane.wire import (
    EVENT_UDP_PORT,
    Batch,
    ComplexEvents,
    Event,
    FrameTemplate,
    Windows,
    complex_events_frame,
)
from testbed.emulation.network import mininet_missing
from testbed.rundir import RunDir
from testbed.semantics.plan import TRANSITION, SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, load_topology
from testbed.targets.bmv2.toolchain import toolchain_missing

pytestmark = pytest.mark.mininet
MISSING = mininet_missing()
needs_mininet = pytest.mark.skipif(MISSING is not None, reason=f"emulation skipped: {MISSING}")
BMV2_MISSING = toolchain_missing()
needs_bmv2 = pytest.mark.skipif(BMV2_MISSING is not None, reason=f"bmv2 toolchain: {BMV2_MISSING}")
on_bmv2 = pytest.param("bmv2", marks=[pytest.mark.bmv2, needs_bmv2])
DISSECTOR = ROOT / "tools" / "wireshark" / "testbed_event.lua"
EVENT_FIELDS = ("stream", "flags", "seq", "ts", "key", "value")


def workflow_topology(folder: Path, switch: str) -> Path:
    """Two streams from one source: count sliding (unkeyed sum) and time tumbling (keyed, NEXMark Q7)."""
    streams = [
        topologies.stream(5, {"kind": "count", "size": 5, "slide": 2}, ["op1", "op2", "op3"], source="src",
                          events=300, rate=1500, query={"kind": "sum"}),
        topologies.stream(7, {"kind": "time", "size": 40, "slide": 40}, ["op2", "op3"], source="src",
                          events=200, rate=1000, timestamps={"start": 0, "step": 1}, query={"kind": "nexmark_q7"}),
    ]
    data = topologies.topology_data(streams, ["src", "op1", "op2", "op3"], name="wf" + switch, switch=switch)
    folder.mkdir(parents=True, exist_ok=True)
    return topologies.write(folder / "topo.yaml", data)


def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, **kw)


def interfaces_left(switch: str) -> list[str]:
    return [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(switch + "-")]


class InteractiveRun:
    """``testbed run --cli...`` in the background: commands go to its standard
    input, and its standard output shows the CLI's prompt (the log goes to stderr)."""

    PROMPT = b"mininet> "

    def __init__(self, topo: Path, out: Path, *args: str):
        self.err_path = out.parent / f"{out.name}.stderr"
        self.err = open(self.err_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "run", str(topo), "--out", str(out),
                                      "--no-spark", *args], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err)
        self.stdout = b""

    def wait_prompt(self, timeout: float = 120) -> None:
        """Until the CLI prompts for a command (checked, not slept)."""
        fd = self.proc.stdout.fileno()
        while self.PROMPT not in self.stdout:
            ready, _, _ = select.select([fd], [], [], timeout)
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                self.proc.kill()
                pytest.fail(f"no CLI prompt; stderr:\n{self.err_path.read_text()[-3000:]}")
            self.stdout += chunk

    def finish(self, script: str, timeout: float = 120) -> tuple[int, str]:
        """Send the rest of the script, close its input; the exit code and stderr."""
        out, _ = self.proc.communicate(script.encode(), timeout=timeout)
        self.stdout += out
        self.err.close()
        return self.proc.returncode, self.err_path.read_text()


# ----------------------------------------------------------------------
# testbed run --cli
# ----------------------------------------------------------------------
@needs_mininet
def test_cli_streams_on_command_and_the_run_finishes_when_left(tmp_path):
    topo = workflow_topology(tmp_path, "w2")
    out = tmp_path / "run"
    script = "status\nop1 ip -br link show op1-eth0\nstream\nstream\nstatus\nexit\n"
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(topo), "--out", str(out), "--no-spark",
                          "--cli"], cwd=ROOT, input=script, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("mininet> ") == 6            # one prompt per command
    before, after = res.stderr.split("events sent", 1)
    assert "stream 5: sent 0/300; switch: in 0" in before
    assert "op1-eth0" in before and "UP" in before        # a host command ran on the host
    assert "the run has streamed already" in after
    assert "stream 5: sent 300/300; switch: in 300" in after and "stream 7: sent 200/200" in after
    record = written(RunDir(out))
    assert record["ok"] is True and record["phases_s"]["cli"] > 0
    assert f"received: op1 {record['accounting']['streams']['5']['received_per_operator']['op1']}, " in after
    assert interfaces_left("w2") == []


@needs_mininet
@pytest.mark.skipif(spark_missing() is not None, reason=f"Spark skipped: {spark_missing()}")
def test_cli_status_shows_the_windows_emitted_and_each_operators_lag(tmp_path):
    topo = workflow_topology(tmp_path, "w6")
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(topo), "--out", str(out), "--cli"],
                         cwd=ROOT, input="stream\nstatus\nexit\n", capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    after = res.stderr.split("events sent", 1)[1]
    assert re.search(r"windows emitted \d+ · largest lag op\d ", after)
    record = written(RunDir(out))
    for host in record["accounting"]["streams"]["5"]["received_per_operator"]:
        assert re.search(rf"  {host}: received \d+, processed by Spark \d+, lag \d+ events", after), host
    assert json.loads(RunDir(out).spark_analysis.read_text())["live"]["mismatched"] == 0
    # how far Spark fell behind over the run, beside what the switch lost meanwhile
    lag = RunDir(out).read_verdicts().spark_lag
    assert lag is not None and lag.micro_batches >= 1 and lag.switch_lost == 0
    assert lag.result_p99_s >= lag.result_p50_s > 0 and lag.max_lag_s >= 0
    assert re.search(r"operators: Spark (kept up|fell behind) \(lag up to ", res.stderr)


@needs_mininet
def test_leaving_the_cli_before_stream_fails_the_run_and_cleans_up(tmp_path):
    topo = workflow_topology(tmp_path, "w5")
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "testbed.cli", "run", str(topo), "--out", str(out), "--no-spark",
                          "--cli"], cwd=ROOT, input="", capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "the CLI was left before `stream`" in res.stderr
    assert "RunError" in written(RunDir(out))["error"]
    state = Path(os.environ["TESTBED_STATE_DIR"])          # this test's own (conftest.state_dir)
    assert interfaces_left("w5") == [] and state.is_dir() and list(state.glob("*.json")) == []


# ----------------------------------------------------------------------
# testbed switch-cli
# ----------------------------------------------------------------------
@needs_mininet
@pytest.mark.parametrize("target", ["model", on_bmv2])
def test_switch_cli_reads_what_plan_and_accounting_predict(tmp_path, target):
    switch = {"model": "w3", "bmv2": "w4"}[target]
    topo_path = workflow_topology(tmp_path, switch)
    topo = load_topology(topo_path)
    plan = SplitterPlan(topo)
    ports = sorted(plan.ports[h] for h in topo.operator_hosts())
    out = tmp_path / "run"
    # Nothing in the topology changes a stream, so bmv2 runs its build without
    # changes, which has no transition tables, egress_rewrite nor
    # operator_position (the model has every table).
    assert not topo.changes_streams()
    tables = [t for t in SCHEMA if target == "model" or t not in TRANSITION + NOT_FIXED]
    script = "".join(f"table_dump {t}\n" for t in tables) + "mc_dump\n"
    script += "".join(f"counter_read stream_in {s.id}\ncounter_read stream_out {s.id}\n" for s in topo.streams)
    script += "".join(f"counter_read operator_out {p}\n" for p in ports)

    run = InteractiveRun(topo_path, out, "--cli=after", "--target", target)
    try:
        run.wait_prompt()                     # streamed; the CLI is open
        newest = run_cli("switch-cli", input=script, timeout=60)
        named = run_cli("switch-cli", str(out), input="counter_read non_event 0\n", timeout=60)
    finally:
        code, stderr = run.finish("exit\n")
    assert code == 0, stderr[-3000:]
    assert newest.returncode == 0 and named.returncode == 0, newest.stderr + named.stderr
    printed = newest.stdout

    # the tables and groups `testbed plan` predicts
    planned = runtime_output.planned_tables(plan)
    dumps = runtime_output.table_dumps(printed)
    assert len(dumps) == len(tables)
    for table, dump in zip(tables, dumps):
        assert len({e["handle"] for e in dump}) == len(dump)
        assert sorted(({k: v for k, v in e.items() if k != "handle"} for e in dump),
                      key=lambda e: e["match"]) == planned[table], table
    assert runtime_output.groups(printed) == {g.mgid: [(rid, list(ports)) for rid, ports in g.nodes]
                                              for g in plan.groups}

    # the counters the run's accounting reports
    counters = runtime_output.counters(printed)
    accounting = written(RunDir(out))["accounting"]
    for s in topo.streams:
        acct = accounting["streams"][str(s.id)]
        assert acct["lost"] == 0
        assert counters[("stream_in", s.id)][1] == acct["switch_accepted"] == s.events
        assert counters[("stream_out", s.id)][1] == acct["switch_copies_out"]
    for host, port in plan.ports.items():
        if port in ports:
            received = sum(a["received_per_operator"].get(host, 0) for a in accounting["streams"].values())
            assert counters[("operator_out", port)][1] == received > 0
    assert runtime_output.counters(named.stdout) == {("non_event", 0): (0, 0)}

    # once the run is over there is nothing to attach to
    after = run_cli("switch-cli", str(out), input="")
    assert after.returncode == 2 and "not a running run" in after.stderr
    assert interfaces_left(switch) == []


# ----------------------------------------------------------------------
# one run with Spark and captures, through the Python API
# ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    """The workflow topology run in this process by ``api.run``, with Spark when it exists."""
    if MISSING is not None:
        pytest.skip(f"emulation skipped: {MISSING}")
    folder = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TESTBED_STATE_DIR", str(folder / "state"))
        result = api.run(workflow_topology(folder, "w1"), target="model", out=folder / "run",
                         spark=spark_missing() is None, spark_master="local[2]", pcap=True)
    return result


def test_api_returns_the_runs_data_as_dataframes(reference_run):
    run = reference_run
    assert run.ok and run.target == "model" and run.name == "wfw1"
    assert api.load(run.path).record == run.record
    assert len(run.sources) == 500 and set(run.sources["stream"]) == {5, 7}
    acct = run.accounting["streams"]
    copies = sum(a["switch_copies_out"] for a in acct.values())
    assert len(run.deliveries) == copies == run.record.expected_deliveries
    load = run.load()
    assert list(load.index) == ["op1", "op2", "op3"]
    for sid, a in acct.items():
        column = run.record.streams[sid].get("name") or sid
        assert load[column].to_dict() == {op: a["received_per_operator"].get(op, 0) for op in load.index}
    assert list(run.checks.index) == [5, 7] and run.checks["ok"].all()
    assert (run.checks["missing"] == 0).all() and (run.checks["delivered"] == run.checks["expected_deliveries"]).all()
    if spark_missing() is None:
        assert run.windows is not None and len(run.windows) == len(run.reference)
        assert run.window_checks["ok"].all()
        assert run.window_checks.loc[7, "reference_windows"] == run.reference[run.reference["stream"] == 7].shape[0]
    assert (run.latency()["latency_us"] > 0).all()


def test_api_lists_an_experiments_runs(reference_run, tmp_path):
    results = tmp_path / "results"
    for stamp in ("20240101-000000", "20240102-000000"):
        expdir = results / "wfexp" / stamp
        shutil.copytree(reference_run.path, expdir / "runs" / "wfw1", ignore=shutil.ignore_patterns("pcaps"))
        (expdir / "experiment.json").write_text(
            '{"kind": "scenarios", "ours": {"runs": {"wfw1": {"ok": true, "run_dir": "runs/wfw1"}}}}')
    runs = api.experiment("wfexp", results=results)
    assert list(runs) == ["wfw1"]
    assert runs["wfw1"].path == (results / "wfexp" / "20240102-000000" / "runs" / "wfw1").resolve()
    assert runs["wfw1"].load().equals(reference_run.load())


def tshark_fields(pcap: Path) -> list[tuple[int, ...]]:
    res = subprocess.run(["tshark", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), "-Y", "event",
                          "-T", "fields", *[arg for f in EVENT_FIELDS for arg in ("-e", f"event.{f}")]],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [tuple(int(v, 0) for v in line.split("\t")) for line in res.stdout.splitlines()]


def scapy_fields(pcap: Path) -> list[tuple[int, ...]]:
    return [tuple(Ether(bytes(p))[Event].getfieldval(f) for f in EVENT_FIELDS) for p in rdpcap(str(pcap))]


WINDOWS_FIELDS = ("window", "span", "stride", "epoch", "old_window", "old_span", "old_stride")


def tshark_windows(pcap: Path) -> list[tuple[int, ...]]:
    res = subprocess.run(["tshark", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), "-Y", "event.windows.window",
                          "-T", "fields", *[arg for f in WINDOWS_FIELDS for arg in ("-e", f"event.windows.{f}")]],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [tuple(int(v, 0) for v in line.split("\t")) for line in res.stdout.splitlines()]


def scapy_windows(pcap: Path) -> list[tuple[int, ...]]:
    return [tuple(Ether(bytes(p))[Windows].getfieldval(f) for f in WINDOWS_FIELDS) for p in rdpcap(str(pcap))
            if Windows in Ether(bytes(p))]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (apt-get install tshark)")
def test_the_wireshark_dissector_reads_what_scapy_reads(reference_run, tmp_path):
    pcaps = sorted(reference_run.rundir.pcaps.glob("*.pcap"))
    assert len(pcaps) == 4
    decoded = 0
    for pcap in pcaps:
        fields = tshark_fields(pcap)
        assert fields == scapy_fields(pcap), pcap.name
        decoded += len(fields)
    copies = sum(a["switch_copies_out"] for a in reference_run.accounting["streams"].values())
    assert decoded == len(reference_run.sources) + copies      # the source's port, and every copy out
    # every copy's Windows header, read alike by both
    headers = [h for pcap in pcaps for h in tshark_windows(pcap)]
    assert headers == [h for pcap in pcaps for h in scapy_windows(pcap)]
    assert len(headers) == copies and all(span >= 1 and stride >= 1 for _, span, stride, *_ in headers)
    # the edges of every field: flags set, widest values, signed extremes
    edges = [Ether() / IP(src="10.0.0.1", dst="10.0.0.254") / UDP(sport=EVENT_UDP_PORT, dport=EVENT_UDP_PORT)
             / Event(stream=0xFFFF, flags=flags, seq=2**32 - 1, ts=2**64 - 1, key=2**63 + 5, value=value)
             for flags, value in ((0, -(2**63)), (0x8001, -1), (1, 0), (0xFFFF, 2**63 - 1))]
    wrpcap(str(tmp_path / "edges.pcap"), edges)
    fields = tshark_fields(tmp_path / "edges.pcap")
    assert fields == scapy_fields(tmp_path / "edges.pcap")
    assert fields[1] == (0xFFFF, 0x8001, 2**32 - 1, 2**64 - 1, 2**63 + 5, -1)


BATCH_FIELDS = ("eventbatch.count", "event.seq", "event.ts", "event.key", "event.value",
                "event.windows.window", "event.windows.span", "event.windows.stride")


def tshark_batches(pcap: Path) -> list[tuple]:
    """Per frame, the batch's count and each field's values over its events."""
    res = subprocess.run(["tshark", "-X", f"lua_script:{DISSECTOR}", "-r", str(pcap), "-Y", "eventbatch",
                          "-T", "fields", *[arg for f in BATCH_FIELDS for arg in ("-e", f)]],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [tuple(tuple(int(v, 0) for v in column.split(",") if v) for column in line.split("\t"))
            for line in res.stdout.splitlines()]


def scapy_batches(pcap: Path) -> list[tuple]:
    out = []
    for p in rdpcap(str(pcap)):
        layer = Ether(bytes(p))[Batch]
        events = layer.events
        windows = [e[Windows] for e in events if Windows in e]
        out.append(((layer.count,), *(tuple(e.getfieldval(f) for e in events) for f in ("seq", "ts", "key", "value")),
                    *(tuple(h.getfieldval(f) for h in windows) for f in ("window", "span", "stride"))))
    return out


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (apt-get install tshark)")
def test_the_wireshark_dissector_reads_batches_as_scapy_does(tmp_path):
    """A source's batches and the splitter's copies of them (the model's),
    with the widest and signed extreme values, read alike by both."""
    topo = topologies.build([{**topologies.stream(3, {"kind": "count", "size": 5, "slide": 1}, ["h2", "h3", "h4"]),
                              "batch": {"events": 16, "max_delay": 0.01}}], 4)
    plan = SplitterPlan(topo)
    switch = SplitterPipeline()
    Controller(switch).install(plan)
    ip, mac = plan.addresses["h1"]
    template = FrameTemplate(mac, "02:00:00:00:00:fe", ip, SPLITTER_IP, 3)
    batches = [[(i, 2**64 - 1 - i, 2**63 + i, -(2**63) + i) for i in range(16)],
               [(16 + i, i, i, 2**63 - 1 - i) for i in range(5)], [(21, 0, 0, 0)]]
    frames = []
    for events in batches:
        frame = template.batch(events)
        frames += [frame, *(copy for _port, copy in switch.process(frame))]
    wrpcap(str(tmp_path / "batches.pcap"), [Ether(f) for f in frames])
    read = tshark_batches(tmp_path / "batches.pcap")
    assert read == scapy_batches(tmp_path / "batches.pcap")
    assert len(read) == len(frames) > 3 * len(batches)
    assert read[0][0] == (16,) and read[0][4][0] == -(2**63) and read[0][2][0] == 2**64 - 1
    assert sum(len(r[1]) for r in read if r[5]) == switch.counter_read("stream_out", 3)[1]   # every event copied


COMPLEX_EVENT_FIELDS = ("pattern", "match", "stream", "seq", "ts", "value")


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (apt-get install tshark)")
def test_the_wireshark_dissector_reads_complex_events_as_scapy_does(tmp_path):
    """Frames of one to four complex events (a slot each), with every field at its edges."""
    frames = [complex_events_frame("02:00:00:00:00:fe", "02:00:00:00:00:03", SPLITTER_IP, "10.0.0.3", events)
              for events in ([(1, 1, 291, 5, 50, -7)],
                             [(2**16 - 1, 2**32 - 1, 2**16 - 1, 2**32 - 1, 2**64 - 1, 2**63 - 1),
                              (3, 2, 0, 0, 0, -(2**63))],
                             [(p, p, 7, 9, 11, -p) for p in range(1, 5)])]
    wrpcap(str(tmp_path / "cep.pcap"), [Ether(f) for f in frames])
    res = subprocess.run(["tshark", "-X", f"lua_script:{DISSECTOR}", "-r", str(tmp_path / "cep.pcap"),
                          "-Y", "complexevents", "-T", "fields", "-e", "complexevents.count",
                          *[arg for f in COMPLEX_EVENT_FIELDS for arg in ("-e", f"complexevent.{f}")]],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    read = [tuple(tuple(int(v, 0) for v in column.split(",")) for column in line.split("\t"))
            for line in res.stdout.splitlines()]
    scapy = []
    for p in rdpcap(str(tmp_path / "cep.pcap")):
        layer = Ether(bytes(p))[ComplexEvents]
        scapy.append(((layer.count,), *(tuple(e.getfieldval(f) for e in layer.events)
                                        for f in COMPLEX_EVENT_FIELDS)))
    assert read == scapy
    assert [r[0] for r in read] == [(1,), (2,), (4,)]
    assert read[1][6] == (2**63 - 1, -(2**63)) and read[1][5][0] == 2**64 - 1


# ----------------------------------------------------------------------
# testbed compare
# ----------------------------------------------------------------------
def test_compare_the_same_seeded_scenario_twice_and_a_tampered_copy(reference_run, tmp_path):
    topo = reference_run.path.parent / "topo.yaml"
    rerun = tmp_path / "rerun"
    res = run_cli("run", str(topo), "--out", str(rerun), "--no-spark")
    assert res.returncode == 0, res.stderr[-3000:]
    same = run_cli("compare", str(reference_run.path), str(rerun))
    assert same.returncode == 0, same.stdout
    assert same.stdout.count("stream ") == 2 and "DIFFERS" not in same.stdout
    assert same.stdout.strip().endswith("no difference")

    tampered = RunDir(tmp_path / "tampered")
    shutil.copytree(reference_run.path, tampered.root)
    d = pd.read_parquet(tampered.deliveries)
    moved = d.index[(d["stream"] == 5) & (d["seq"] == 10)][0]
    d.loc[moved, "operator"] = "op3" if d.loc[moved, "operator"] != "op3" else "op1"
    d.to_parquet(tampered.deliveries)
    if reference_run.windows is not None:
        w = pd.read_parquet(tampered.windows)
        w.loc[(w["stream"] == 7).idxmax(), "result"] += 1
        w.to_parquet(tampered.windows)
    differ = run_cli("compare", str(reference_run.path), str(tampered.root))
    assert differ.returncode == 1
    lines = differ.stdout.splitlines()
    stream5 = next(line for line in lines if line.startswith("stream 5:"))
    assert "DIFFERS" in stream5 and "operator sets differ for 1 events" in stream5
    assert any(line.startswith("    seq 10: A ") for line in lines)
    stream7 = next(line for line in lines if line.startswith("stream 7:"))
    if reference_run.windows is not None:
        assert "DIFFERS" in stream7 and "1 differ" in stream7
    else:
        assert "same" in stream7


@needs_bmv2
@pytest.mark.bmv2
def test_compare_the_model_and_bmv2_on_the_same_seeded_scenario(reference_run, tmp_path):
    topo = reference_run.path.parent / "topo.yaml"
    on_bmv2_dir = tmp_path / "bmv2"
    spark = [] if reference_run.windows is not None else ["--no-spark"]
    res = run_cli("run", str(topo), "--out", str(on_bmv2_dir), "--target", "bmv2", "--spark-master", "local[2]",
                  *spark)
    assert res.returncode == 0, res.stderr[-3000:]
    same = run_cli("compare", str(reference_run.path), str(on_bmv2_dir))
    assert same.returncode == 0, same.stdout
    assert "on model" in same.stdout and "on bmv2" in same.stdout
    assert same.stdout.strip().endswith("no difference")
    if reference_run.windows is not None:
        assert "windows A" in same.stdout and "0 differ" in same.stdout
