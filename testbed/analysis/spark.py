"""The operators' Spark application: one per run, or one warm for an experiment's runs.

``SparkApp`` submits ``operators/window_job.py`` to a master URL (``local[*]``
by default, or any ``spark://`` / ``yarn`` / ``k8s://`` master), with the
``testbed`` package zipped for ``--py-files`` so the executors compute
windows with the very definitions the oracle uses.  The driver binds to
loopback and the UI is off.  The app is ready when its process is alive and
it has written its ready file (its streaming query has started).  The run
marks the input complete, then waits for the merger and the analysis.

``SparkService`` is the same job submitted once with ``--serve``: an
experiment's runs hand it their job descriptions one after another
(``ServedSparkApp``, which the run drives as it drives a ``SparkApp``), so
only the first pays for the JVM, the session and the Python workers.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Optional

from testbed import ROOT
from testbed.emulation import procs
from testbed.rundir import RunDir, write_json_atomic
from testbed.runs.parts import PartFailed
from testbed.semantics.topology import Topology
from testbed.semantics.workload import sent_events
from testbed.targets.base import CpuPolicy

JOB = ROOT / "operators" / "window_job.py"
PACKAGE = ROOT / "testbed"
DEFAULT_MASTER = "local[*]"

#: How the Spark application is scheduled against the switch, the sources and
#: the receivers.  ``idle``: SCHED_IDLE and nice 19, so it runs only on CPU
#: time nothing else wants and catches up after the stream; ``nice``: the
#: time-sharing class at nice 10, a smaller share than the hosts' processes
#: but never starved; ``normal``: nice 0, an equal share.  The switch's own
#: policy (``--switch-cpu``, SCHED_FIFO by default) is above all three.
#: Measured in docs/spark.md, "How Spark shares the CPU".
SPARK_CPU = {
    "idle": CpuPolicy("idle", ["chrt", "--idle", "0", "nice", "-n", "19"], "SCHED_IDLE, nice 19"),
    "nice": CpuPolicy("nice", ["nice", "-n", "10"], "SCHED_OTHER, nice 10"),
    "normal": CpuPolicy("normal", [], "SCHED_OTHER, nice 0"),
}
DEFAULT_SPARK_CPU = "nice"


class SparkError(PartFailed):
    """The Spark application failed to start, failed, or did not finish in time."""


def spark_home() -> Optional[Path]:
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent


def spark_missing() -> Optional[str]:
    """Why the Spark part cannot run here, or ``None``."""
    if spark_home() is None:
        return "pyspark is not installed (pip install pyspark)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (apt-get install openjdk-17-jre-headless)"
    return None


def loopback_env() -> dict[str, str]:
    """Environment that keeps every Spark port on loopback and uses our Python."""
    env = dict(os.environ)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost",
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    return env


def zip_package(dest: Path) -> Path:
    """The ``testbed`` package's Python files as a zip for ``--py-files``."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(PACKAGE.rglob("*.py")):
            zf.write(path, path.relative_to(PACKAGE.parent))
    return dest


def job_description(topo: Topology, run_id: str, rundir: RunDir, window_timeout_s: Optional[float] = None) -> dict:
    """What the Spark job needs: each stream's record with its origin resolved, and its paths.

    A time window's default origin is the stream's first timestamp; the
    operators are told it here, as a deployment's control plane would after
    reading the splitter's ``slide_start`` register.  ``cep`` is the
    topology's CEP rules, whose complex events the job computes as a
    centralized reference (or ``None``).  ``live`` says whether
    the live merger may emit the stream's windows as they complete: not when
    the schedule changes its window spec, since a window's extent then
    depends on the epoch the switch began it in (they leave at the end of the
    input).  ``window_timeout_s``: a window that has not changed for this
    long leaves marked incomplete (``None``: only at the end of the input).
    """
    respecified = {e.change.stream for e in topo.schedule if e.change is not None and e.change.window is not None}
    streams = []
    for s in topo.streams:
        origin = s.window.origin
        if origin is None:
            origin = int(sent_events(s, topo.seed)["ts"][0])     # the first event the switch sees
        streams.append(dict(s.record(), origin=origin, live=s.id not in respecified))
    return {"run_id": run_id, "streams": streams, "paths": rundir.spark_paths(), "window_timeout_s": window_timeout_s,
            "cep": topo.cep.model_dump(mode="json") if topo.cep is not None else None,
            "cep_timeline": topo.cep_timeline().model_dump(mode="json") if topo.cep is not None else None}


def submit(master: str, cpu_policy: CpuPolicy, package: Path, job_args: list[str], log_path: Path,
           cwd: Path) -> subprocess.Popen:
    """``spark-submit`` of the window job, with its ports on loopback, as its own process group."""
    cmd = [*cpu_policy.prefix, str(spark_home() / "bin" / "spark-submit"),
           "--master", master,
           "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           "--driver-memory", "2g", "--py-files", str(package), str(JOB), *job_args]
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=loopback_env(), start_new_session=True, cwd=cwd)


def marked_complete(rundir: RunDir, changes: Optional[dict], unseen: Optional[dict[str, list[int]]]) -> None:
    """What the reference needs from the run (``SparkApp.finish``), then the input's end."""
    write_json_atomic(rundir.spark_changes, changes or {})
    write_json_atomic(rundir.spark_unseen, unseen or {})
    rundir.spark_input_done.write_text("")


class SparkApp:
    """Lifecycle of the run's own Spark application: start, wait_ready, finish, stop."""

    def __init__(self, rundir: RunDir, job: dict, master: str = DEFAULT_MASTER, cpu: str = DEFAULT_SPARK_CPU):
        self.rundir = rundir
        self.master = master
        self.job = job
        self.cpu_policy = SPARK_CPU[cpu]
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        self.rundir.spark_in.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.rundir.spark_job, self.job)
        self.proc = submit(self.master, self.cpu_policy, zip_package(self.rundir.spark_package),
                           ["--job", str(self.rundir.spark_job)], self.rundir.spark_log, self.rundir.root)
        procs.register_pid(self.proc.pid, f"spark application ({self.master})")

    def wait_ready(self, timeout: float = 180.0) -> None:
        procs.wait_ready(self.proc, self.rundir.spark_ready.exists, "Spark application", timeout,
                         self.rundir.spark_log, SparkError, poll_s=0.2)

    def finish(self, timeout: float = 600.0, changes: Optional[dict] = None,
               unseen: Optional[dict[str, list[int]]] = None) -> dict:
        """Mark the input complete and wait for the merger and analysis.
        ``changes`` (run.json's, per stream) are the epochs the switch went
        through, and ``unseen`` (per stream) the seqs of events that never
        reached it: the centralized reference computes windows by the one and
        without the other."""
        marked_complete(self.rundir, changes, unseen)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SparkError(f"Spark application did not finish in {timeout:.0f}s") from None
        finally:
            self.stop()
        if code != 0:
            raise SparkError(f"Spark application failed ({code}); log tail:\n"
                             f"{procs.log_tail(self.rundir.spark_log)}")
        return json.loads(self.rundir.spark_analysis.read_text())

    def stop(self) -> None:
        """End the application if it still runs (idempotent)."""
        procs.stop_group(self.proc, grace=10)


class SparkService:
    """One warm Spark application that serves an experiment's runs, one after another.

    Started at the first run that asks for it (``app``) and stopped with the
    experiment (``stop``).  Its process is recorded under its own state file
    (``procs.owned_by``), since it outlives every run it serves; its log is
    ``<folder>/spark.log``, each run's part of it in the run's own log.
    """

    def __init__(self, folder: Path, master: str = DEFAULT_MASTER, cpu: str = DEFAULT_SPARK_CPU,
                 owner_id: Optional[str] = None):
        self.folder = folder.resolve()
        self.master = master
        self.cpu_policy = SPARK_CPU[cpu]
        self.owner_id = owner_id or f"spark-{os.getpid()}"
        self.proc: Optional[subprocess.Popen] = None
        self.served = 0              # runs handed to it, over its restarts
        self.served_by_this = 0      # runs handed to the application now running
        self.restarts = 0

    @property
    def log(self) -> Path:
        return self.folder / "spark.log"

    def _recorded(self):
        """Its process's entries go to its own state file, not the current run's."""
        return procs.owned_by(self.owner_id, "warm Spark application")

    def start(self) -> None:
        """Submit the application, if not running; its readiness is waited for
        with the first run's.  One that died (a run's job took it down) is
        submitted again, so that the runs after it still have their operators."""
        if self.alive():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.proc is not None:
            with open(self.log, "a") as log:
                log.write(f"testbed: the warm Spark application exited (code {self.proc.returncode}); "
                          f"submitting it again for the next run\n")
            self.restarts += 1
            with self._recorded():
                procs.stop_group(self.proc)            # its group's stragglers, and its entry
        for leftover in ("stop", "ready"):
            (self.folder / leftover).unlink(missing_ok=True)
        package = zip_package(self.folder / "testbed.zip")
        self.served_by_this = 0
        with self._recorded():
            self.proc = submit(self.master, self.cpu_policy, package, ["--serve", str(self.folder)], self.log,
                               self.folder)
            procs.register_pid(self.proc.pid, f"warm spark application ({self.master})")

    def app(self, rundir: RunDir, job: dict) -> "ServedSparkApp":
        """The run's side of the service, for ``master`` and ``cpu`` (the service's own)."""
        return ServedSparkApp(self, rundir, job)

    def enqueue(self, rundir: RunDir, job: dict) -> None:
        """Hand a run's job to the application (which takes it once the run before is done)."""
        self.start()
        self.served += 1
        self.served_by_this += 1
        write_json_atomic(self.folder / f"{self.served:06d}.json", {**job, "log": str(rundir.spark_log.resolve()),
                                                                      "served": self.served_by_this})

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def describe(self) -> dict[str, Any]:
        """What the experiment's record says of it."""
        return {"warm": True, "master": self.master, "cpu_policy": self.cpu_policy.description,
                "runs_served": self.served, "restarts": self.restarts, "log": str(self.log)}

    def stop(self) -> None:
        """Ask the application to end after its current job; end it if it does not (idempotent)."""
        if self.proc is None:
            return
        (self.folder / "stop").write_text("")
        with self._recorded():
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            procs.stop_group(self.proc, grace=10)


@contextmanager
def warm_spark(folder: Path, settings: Any, owner_id: str) -> Iterator[Any]:
    """``settings`` (an experiment's ``Settings``) with a warm ``SparkService``
    in ``folder`` that its runs share, stopped on any exit; unchanged when
    its runs have no Spark, ask for one application each, or already share one."""
    if not settings.spark or not settings.warm_spark or settings.spark_service is not None:
        yield settings
        return
    service = SparkService(folder, settings.spark_master, owner_id=owner_id)
    try:
        yield replace(settings, spark_service=service)
    finally:
        service.stop()


class ServedSparkApp:
    """A run's job on the warm ``SparkService``: what ``SparkApp`` is for a run of its own."""

    def __init__(self, service: SparkService, rundir: RunDir, job: dict):
        self.service = service
        self.rundir = RunDir(rundir.root.resolve())
        self.job = {**job, "paths": self.rundir.spark_paths()}
        self.master = service.master
        self.cpu_policy = service.cpu_policy
        self.started = False

    @property
    def proc(self) -> Optional[subprocess.Popen]:
        return self.service.proc

    def start(self) -> None:
        self.rundir.spark_in.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.rundir.spark_job, self.job)
        self.service.enqueue(self.rundir, self.job)
        self.started = True

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Ready when the service has started this run's streaming query (or failed it)."""
        def ready() -> bool:
            return self.rundir.spark_ready.exists() or self.rundir.spark_done.exists()

        procs.wait_ready(self.proc, ready, "warm Spark application", timeout, self.service.log, SparkError,
                         poll_s=0.1)
        self._raise_if_failed()

    def finish(self, timeout: float = 600.0, changes: Optional[dict] = None,
               unseen: Optional[dict[str, list[int]]] = None) -> dict:
        marked_complete(self.rundir, changes, unseen)
        procs.wait_ready(self.proc, self.rundir.spark_done.exists, "warm Spark application", timeout,
                         self.service.log, SparkError, poll_s=0.1)
        self._raise_if_failed()
        return json.loads(self.rundir.spark_analysis.read_text())

    def _raise_if_failed(self) -> None:
        if self.rundir.spark_done.exists():
            outcome = json.loads(self.rundir.spark_done.read_text())
            if not outcome.get("ok"):
                raise SparkError(f"the warm Spark application failed this run's job: {outcome.get('error')}; "
                                 f"see {self.rundir.spark_log}")

    def stop(self) -> None:
        """Drop the job if the run ends before it is done (idempotent); the service stays warm."""
        if self.started and not self.rundir.spark_done.exists():
            self.rundir.spark_cancel.parent.mkdir(parents=True, exist_ok=True)
            self.rundir.spark_cancel.write_text("")
