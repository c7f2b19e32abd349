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
from testbed.analysis.check import expected_deliveries, summary_lines, window_summary_lines
from testbed.analysis.plots import plot_run
from testbed.analysis.spark import SparkApp, job_description, spark_missing
from testbed.dataplane.control import Controller
from testbed.dataplane.wire import EVENT_UDP_PORT
from testbed.emulation import procs
from testbed.emulation.network import SplitterNetwork, mininet_missing, netem_missing
from testbed.runs.progress import SourceFailed, StreamWatch
from testbed.runs.record import base_record, collect, evaluate
from testbed.runs.rundir import RunDir, write_json_atomic
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import Topology
from testbed.semantics.workload import sent_events
from testbed.targets import switch_class


class RunError(Exception):
    """The run failed after it started; exit code 1."""


class PreflightError(RunError):
    """The run cannot start here (missing tool, unsupported link); nothing was started; exit code 2."""


class RunInterrupted(Exception):
    """SIGTERM or SIGINT arrived; the run stops and cleans up."""


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


def preflight(topo: Topology, topology_path: Path, options: RunOptions) -> None:
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
        self.receivers: dict[str, subprocess.Popen] = {}
        self.sources: dict[str, subprocess.Popen] = {}
        self.captures: list[subprocess.Popen] = []
        self.record: dict[str, Any] = {}

    # -- the run, phase by phase -------------------------------------------------
    def execute(self) -> bool:
        """Run every phase; ``True`` when all checks pass."""
        preflight(self.topo, self.topology_path, self.options)
        self.rundir.create()
        self.write_topology()
        self.record = base_record(self.topo, self.plan, self.run_id, self.options.target, str(self.topology_path))
        with self.lifecycle():
            try:
                if self.options.spark:
                    self.phase("spark submit", self.submit_spark)
                self.phase("network", self.build_network)
                self.phase("plan", self.program_switch)
                self.phase("operators", self.start_operators)
                if self.options.cli != "before":
                    self.stream()
                if self.options.cli:
                    self.interact()          # with --cli, its `stream` command streams
                self.record["switch"] = self.switch_counters()
            finally:
                self.stop_emulation()
                collect(self.rundir)
            if self.spark is not None:
                self.phase("spark", self.finish_spark)
        return self.conclude()

    def submit_spark(self) -> None:
        self.spark = SparkApp(self.rundir, job_description(self.topo, self.run_id, self.rundir),
                              self.options.spark_master)
        self.spark.start()
        self.record["spark_master"] = self.options.spark_master

    def build_network(self) -> None:
        self.network = SplitterNetwork(self.topo, self.options.target, self.rundir).build()
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
                               self.rundir.log(intf, "tcpdump"), f"tcpdump on {intf}")
            self.captures.append(proc)
            procs.wait_ready(proc, pcap.exists, f"tcpdump on {intf}", 10, error=RunError)

    def program_switch(self) -> None:
        self.api = self.network.switch.control_api()
        self.record["install"] = Controller(self.api).install(self.plan)
        self.record["plan_cost"] = self.plan.cost()

    def start_operators(self) -> None:
        for name in self.topo.operator_hosts():
            cmd = [sys.executable, "-m", "testbed.emulation.receiver", "--host", name, "--out", str(self.rundir.root)]
            if self.spark is not None:
                cmd += ["--spark-dir", str(self.rundir.spark_inbox(name))]
            self.receivers[name] = procs.spawn(cmd, self.rundir.log(name, "receiver"), f"receiver on {name}",
                                               host=self.network.host(name), cwd=ROOT)
        if self.spark is not None:
            with self.console.status("waiting for the Spark application"):
                self.spark.wait_ready()
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
        watch = StreamWatch(self.rundir, self.sources, list(self.receivers),
                            sum(len(ev["seq"]) for ev in self.sends.values()), expected,
                            self.options.timeout or (longest * 3 + 60))
        start = time.monotonic()
        try:
            self.record["stream_end"] = watch.follow(self.console)
        except SourceFailed as err:
            raise RunError(f"source on {err.host} failed; see {self.rundir.log(err.host, 'source')}") from None
        self.record.setdefault("phases_s", {})["stream"] = round(time.monotonic() - start, 3)

    def interact(self) -> None:
        """Mininet's CLI on the network, until the user leaves it."""
        from testbed.runs.interactive import RunCLI

        start = time.monotonic()
        RunCLI(self)
        self.record.setdefault("phases_s", {})["cli"] = round(time.monotonic() - start, 3)
        if "stream_end" not in self.record:
            raise RunError("the CLI was left before `stream`: no event was sent, so there is nothing to check")

    def finish_spark(self) -> None:
        self.record["spark"] = self.spark.finish()

    def conclude(self) -> bool:
        """Checks, accounting, figures and the record of a run whose phases all ran."""
        verdicts = evaluate(self.record, self.rundir, with_windows=self.spark is not None)
        self.rundir.write_record(self.record)
        plot_run(self.rundir)
        for line in summary_lines(verdicts.frames) + window_summary_lines(verdicts.windows):
            self.console.print(line)
        self.console.print(f"results: {self.rundir.root}")
        return verdicts.ok

    # -- helpers of the phases -----------------------------------------------------
    def phase(self, name: str, step: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        with self.console.status(f"[bold]{name}[/]: starting"):
            step()
        seconds = round(time.perf_counter() - t0, 3)
        self.record.setdefault("phases_s", {})[name] = seconds
        self.console.log(f"{name}: done ({seconds:.1f}s)")

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
        """Signals become ``RunInterrupted``; started processes are recorded for
        ``testbed clean``; the record is written however the body ends."""
        procs.begin_run(self.run_id, self.rundir.root)
        previous = {sig: signal.signal(sig, self._interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        except BaseException as err:
            self.record["error"] = f"{type(err).__name__}: {err}"
            raise
        finally:
            try:
                if self.spark is not None:
                    self.spark.stop()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                procs.end_run()
                self.record["end"] = time.time()
                self.rundir.write_record(self.record)
                if self.options.out is None:
                    self.rundir.link_latest()

    def _interrupt(self, signum, frame):
        raise RunInterrupted(signal.Signals(signum).name)

    def stop_emulation(self) -> None:
        """Stop sources, receivers (they flush their data) and captures, then the network."""
        for group in (self.sources, self.receivers, {i: p for i, p in enumerate(self.captures)}):
            for proc in group.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in group.values():
                procs.stop(proc)
        close = getattr(self.api, "close", None)
        if close is not None:
            try:
                close()
            except OSError:
                pass
        if self.network is not None:
            self.network.stop()
            self.network = None
