"""The run's Spark application: started with spark-submit, one per run.

``SparkApp`` submits ``operators/window_job.py`` to a master URL (``local[*]``
by default, or any ``spark://`` / ``yarn`` / ``k8s://`` master), with the
``testbed`` package zipped for ``--py-files`` so the executors compute
windows with the very definitions the oracle uses.  The driver binds to
loopback and the UI is off.  The app is ready when its process is alive and
it has written its ready file (its streaming query has started).  The run
marks the input complete, then waits for the merger and the analysis.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Optional

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
    reading the splitter's ``slide_start`` register.  ``live`` says whether
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
    return {"run_id": run_id, "streams": streams, "paths": rundir.spark_paths(), "window_timeout_s": window_timeout_s}


class SparkApp:
    """Lifecycle of the run's Spark application: start, wait_ready, finish, stop."""

    def __init__(self, rundir: RunDir, job: dict, master: str = DEFAULT_MASTER, cpu: str = DEFAULT_SPARK_CPU):
        self.rundir = rundir
        self.master = master
        self.job = job
        self.cpu_policy = SPARK_CPU[cpu]
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        self.rundir.spark_in.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.rundir.spark_job, self.job)
        package = zip_package(self.rundir.spark_package)
        cmd = [*self.cpu_policy.prefix, str(spark_home() / "bin" / "spark-submit"),
               "--master", self.master,
               "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
               "--driver-memory", "2g", "--py-files", str(package),
               str(JOB), "--job", str(self.rundir.spark_job)]
        with open(self.rundir.spark_log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=loopback_env(), start_new_session=True, cwd=self.rundir.root)
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
        write_json_atomic(self.rundir.spark_changes, changes or {})
        write_json_atomic(self.rundir.spark_unseen, unseen or {})
        self.rundir.spark_input_done.write_text("")
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
