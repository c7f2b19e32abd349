"""One emulation run: topology -> network -> events -> raw results -> verdicts.

``Run.execute`` reads as the run's phases, in the manner of p4-utils'
``startNetwork`` and p4lang/tutorials' ``run_exercise.py``:

    preflight -> spark submit -> network -> plan -> operators -> stream
              -> stop and collect -> spark (finish) -> conclude

The run is put together from parts it is handed (``RunParts``): the network
with its switch, the Spark application, and the conclusion that judges the
finished run.  ``testbed.experiments.launch`` hands in the real ones; tests
hand in fakes.  With ``--cli`` Mininet's CLI opens before the stream (its
``stream`` command streams), with ``--cli=after`` after it
(``testbed.runs.interactive``).

Whatever happens (success, failure, Ctrl-C, SIGTERM) everything started is
stopped, the raw files written so far are collected, and ``run.json`` says
how far the run got (``RunLifecycle``).  Every path comes from the run's
``RunDir``.  Faults the run can survive, it survives: a receiver that dies
leaves its events counted lost at its operator, and a Spark application
that fails leaves the deliveries checked and the windows reported as not
computed.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Optional

import yaml
from rich.console import Console

from testbed import ROOT
from testbed.dataplane.cep import CepControl
from testbed.dataplane.control import Controller
from testbed.emulation import procs
from testbed.emulation.network import netem_missing
from testbed.rundir import Fault, RunDir, RunRecord, SwitchCounters, write_json_atomic
from testbed.runs.adaptation import RunAdaptation
from testbed.runs.hosts import HostProcesses
from testbed.runs.lifecycle import RunBusy, RunLifecycle
from testbed.runs.parts import Network, PartFailed, RunParts, Spark
from testbed.runs.progress import ProcessDied, StreamWatch
from testbed.runs.record import base_record, collect
from testbed.semantics.families import compact_families
from testbed.semantics.instances import collapse, instance_counts
from testbed.semantics.limits import available_memory
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import Topology
from testbed.semantics.workload import sent_events

#: libyaml's emitter where PyYAML has it: the pure-Python one takes minutes on 65,536 streams.
SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def run_topology(topo: Topology, target: str) -> dict[str, Any]:
    """The topology as the run's directory keeps it, with the target it ran
    on, each operator list as short as it reads the same, and long runs of a
    family's members as the family again: every part of the run parses the
    file, and 4,096 streams over 64 instances written out are a quarter of a
    million names."""
    data = topo.model_dump(mode="json", exclude_none=True)
    data["switch"]["target"] = target
    counts = instance_counts(topo.hosts)
    for stream in data["streams"]:
        stream["operators"] = collapse(stream["operators"], counts)
    data["streams"] = compact_families(data["streams"])
    for entry in data.get("schedule") or []:
        if (entry.get("change") or {}).get("operators"):
            entry["change"]["operators"] = collapse(entry["change"]["operators"], counts)
    return data


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
    switch_cpu: str = "fifo"        # the switch process's CPU policy (targets.base.CPU_POLICIES)
    spark_cpu: str = "nice"         # the Spark application's (analysis.spark.SPARK_CPU)
    window_timeout_s: Optional[float] = None   # a window unchanged this long leaves incomplete


#: Bytes of raw data per event sent and per copy delivered (Parquet, logs), with room to spare,
#: and a fixed part for logs, figures and Spark's files.
DISK_PER_EVENT, DISK_PER_COPY, DISK_FIXED = 64, 96, 64 << 20


def preflight(topo: Topology, topology_path: Path, parts: RunParts, rundir: RunDir) -> None:
    """Raise ``PreflightError`` with the reason if the run cannot work here; starts nothing."""
    reason = parts.missing()
    if reason:
        raise PreflightError(reason)
    lagged = [i for i, e in enumerate(topo.adapt.elastic if topo.adapt else ()) if e.signal == "lag"]
    if lagged and parts.spark is None:
        raise PreflightError(f"cannot run: {topology_path}: adapt.elastic[{lagged[0]}].signal: lag is what the "
                             f"Spark operators report, and this run has none (leave out --no-spark)")
    forced = [i for i, link in enumerate(topo.links) if link.impaired and link.shaper == "netem"]
    if forced:
        reason = netem_missing()
        if reason:
            raise PreflightError(f"cannot run: {topology_path}: links[{forced[0]}].shaper: netem asked for, "
                                 f"but {reason}")
    events, copies = topo.volume()
    need, have = topo.memory_need(parts.spark is not None), available_memory()
    if need > have:
        # The limit is this machine's, not the file's: validate says nothing of it, the run does.
        i = max(range(len(topo.streams)), key=lambda k: topo.streams[k].copies())
        raise PreflightError(f"cannot run: {topology_path}: streams[{i}].events: the run would need about "
                             f"{need / 2**30:.1f} GiB for {events} events and up to {copies} deliveries; "
                             f"this machine has {have / 2**30:.1f} GiB available")
    reason = rundir.unwritable(DISK_FIXED + events * DISK_PER_EVENT + copies * DISK_PER_COPY)
    if reason:
        raise PreflightError(f"cannot write the run directory {rundir.root}: {reason}")


def expected_copies(topo: Topology, sends: dict[int, dict]) -> int:
    """Copies the oracle sends for the events the sources will send: the progress bar's total."""
    total = 0
    for s in topo.streams:
        oracle = s.oracle()
        sent = sends[s.id]
        total += sum(len(oracle.step(seq, ts, key).operators)
                     for seq, ts, key in zip(sent["seq"].tolist(), sent["ts"].tolist(), sent["key"].tolist()))
    return total


def install_cep(api, topo: Topology, plan: SplitterPlan,
                installed: dict[str, Any]) -> tuple[Optional[CepControl], dict[str, Any]]:
    """The CEP stage's windows and patterns, after the splitter's plan (``installed``:
    what installing it recorded, which addresses the sinks; docs/cep.md), and the
    record of both with how long the rules took; nothing more for a topology without
    ``cep:`` rules.  Each
    window counts from the start what the schedule's patterns read of it too, and
    every sink the schedule's patterns name is known (its port joins the group when
    a pattern names it); the control plane is returned for the schedule's changes."""
    if topo.cep is None:
        return None, installed
    started = time.monotonic()
    control = CepControl(api, {h: plan.ports[h] for h in topo.sink_hosts()})
    control.install(topo.cep, topo.cep_timeline().tests())
    return control, {**installed, "cep_rules_s": time.monotonic() - started}


class Run:
    """A run of one topology, put together from ``parts``."""

    def __init__(self, topo: Topology, topology_path: Path, options: RunOptions, parts: RunParts,
                 console: Optional[Console] = None):
        if options.seed is not None:
            topo = topo.model_copy(update={"seed": options.seed})
        self.topo = topo
        self.topology_path = topology_path
        self.options = options
        self.parts = parts
        self.console = console or Console(stderr=True)
        self.run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{options.target}-{os.getpid()}"
        self.rundir = RunDir(options.out or ROOT / "results" / topo.name / self.run_id)
        self.plan = SplitterPlan(topo)
        self.lifecycle = RunLifecycle(self.run_id, self.rundir, self.console, link_latest=options.out is None)
        self.network: Optional[Network] = None
        self.hosts: Optional[HostProcesses] = None
        self.spark: Optional[Spark] = None
        self.api, self.cep = None, None         # the switch's control connection, its CEP control plane
        self.controller: Optional[Controller] = None
        self.record: Optional[RunRecord] = None

    # -- the run, phase by phase -------------------------------------------------
    def execute(self) -> bool:
        """Run every phase; ``True`` when the conclusion says every check passed."""
        preflight(self.topo, self.topology_path, self.parts, self.rundir)
        try:
            with self.lifecycle.held(lambda: self.record, self.release):
                return self.phases()
        except RunBusy as err:
            raise PreflightError(f"cannot run: {err}") from None

    def phases(self) -> bool:
        self.rundir.create()
        self.write_topology()
        self.record = base_record(self.topo, self.plan, self.run_id, self.options.target,
                                  str(self.topology_path))
        shield = self.lifecycle.interrupts.shielded
        try:
            if self.parts.spark is not None and self.options.spark:
                self.phase("spark submit", self.submit_spark)
            self.phase("network", self.build_network)
            self.phase("plan", self.program_switch)
            self.phase("operators", self.start_operators)
            if self.options.cli != "before":
                self.phase("stream", self.stream)
            if self.options.cli:
                self.interact()          # with --cli, its `stream` command streams
            self.record.switch = self.switch_counters()
            self.record.path = self.network.path_counters()
        except BaseException:
            with shield(raise_pending=False):
                self.stop_and_collect()
            raise
        with shield():
            self.stop_and_collect()
        if self.spark is not None:
            self.phase("spark", self.finish_spark)
        self.rundir.write_record(self.record)     # the conclusion reads the facts from the file
        return self.phase("conclude", lambda: self.parts.conclude(self.rundir, self.record))

    def submit_spark(self) -> None:
        self.spark = self.parts.spark(self.topo, self.run_id, self.rundir)
        self.record.spark_master = self.options.spark_master
        try:
            self.spark.start()
        except (OSError, PartFailed) as err:      # chrt or spark-submit could not be executed
            self.spark_failed(err)

    def spark_failed(self, err: Exception) -> None:
        """The Spark application failed (to start, or later): the run goes on without it.

        The deliveries are still checked; the windows are reported as not computed.
        """
        self.record.spark = {"error": str(err), "computed": False}
        self.console.log(f"[red]Spark application failed; the deliveries are still checked, the windows are "
                         f"not computed: {str(err).splitlines()[0]}")
        self.spark.stop()
        self.spark = None

    def build_network(self) -> None:
        # Half a network would leave namespaces behind: a signal waits until it is built.
        with self.lifecycle.interrupts.shielded():
            self.network = self.parts.network(self.topo, self.rundir)
            self.network.build()
        self.network.start()
        self.hosts = HostProcesses(self.topo, self.rundir, self.network, RunError)
        write_json_atomic(self.rundir.switch_info, {**self.network.switch.attach_info(), "run_id": self.run_id})
        if self.options.pcap:
            self.hosts.start_captures()
        self.record.versions = {**self.record.versions, **self.network.switch.versions()}
        self.record.cpu_policy = {"switch": self.network.switch.cpu_policy.description,
                                  "sources, receivers": "SCHED_OTHER, nice 0",
                                  "spark": getattr(self.spark.cpu_policy, "description", "unknown")
                                  if self.spark is not None else "not running"}
        self.record.links = self.network.link_modes

    def program_switch(self) -> None:
        self.api = self.network.switch.control_api()
        self.controller = Controller(self.api)
        self.cep, self.record.install = install_cep(self.api, self.topo, self.plan, self.controller.install(self.plan))
        self.record.plan_cost = self.plan.cost()

    def start_operators(self) -> None:
        for name in self.topo.receiver_hosts():           # the CEP stage's sinks run one too
            self.hosts.start_receiver(name, self.spark is not None)
        if self.spark is not None:
            with self.console.status("waiting for the Spark application"):
                try:
                    self.spark.wait_ready()
                except PartFailed as err:
                    self.spark_failed(err)
        self.hosts.wait_receivers()

    def stream(self) -> None:
        """Start the sources and follow them until every expected copy arrived
        (or nothing moves any more, or the timeout)."""
        expected = self.expected()
        self.record.expected_deliveries = expected
        longest = max(s.events / s.rate for s in self.topo.streams)
        self.hosts.start_sources()
        watch = StreamWatch(self.rundir, self.hosts.sources, self.hosts.receivers,
                            sum(len(ev["seq"]) for ev in self.sends.values()), expected,
                            self.options.timeout or (longest * 3 + 60), live=self.spark is not None)
        switch = self.network.switch
        watch.vital[f"switch {switch.name}"] = switch.proc
        adaptation = self.adaptation()
        if adaptation is not None:
            # Changes and failures alter how many copies there are: count what the switch sent.
            sids = [s.id for s in self.topo.streams]
            watch.switch_copies = lambda: sum(self.api.counter_read("stream_out", sid)[1] for sid in sids)
        try:
            self.record.stream_end = watch.follow(self.console)
        except ProcessDied as err:
            log = self.rundir.switch_log(switch.name) if err.what.startswith("switch") else \
                self.rundir.log(err.what.rsplit(" ", 1)[-1], "source")
            raise RunError(f"{err} during the stream; see {log}") from None
        finally:
            if adaptation is not None:
                adaptation.stop()
                self.record.changes = adaptation.changes()
                self.record.adaptation = adaptation.record()
            planned = self.record.failed_hosts()
            self.record.faults = [Fault(what=f"receiver on {host}", phase="stream", exit=code,
                                        planned=host in planned)
                                  for host, code in watch.dead_receivers.items()]

    def adaptation(self) -> Optional[RunAdaptation]:
        """The schedule and the controller's policies, started with the sources (or nothing to do)."""
        run = RunAdaptation(self.topo, self.plan, self.controller, self.network.switch.control_api, self.fail_operator,
                            self.origins(), self.rundir, recover=self.recover_operator, cep=self.cep)
        return run.start() if run.needed else None

    def origins(self) -> dict[int, int]:
        """Each time stream's origin on its axis: fixed, or its first event's timestamp."""
        return {s.id: (s.window.origin if s.window.origin is not None else int(self.sends[s.id]["ts"][0]))
                for s in self.topo.streams if s.window.kind == "time" and len(self.sends[s.id]["ts"])}

    def fail_operator(self, host: str, how: str) -> None:
        """A scheduled failure: the host's receiver is killed, or its link goes down."""
        if how == "kill":
            self.hosts.kill_receiver(host)
        else:
            self.network.link_down(host)

    def recover_operator(self, host: str, how: str) -> None:
        """A scheduled recovery of a host that failed ``how``: a new receiver
        (it carries on the old one's parts), or its link up again."""
        if how == "kill":
            self.hosts.restart_receiver(host, self.spark is not None)
        else:
            self.network.link_up(host)

    def interact(self) -> None:
        """Mininet's CLI on the network, until the user leaves it."""
        from testbed.runs.interactive import RunCLI

        start = time.monotonic()
        RunCLI(self)
        self.record.phases_s = {**self.record.phases_s, "cli": round(time.monotonic() - start, 3)}
        if self.record.stream_end is None:
            raise RunError("the CLI was left before `stream`: no event was sent, so there is nothing to check")

    def finish_spark(self) -> None:
        try:
            self.record.spark = self.spark.finish(self.record)
        except (PartFailed, OSError, ValueError) as err:   # a failed application, or its analysis unreadable
            self.spark_failed(err)

    # -- helpers of the phases -----------------------------------------------------
    def phase(self, name: str, step: Callable[[], Any]) -> Any:
        procs.set_phase(name)
        t0 = time.perf_counter()
        with self.console.status(f"[bold]{name}[/]: starting"):
            result = step()
        seconds = round(time.perf_counter() - t0, 3)
        self.record.phases_s = {**self.record.phases_s, name: seconds}
        self.console.log(f"{name}: done ({seconds:.1f}s)")
        return result

    def expected(self) -> int:
        """Copies the oracle expects for the whole run (the progress bar's total)."""
        return expected_copies(self.topo, self.sends)

    @cached_property
    def sends(self) -> dict[int, dict]:
        """Every stream's frames in the order its source sends them (``sent_events``)."""
        return {s.id: sent_events(s, self.topo.seed) for s in self.topo.streams}

    def switch_counters(self) -> SwitchCounters:
        instances = self.plan.instances.values()
        counters = Controller(self.api).stream_counters([s.id for s in self.topo.streams],
                                                        sorted(inst.id for inst in instances))
        port_stats = getattr(self.api, "port_stats", None)
        return SwitchCounters(streams={str(k): v for k, v in counters["streams"].items()},
                              ports=copies_per_port(instances, counters["ports"]),
                              non_event=counters["non_event"], socket=port_stats() if port_stats else {})

    def write_topology(self) -> None:
        self.rundir.topology.write_text(yaml.dump(run_topology(self.topo, self.options.target), Dumper=SafeDumper,
                                                  sort_keys=False))

    # -- the end ---------------------------------------------------------------------
    def stop_and_collect(self) -> None:
        """Stop everything the stream needed, then merge the raw files written so far."""
        procs.set_phase("stop")
        self.stop_emulation()
        collect(self.rundir)

    def stop_emulation(self) -> None:
        """Stop the host processes (receivers flush their data), then the network."""
        if self.hosts is not None:
            self.record.faults = self.record.faults + self.hosts.stop(self.record.faults)
        close = getattr(self.api, "close", None)
        if close is not None:
            try:
                close()
            except OSError:
                pass
        if self.network is not None:
            self.network.stop()
            self.network = None

    def release(self) -> None:
        """What the lifecycle stops last, however the run ended: the Spark application."""
        if self.spark is not None:
            self.spark.stop()


def copies_per_port(instances, per_instance: dict[int, int]) -> dict[str, int]:
    """``operator_out`` per port, as the path's other counters are: a shared host's instances add up."""
    by_port: dict[int, int] = {}
    for inst in instances:
        by_port[inst.port] = by_port.get(inst.port, 0) + per_instance[inst.id]
    return {str(port): n for port, n in sorted(by_port.items())}
