"""One emulation run: topology -> network -> events -> raw results -> check.

``Run`` walks the phases in order and always tears down what it started,
whether the run succeeds, fails, or is interrupted (Ctrl-C, SIGTERM).
Everything it learns goes into the run directory:

- ``run.json``: resolved topology, versions, accounting, check summary;
- ``sources.parquet``, ``deliveries.parquet``: raw events;
- ``logs/``: switch, source and receiver logs; ``load.png``.
"""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import procs
from .check import check_frames, check_windows, expected_deliveries, summary_lines, window_summary_lines
from .control import Controller
from .network import SplitterNetwork, mininet_missing, netem_missing
from .plan import SplitterPlan
from .plots import plot_run
from .spark import SparkApp, job_description, spark_missing
from .targets import switch_class
from .topology import Topology
from .workload import stream_events

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.2
#: After the sources finish, how long the run waits without any new delivery
#: before it gives up on the missing ones (they are then reported as lost).
SETTLE_S = 5.0


class RunInterrupted(Exception):
    """SIGTERM or SIGINT arrived; the run stops and cleans up."""


class RunError(Exception):
    pass


@dataclass
class RunOptions:
    target: str = "model"
    out: Optional[Path] = None
    seed: Optional[int] = None
    timeout: Optional[float] = None
    spark: bool = True
    spark_master: str = "local[*]"
    pcap: bool = False


def git_revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "kernel": platform.release()}
    for pkg in ("mininet", "scapy", "pyarrow", "pandas", "pydantic", "pyspark", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            try:
                mod = __import__(pkg)
                out[pkg] = getattr(mod, "VERSION", getattr(mod, "__version__", "unknown"))
            except ImportError:
                pass
    return out


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
        self.run_dir = (options.out or ROOT / "results" / topo.name / self.run_id).resolve()
        self.plan = SplitterPlan(topo)
        self.network: Optional[SplitterNetwork] = None
        self.receivers: dict[str, Any] = {}
        self.spark: Optional[SparkApp] = None
        self.sources: dict[str, Any] = {}
        self.captures: list[subprocess.Popen] = []
        self.api = None
        self.record: dict[str, Any] = {}

    # -- preconditions: fail before anything is started ---------------------
    def preflight(self) -> None:
        reason = mininet_missing()
        if reason:
            raise RunError(f"cannot run: {reason}")
        shaped = [i for i, l in enumerate(self.topo.links) if l.delay is not None or l.loss is not None]
        if shaped:
            reason = netem_missing()
            if reason:
                raise RunError(f"cannot run: {self.topology_path}: links[{shaped[0]}]: delay and loss "
                               f"need tc netem, but {reason}")
        cls = switch_class(self.options.target)
        reason = cls.available()
        if reason:
            raise RunError(f"cannot run on target {self.options.target}: {reason}")
        if self.options.spark:
            reason = spark_missing()
            if reason:
                raise RunError(f"cannot run the operators' Spark application: {reason} (or pass --no-spark)")

    # -- the run -------------------------------------------------------------
    def execute(self) -> bool:
        """Run every phase; ``True`` when all checks pass."""
        self.preflight()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(exist_ok=True)
        self._write_topology()
        procs.begin_run(self.run_id)
        previous = {sig: signal.signal(sig, self._interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
        started = time.time()
        self.record = self._base_record(started)
        failed = True
        try:
            if self.options.spark:
                self._submit_spark()
            self._phase("network", self._start_network)
            self._phase("plan", self._install_plan)
            self._phase("operators", self._start_receivers)
            self._stream()
            self.record["switch"] = self._switch_counters()
            failed = False
        except BaseException as err:
            self.record["error"] = f"{type(err).__name__}: {err}"
            raise
        finally:
            try:
                self._teardown()
                self._collect()
                if self.spark is not None:
                    if failed:
                        self.spark.kill()
                    else:
                        self._phase("spark", self._finish_spark)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                if self.spark is not None:
                    self.spark.kill()
                procs.end_run()
                self.record["end"] = time.time()
                self._write_record()
        return self._finish()

    def _submit_spark(self) -> None:
        self.spark = SparkApp(self.run_dir, job_description(self.topo, self.run_id), self.options.spark_master)
        self.spark.start()
        self.record["spark_master"] = self.options.spark_master

    def _finish_spark(self) -> None:
        self.record["spark"] = self.spark.finish()

    def _interrupt(self, signum, frame):
        raise RunInterrupted(signal.Signals(signum).name)

    def _phase(self, name: str, fn) -> None:
        t0 = time.perf_counter()
        with self.console.status(f"[bold]{name}[/]: starting"):
            fn()
        self.record.setdefault("phases_s", {})[name] = round(time.perf_counter() - t0, 3)
        self.console.log(f"{name}: done ({self.record['phases_s'][name]:.1f}s)")

    def _start_network(self) -> None:
        self.network = SplitterNetwork(self.topo, self.options.target, self.run_dir).build()
        self.network.start()
        if self.options.pcap:
            self._start_captures()
        self.record["versions"].update(self.network.switch.versions())

    def _start_captures(self) -> None:
        """tcpdump on every switch port into pcaps/, as p4lang/tutorials does."""
        folder = self.run_dir / "pcaps"
        folder.mkdir(exist_ok=True)
        for _port, intf in sorted(self.network.switch.port_map().items()):
            pcap = folder / f"{intf}.pcap"
            proc = subprocess.Popen(["tcpdump", "-i", intf, "-w", str(pcap), "-U", "-q", "udp port 50000"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.register_pid(proc.pid, f"tcpdump on {intf}")
            self.captures.append(proc)
            procs.wait_ready(proc, pcap.exists, f"tcpdump on {intf}", 10, error=RunError)

    def _install_plan(self) -> None:
        api = self.network.switch.control_api()
        self.api = api
        self.record["install"] = Controller(api).install(self.plan)
        self.record["plan_cost"] = self.plan.cost()

    def _start_receivers(self) -> None:
        for name in self.topo.operator_hosts():
            host = self.network.host(name)
            log = open(self.run_dir / "logs" / f"{name}.receiver.log", "wb")
            cmd = [sys.executable, "-m", "testbed.receiver", "--host", name, "--out", str(self.run_dir)]
            if self.spark is not None:
                cmd += ["--spark-dir", str(self.run_dir / "spark" / "in" / name)]
            proc = host.popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
            procs.register_pid(proc.pid, f"receiver on {name}")
            self.receivers[name] = proc
        if self.spark is not None:
            with self.console.status("waiting for the Spark application"):
                self.spark.wait_ready()
        for name, proc in self.receivers.items():
            # The first status file is written once the UDP socket is bound.
            procs.wait_ready(proc, (self.run_dir / f"{name}.status.json").exists, f"receiver on {name}", 30,
                             self.run_dir / "logs" / f"{name}.receiver.log", RunError)

    def _expected_totals(self) -> int:
        total = 0
        for s in self.topo.streams:
            ev = stream_events(s, self.topo.seed)
            pairs, _ = expected_deliveries(self._stream_record(s), pd.DataFrame({"seq": ev["seq"], "ts": ev["ts"]}))
            total += len(pairs)
        return total

    def _stream(self) -> None:
        expected = self._expected_totals()
        self.record["expected_deliveries"] = expected
        total_events = sum(s.events for s in self.topo.streams)
        longest = max(s.events / s.rate for s in self.topo.streams)
        timeout = self.options.timeout or (longest * 3 + 60)
        for name in self.topo.source_hosts():
            host = self.network.host(name)
            log = open(self.run_dir / "logs" / f"{name}.source.log", "wb")
            proc = host.popen([sys.executable, "-m", "testbed.source", "--topology",
                               str(self.run_dir / "topology.yaml"), "--host", name,
                               "--intf", self.network.intf_of(name), "--out", str(self.run_dir)],
                              stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
            procs.register_pid(proc.pid, f"source on {name}")
            self.sources[name] = proc
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        with Progress(*columns, console=self.console, transient=False) as progress:
            t_sent = progress.add_task("events sent", total=total_events)
            t_recv = progress.add_task("deliveries received", total=expected)
            start = time.monotonic()
            last_change, last_received = time.monotonic(), -1
            while True:
                sent, done = self._source_progress()
                received = sum(self._receiver_status(n).get("received", 0) for n in self.receivers)
                progress.update(t_sent, completed=sent)
                progress.update(t_recv, completed=received)
                if received != last_received:
                    last_change, last_received = time.monotonic(), received
                if done and received >= expected:
                    break
                if done and time.monotonic() - last_change > SETTLE_S:
                    self.console.log(f"[yellow]{expected - received} deliveries still missing after "
                                     f"{SETTLE_S:.0f}s without progress; stopping")
                    break
                if time.monotonic() - start > timeout:
                    self.console.log(f"[red]timeout after {timeout:.0f}s")
                    break
                failed = [n for n, p in self.sources.items() if p.poll() not in (None, 0)]
                if failed:
                    raise RunError(f"source on {failed[0]} failed; see logs/{failed[0]}.source.log")
                time.sleep(POLL_S)
        self.record["phases_s"]["stream"] = round(time.monotonic() - start, 3)

    def _source_progress(self) -> tuple[int, bool]:
        sent, done = 0, True
        for name, proc in self.sources.items():
            status = self._read_json(self.run_dir / f"{name}.source.status.json")
            sent += sum(status.get("sent", {}).values())
            done = done and bool(status.get("final")) and proc.poll() is not None
        return sent, done

    def _receiver_status(self, name: str) -> dict:
        return self._read_json(self.run_dir / f"{name}.status.json")

    @staticmethod
    def _read_json(path: Path) -> dict:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    def _switch_counters(self) -> dict[str, Any]:
        out = Controller(self.api).stream_counters([s.id for s in self.topo.streams],
                                                   sorted(self.plan.ports.values()))
        if hasattr(self.api, "port_stats"):
            out["socket"] = self.api.port_stats()
        return out

    # -- teardown and results -------------------------------------------------
    def _teardown(self) -> None:
        """Stop receivers (they flush their data), sources, captures, then the network."""
        for group in (list(self.sources.values()), list(self.receivers.values()), self.captures):
            for proc in group:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in group:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                procs.unregister_pid(proc.pid)
        if self.api is not None and hasattr(self.api, "close"):
            try:
                self.api.close()
            except OSError:
                pass
        if self.network is not None:
            self.network.stop()
            self.network = None

    def _collect(self) -> None:
        """Merge per-host files into sources.parquet and deliveries.parquet;
        the per-host files and status files move to raw/."""
        raw = self.run_dir / "raw"
        raw.mkdir(exist_ok=True)
        for kind in ("sources", "deliveries"):
            parts = sorted(self.run_dir.glob(f"*.{kind}.parquet"))
            if parts:
                pq.write_table(pa.concat_tables([pq.read_table(p) for p in parts]),
                               self.run_dir / f"{kind}.parquet")
            for p in parts:
                p.replace(raw / p.name)
        for p in self.run_dir.glob("*.status.json"):
            p.replace(raw / p.name)

    def _finish(self) -> bool:
        sources = pd.read_parquet(self.run_dir / "sources.parquet")
        deliveries = pd.read_parquet(self.run_dir / "deliveries.parquet")
        results = check_frames(self.record["streams"], sources, deliveries)
        self.record["accounting"] = self._accounting(sources, deliveries, results)
        self.record["check"] = {str(k): v.as_json() for k, v in results.items()}
        ok = all(r.ok for r in results.values())
        if self.spark is not None:
            wins = check_windows(self.run_dir)
            self.record["window_check"] = {str(k): v.as_json() for k, v in wins.items()}
            ok = ok and all(w.ok for w in wins.values())
        self.record["ok"] = ok
        self._write_record()
        plot_run(self.run_dir)
        for line in summary_lines(results):
            self.console.print(line)
        if self.spark is not None:
            for line in window_summary_lines(wins):
                self.console.print(line)
        self.console.print(f"results: {self.run_dir}")
        return ok

    def _accounting(self, sources: pd.DataFrame, deliveries: pd.DataFrame, results) -> dict[str, Any]:
        """Every event: sent, received by each operator, dropped and why."""
        received_all = deliveries.groupby(["stream", "operator"]).size()
        switch = self.record.get("switch", {})
        receivers = {n: self._read_json(self.run_dir / "raw" / f"{n}.status.json").get("kernel_drops", {})
                     for n in self.receivers}
        out: dict[str, Any] = {"streams": {}, "receiver_kernel_drops": receivers,
                               "switch_socket": switch.get("socket", {}),
                               "non_event_frames_at_switch": switch.get("non_event", 0)}
        for s in self.topo.streams:
            r = results[s.id]
            counters = switch.get("streams", {}).get(s.id, {})
            sent = int((sources["stream"] == s.id).sum())
            per_operator = {op: int(received_all.get((s.id, op), 0)) for op in s.operators}
            seen = None
            if counters:
                seen = counters.get("in", 0) + sum(counters.get("dropped", {}).values())
            out["streams"][str(s.id)] = {
                "planned": s.events,
                "sent": sent,
                "received_per_operator": per_operator,
                "switch_accepted": counters.get("in"),
                "switch_copies_out": counters.get("out"),
                "dropped_at_switch": counters.get("dropped", {}),
                "undelivered_by_design": r.by_design,
                # Where deliveries went missing: frames the switch never
                # counted (lost on the way in), and copies it sent that no
                # operator recorded.  Count windows number events by arrival,
                # so one event lost on the way in shifts every later window.
                "lost_before_switch": None if seen is None else sent - seen,
                "lost_after_switch": None if not counters else counters.get("out", 0) - sum(per_operator.values()),
                "lost": r.missing,
            }
        return out

    def _stream_record(self, s) -> dict[str, Any]:
        return {"id": s.id, "name": s.name, "source": s.source, "operators": list(s.operators),
                "window": s.window.as_json(), "events": s.events, "rate": s.rate,
                "timestamps": s.timestamps.model_dump(), "query": s.query.model_dump()}

    def _base_record(self, started: float) -> dict[str, Any]:
        return {
            "name": self.topo.name, "run_id": self.run_id, "target": self.options.target,
            "topology_file": str(self.topology_path), "seed": self.topo.seed,
            "start": started, "git_revision": git_revision(), "versions": package_versions(),
            "command": sys.argv,
            "streams": {str(s.id): self._stream_record(s) for s in self.topo.streams},
            "operator_hosts": self.topo.operator_hosts(),
            "switch_ports": self.plan.ports,
            "topology": self.topo.model_dump(mode="json"),
        }

    def _write_topology(self) -> None:
        data = self.topo.model_dump(mode="json", exclude_none=True)
        data["switch"]["target"] = self.options.target
        (self.run_dir / "topology.yaml").write_text(yaml.safe_dump(data, sort_keys=False))

    def _write_record(self) -> None:
        tmp = self.run_dir / "run.json.tmp"
        tmp.write_text(json.dumps(self.record, indent=2, default=str))
        tmp.replace(self.run_dir / "run.json")
        latest = self.run_dir.parent / "latest"
        if self.options.out is None:
            try:
                if latest.is_symlink() or latest.exists():
                    latest.unlink()
                latest.symlink_to(self.run_dir.name)
            except OSError:
                pass
