"""One emulation run: topology -> network -> events -> raw results -> check.

``Run.execute`` reads as the run's phases, in the manner of p4-utils'
``startNetwork`` and p4lang/tutorials' ``run_exercise.py``:

    preflight -> spark submit -> network -> plan -> operators -> stream
              -> stop and collect -> spark (finish) -> evaluate and record

With ``--cli`` Mininet's CLI opens before the stream (its ``stream`` command
streams), with ``--cli=after`` after it (``testbed.runs.interactive``).

Whatever happens (success, failure, Ctrl-C, SIGTERM) everything started is
stopped, the raw files written so far are collected, and ``run.json`` says
how far the run got.  Every path comes from the run's ``RunDir``.

Faults the run can survive, it survives: a receiver that dies leaves its
events counted lost at its operator, and a Spark application that fails
leaves the deliveries checked and the windows reported as not computed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pandas as pd
import yaml
from rich.console import Console

from testbed import ROOT
from testbed.analysis.check import (
    StreamCheck,
    events_the_switch_never_saw,
    expected_deliveries,
    summary_lines,
    window_summary_lines,
)
from testbed.analysis.plots import plot_run
from testbed.analysis.spark import SparkApp, SparkError, job_description, spark_missing
from testbed.dataplane.control import Controller
from testbed.dataplane.wire import EVENT_UDP_PORT
from testbed.emulation import procs
from testbed.emulation.network import SplitterNetwork, mininet_missing, netem_missing
from testbed.runs.adaptation import RunAdaptation
from testbed.runs.progress import ProcessDied, StreamWatch, exit_text
from testbed.runs.record import base_record, check_deliveries, collect, evaluate
from testbed.runs.rundir import RunDir, read_json, write_json_atomic
from testbed.runs.signals import Interrupts
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import SPLITTER_IP, SPLITTER_MAC, Topology
from testbed.semantics.workload import sent_events
from testbed.targets import switch_class


class RunError(Exception):
    """The run failed after it started; exit code 1."""


class PreflightError(RunError):
    """The run cannot start here (missing tool, unsupported link); nothing was started; exit code 2."""


@dataclass
class RunOptions:
    target: str = "model"
    out: Optional[Path] = None
    seed: Optional[int] = None
    timeout: Optional[float] = None
    spark: bool = True
    spark_master: str = "local[*]"
    pcap: bool = False
    cli: Optional[str] = None       # "before" or "after" the stream: open Mininet's CLI


#: Bytes of raw data per event sent and per copy delivered (Parquet, logs), with room to spare,
#: and a fixed part for logs, figures and Spark's files.
DISK_PER_EVENT, DISK_PER_COPY, DISK_FIXED = 64, 96, 64 << 20


def preflight(topo: Topology, topology_path: Path, options: RunOptions, rundir: RunDir) -> None:
    """Raise ``PreflightError`` with the reason if the run cannot work here; starts nothing."""
    reason = mininet_missing()
    if reason:
        raise PreflightError(f"cannot run: {reason}")
    forced = [i for i, link in enumerate(topo.links) if link.impaired and link.shaper == "netem"]
    if forced:
        reason = netem_missing()
        if reason:
            raise PreflightError(f"cannot run: {topology_path}: links[{forced[0]}].shaper: netem asked for, "
                                 f"but {reason}")
    reason = switch_class(options.target).available()
    if reason:
        raise PreflightError(f"cannot run on target {options.target}: {reason}")
    if options.spark:
        reason = spark_missing()
        if reason:
            raise PreflightError(f"cannot run the operators' Spark application: {reason} (or pass --no-spark)")
    events, copies = topo.volume()
    reason = rundir.unwritable(DISK_FIXED + events * DISK_PER_EVENT + copies * DISK_PER_COPY)
    if reason:
        raise PreflightError(f"cannot write the run directory {rundir.root}: {reason}")


class Run:
    """A run of one topology on one target."""

    def __init__(self, topo: Topology, topology_path: Path, options: RunOptions,
                 console: Optional[Console] = None):
        if options.seed is not None:
            topo = topo.model_copy(update={"seed": options.seed})
        self.topo = topo
        self.topology_path = topology_path
        self.options = options
        self.console = console or Console(stderr=True)
        self.run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{options.target}-{os.getpid()}"
        self.rundir = RunDir(options.out or ROOT / "results" / topo.name / self.run_id)
        self.plan = SplitterPlan(topo)
        self.network: Optional[SplitterNetwork] = None
        self.spark: Optional[SparkApp] = None
        self.api = None
        self.controller: Optional[Controller] = None
        self.receivers: dict[str, subprocess.Popen] = {}
        self.sources: dict[str, subprocess.Popen] = {}
        self.captures: list[subprocess.Popen] = []
        self.record: dict[str, Any] = {}
        #: The frame check, once made (before Spark's reference, which needs it).
        self.frames: Optional[dict[int, StreamCheck]] = None
        self.interrupts = Interrupts()

    # -- the run, phase by phase -------------------------------------------------
    def execute(self) -> bool:
        """Run every phase; ``True`` when all checks pass."""
        preflight(self.topo, self.topology_path, self.options, self.rundir)
        with self.lifecycle():
            self.rundir.create()
            self.write_topology()
            self.record = base_record(self.topo, self.plan, self.run_id, self.options.target,
                                      str(self.topology_path))
            try:
                if self.options.spark:
                    self.phase("spark submit", self.submit_spark)
                self.phase("network", self.build_network)
                self.phase("plan", self.program_switch)
                self.phase("operators", self.start_operators)
                if self.options.cli != "before":
                    self.phase("stream", self.stream)
                if self.options.cli:
                    self.interact()          # with --cli, its `stream` command streams
                self.record["switch"] = self.switch_counters()
            except BaseException:
                with self.interrupts.shielded(raise_pending=False):
                    self.stop_and_collect()
                raise
            with self.interrupts.shielded():
                self.stop_and_collect()
            if self.spark is not None:
                self.phase("spark", self.finish_spark)
            return self.phase("conclude", self.conclude)

    def submit_spark(self) -> None:
        self.spark = SparkApp(self.rundir, job_description(self.topo, self.run_id, self.rundir),
                              self.options.spark_master)
        self.record["spark_master"] = self.options.spark_master
        try:
            self.spark.start()
        except OSError as err:      # chrt or spark-submit could not be executed
            self.spark_failed(err)

    def spark_failed(self, err: Exception) -> None:
        """The Spark application failed (to start, or later): the run goes on without it.

        The deliveries are still checked; the windows are reported as not computed.
        """
        self.record["spark"] = {"error": str(err), "computed": False}
        self.console.log(f"[red]Spark application failed; the deliveries are still checked, the windows are "
                         f"not computed: {str(err).splitlines()[0]}")
        self.spark.stop()
        self.spark = None

    def build_network(self) -> None:
        # Half a network would leave namespaces behind: a signal waits until it is built.
        with self.interrupts.shielded():
            self.network = SplitterNetwork(self.topo, self.options.target, self.rundir)
            self.network.build()
        self.network.start()
        write_json_atomic(self.rundir.switch_info, {**self.network.switch.attach_info(), "run_id": self.run_id})
        if self.options.pcap:
            self.start_captures()
        self.record["versions"].update(self.network.switch.versions())
        self.record["links"] = self.network.link_modes

    def start_captures(self) -> None:
        """tcpdump on every switch port into pcaps/, as p4lang/tutorials does."""
        self.rundir.pcaps.mkdir(exist_ok=True)
        for _port, intf in sorted(self.network.switch.port_map().items()):
            pcap = self.rundir.pcap(intf)
            proc = procs.spawn(["tcpdump", "-i", intf, "-w", str(pcap), "-U", "-q", f"udp port {EVENT_UDP_PORT}"],
                               self.rundir.log(intf, "tcpdump"), f"tcpdump on {intf}", host=self.network.switch)
            self.captures.append(proc)
            procs.wait_ready(proc, pcap.exists, f"tcpdump on {intf}", 10, error=RunError)

    def program_switch(self) -> None:
        self.api = self.network.switch.control_api()
        self.controller = Controller(self.api)
        self.record["install"] = self.controller.install(self.plan)
        self.record["plan_cost"] = self.plan.cost()

    def start_receiver(self, name: str) -> None:
        """The receiver on operator host ``name`` (again, for a recovered operator)."""
        cmd = [sys.executable, "-m", "testbed.emulation.receiver", "--host", name, "--out", str(self.rundir.root)]
        if self.spark is not None:
            cmd.append("--spark")
        if self.topo.adapt is not None and self.topo.adapt.failover:
            ip, mac = self.topo.addresses()[name]
            cmd += ["--heartbeat", self.network.intf_of(name), mac, ip, SPLITTER_MAC, SPLITTER_IP]
        self.receivers[name] = procs.spawn(cmd, self.rundir.log(name, "receiver"), f"receiver on {name}",
                                           host=self.network.host(name), cwd=ROOT)

    def start_operators(self) -> None:
        for name in self.topo.operator_hosts():
            self.start_receiver(name)
        if self.spark is not None:
            with self.console.status("waiting for the Spark application"):
                try:
                    self.spark.wait_ready()
                except SparkError as err:
                    self.spark_failed(err)
        for name, proc in self.receivers.items():
            # The first status file is written once the UDP socket is bound.
            procs.wait_ready(proc, self.rundir.receiver_status(name).exists, f"receiver on {name}", 30,
                             self.rundir.log(name, "receiver"), RunError)

    def start_sources(self) -> None:
        for name in self.topo.source_hosts():
            cmd = [sys.executable, "-m", "testbed.emulation.source", "--topology", str(self.rundir.topology),
                   "--host", name, "--intf", self.network.intf_of(name), "--out", str(self.rundir.root)]
            self.sources[name] = procs.spawn(cmd, self.rundir.log(name, "source"), f"source on {name}",
                                             host=self.network.host(name), cwd=ROOT)

    def stream(self) -> None:
        """Start the sources and follow them until every expected copy arrived
        (or nothing moves any more, or the timeout)."""
        expected = self.expected_deliveries()
        self.record["expected_deliveries"] = expected
        longest = max(s.events / s.rate for s in self.topo.streams)
        self.start_sources()
        watch = StreamWatch(self.rundir, self.sources, self.receivers,
                            sum(len(ev["seq"]) for ev in self.sends.values()), expected,
                            self.options.timeout or (longest * 3 + 60))
        switch = self.network.switch
        watch.vital[f"switch {switch.name}"] = switch.proc
        adaptation = self.adaptation()
        if adaptation is not None:
            # Changes and failures alter how many copies there are: count what the switch sent.
            sids = [s.id for s in self.topo.streams]
            watch.switch_copies = lambda: sum(self.api.counter_read("stream_out", sid)[1] for sid in sids)
        try:
            self.record["stream_end"] = watch.follow(self.console)
        except ProcessDied as err:
            log = self.rundir.switch_log(switch.name) if err.what.startswith("switch") else \
                self.rundir.log(err.what.rsplit(" ", 1)[-1], "source")
            raise RunError(f"{err} during the stream; see {log}") from None
        finally:
            if adaptation is not None:
                adaptation.stop()
                self.record["changes"] = adaptation.changes()
                self.record["adaptation"] = adaptation.record()
            planned = {f["host"] for f in self.record.get("adaptation", {}).get("failures", [])}
            self.record["faults"] = [{"what": f"receiver on {host}", "phase": "stream", "exit": code,
                                      "planned": host in planned}
                                     for host, code in watch.dead_receivers.items()]

    def adaptation(self) -> Optional[RunAdaptation]:
        """The schedule and the controller's policies, started with the sources (or nothing to do)."""
        run = RunAdaptation(self.topo, self.plan, self.controller, self.network.switch.control_api,
                            self.fail_operator, self.origins(), recover=self.recover_operator)
        return run.start() if run.needed else None

    def origins(self) -> dict[int, int]:
        """Each time stream's origin on its axis: fixed, or its first event's timestamp."""
        return {s.id: (s.window.origin if s.window.origin is not None else int(self.sends[s.id]["ts"][0]))
                for s in self.topo.streams if s.window.kind == "time" and len(self.sends[s.id]["ts"])}

    def fail_operator(self, host: str, how: str) -> None:
        """A scheduled failure: the host's receiver is killed, or its link goes down.

        The link goes down at the host's end, as a pulled cable or a dead
        NIC would: the switch's port loses its carrier but stays configured.
        (An administrative down of the switch's own interface is a different
        event, and bmv2's libpcap then blocks the switch's one receive thread
        until the port is up again, stalling every other port.)"""
        if how == "kill":
            self.receivers[host].send_signal(signal.SIGKILL)
        else:
            self.network.net.get(host).defaultIntf().ifconfig("down")

    def recover_operator(self, host: str, how: str) -> None:
        """A scheduled recovery of a host that failed ``how``: a new receiver
        (it carries on the old one's parts), or its link up again."""
        if how == "kill":
            status = self.rundir.receiver_status(host)
            before = read_json(status).get("pid") if status.exists() else None
            self.start_receiver(host)
            # Ready once the new receiver has bound its socket and written its first status.
            procs.wait_ready(self.receivers[host], lambda: read_json(status).get("pid") not in (None, before),
                             f"receiver on {host}", 30, self.rundir.log(host, "receiver"), RunError)
        else:
            self.network.net.get(host).defaultIntf().ifconfig("up")

    def interact(self) -> None:
        """Mininet's CLI on the network, until the user leaves it."""
        from testbed.runs.interactive import RunCLI

        start = time.monotonic()
        RunCLI(self)
        self.record.setdefault("phases_s", {})["cli"] = round(time.monotonic() - start, 3)
        if "stream_end" not in self.record:
            raise RunError("the CLI was left before `stream`: no event was sent, so there is nothing to check")

    def finish_spark(self) -> None:
        # The frame check first: the reference leaves out the events it finds the switch never saw.
        self.frames = check_deliveries(self.record, self.rundir)
        try:
            self.record["spark"] = self.spark.finish(changes=self.record.get("changes"),
                                                     unseen=events_the_switch_never_saw(self.frames))
        except (SparkError, OSError, ValueError) as err:   # a failed application, or its analysis unreadable
            self.spark_failed(err)

    def conclude(self) -> bool:
        """Checks, accounting, figures and the record of a run whose phases all ran."""
        windows = self.options.spark and "error" not in self.record.get("spark", {})
        verdicts = evaluate(self.record, self.rundir, with_windows=windows, frames=self.frames)
        lines = summary_lines(verdicts.frames) + window_summary_lines(verdicts.windows)
        if self.options.spark and not windows:
            self.record["ok"] = False
            lines.append(f"windows: not computed (the Spark application failed: "
                         f"{self.record['spark']['error'].splitlines()[0]})")
        for fault in self.record.get("faults", []):
            cause = "as the schedule asked" if fault.get("planned") else f"during the {fault['phase']}"
            lines.append(f"{fault['what']} {exit_text(fault['exit'])} {cause}; "
                         f"its missing events are counted lost there")
        self.rundir.write_record(self.record)
        plot_run(self.rundir)
        for line in lines:
            self.console.print(line)
        self.console.print(f"results: {self.rundir.root}")
        return self.record["ok"]

    # -- helpers of the phases -----------------------------------------------------
    def phase(self, name: str, step: Callable[[], Any]) -> Any:
        procs.set_phase(name)
        t0 = time.perf_counter()
        with self.console.status(f"[bold]{name}[/]: starting"):
            result = step()
        seconds = round(time.perf_counter() - t0, 3)
        self.record.setdefault("phases_s", {})[name] = seconds
        self.console.log(f"{name}: done ({seconds:.1f}s)")
        return result

    @cached_property
    def sends(self) -> dict[int, dict]:
        """Every stream's frames in the order its source sends them (``sent_events``)."""
        return {s.id: sent_events(s, self.topo.seed) for s in self.topo.streams}

    def expected_deliveries(self) -> int:
        """Copies the oracle expects for the whole run (the progress bar's total)."""
        return sum(sum(expected_deliveries(s, pd.DataFrame({"seq": self.sends[s.id]["seq"],
                                                            "ts": self.sends[s.id]["ts"]})).copies.values())
                   for s in self.topo.streams)

    def switch_counters(self) -> dict[str, Any]:
        out = Controller(self.api).stream_counters([s.id for s in self.topo.streams],
                                                   sorted(self.plan.ports.values()))
        port_stats = getattr(self.api, "port_stats", None)
        if port_stats is not None:
            out["socket"] = port_stats()
        return out

    def write_topology(self) -> None:
        data = self.topo.model_dump(mode="json", exclude_none=True)
        data["switch"]["target"] = self.options.target
        self.rundir.topology.write_text(yaml.safe_dump(data, sort_keys=False))

    # -- lifecycle -----------------------------------------------------------------
    @contextmanager
    def lifecycle(self) -> Iterator[None]:
        """Claim the run directory (or refuse at once, naming the run in the way);
        turn signals into ``RunInterrupted``; record started processes for
        ``testbed clean``; write the record however the body ends."""
        try:
            procs.begin_run(self.run_id, self.rundir.root)
        except procs.RunDirBusy as err:
            raise PreflightError(f"cannot run: {err}") from None
        self.interrupts.install()
        try:
            yield
        except BaseException as err:
            self.record["error"] = f"{type(err).__name__}: {err}"
            with self.interrupts.shielded(raise_pending=False):
                self.finish_lifecycle()
            raise
        with self.interrupts.shielded():
            self.finish_lifecycle()

    def finish_lifecycle(self) -> None:
        """Stop Spark, give the signals back, close the state file and write the record."""
        try:
            if self.spark is not None:
                self.spark.stop()
        finally:
            left = procs.end_run()
            self.interrupts.restore()
            if left:
                self.record["left_running"] = left
                self.console.log(f"[red]could not stop {', '.join(left)}; `testbed clean` ends them")
            if self.interrupts.received:
                self.record["signals"] = self.interrupts.received
            self.record["end"] = time.time()
            if self.rundir.root.is_dir():
                self.rundir.write_record(self.record)
                if self.options.out is None:
                    self.rundir.link_latest()

    def stop_and_collect(self) -> None:
        """Stop everything the stream needed, then merge the raw files written so far."""
        procs.set_phase("stop")
        self.stop_emulation()
        collect(self.rundir)

    def stop_emulation(self) -> None:
        """Stop sources, receivers (they flush their data) and captures, then the network."""
        for group in (self.sources, self.receivers, {i: p for i, p in enumerate(self.captures)}):
            for proc in group.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in group.values():
                procs.stop(proc)
        for host, proc in self.receivers.items():
            known = {f["what"] for f in self.record.get("faults", [])}
            if proc.returncode not in (0, None) and f"receiver on {host}" not in known:
                self.record.setdefault("faults", []).append(
                    {"what": f"receiver on {host}", "phase": "stop", "exit": proc.returncode})
        close = getattr(self.api, "close", None)
        if close is not None:
            try:
                close()
            except OSError:
                pass
        if self.network is not None:
            self.network.stop()
            self.network = None
