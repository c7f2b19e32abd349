"""The run's Spark application: started with spark-submit, one per run.

``SparkApp`` submits ``operators/window_job.py`` to a master URL (``local[*]``
by default, or any ``spark://`` / ``yarn`` / ``k8s://`` master).  The driver
binds to loopback and the UI is off.  The app is ready when its process is
alive and it has written ``spark/ready`` (its streaming query has started).
The run tells it that the input is complete by writing ``spark/in/_DONE``,
and then waits for it to finish merging and analysing.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from . import procs

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "operators" / "window_job.py"
DEFAULT_MASTER = "local[*]"


def spark_home() -> Optional[Path]:
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).parent


def spark_missing() -> Optional[str]:
    """Why the Spark part cannot run here, or ``None``."""
    home = spark_home()
    if home is None:
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


class SparkApp:
    """Lifecycle of the run's Spark application (submit, ready, finish, kill)."""

    def __init__(self, run_dir: Path, job: dict, master: str = DEFAULT_MASTER):
        self.run_dir = run_dir
        self.spark_dir = run_dir / "spark"
        self.master = master
        self.job = dict(job, run_dir=str(run_dir))
        self.proc: Optional[subprocess.Popen] = None
        self.log_path = run_dir / "logs" / "spark.log"

    def start(self) -> None:
        (self.spark_dir / "in").mkdir(parents=True, exist_ok=True)
        job_file = self.spark_dir / "job.json"
        job_file.write_text(json.dumps(self.job, indent=2))
        # SCHED_IDLE: the emulated data plane shares these cores, and bmv2
        # drops at its input when starved, so Spark gets only the CPU time
        # the data plane leaves over and catches up once the stream ends.
        cmd = ["chrt", "--idle", "0", "nice", "-n", "19", str(spark_home() / "bin" / "spark-submit"), "--master", self.master,
               "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
               "--driver-memory", "2g", str(JOB), "--job", str(job_file)]
        (self.run_dir / "logs").mkdir(exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=loopback_env(), start_new_session=True, cwd=self.run_dir)
        procs.register_pid(self.proc.pid, f"spark application ({self.master})")

    def wait_ready(self, timeout: float = 180.0) -> None:
        ready = self.spark_dir / "ready"    # written once its streaming query runs
        procs.wait_ready(self.proc, ready.exists, "Spark application", timeout, self.log_path, poll_s=0.2)

    def finish(self, timeout: float = 600.0) -> dict:
        """Mark the input complete and wait for the merger and analysis."""
        (self.spark_dir / "in" / "_DONE").write_text("")
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"Spark application did not finish in {timeout:.0f}s")
        procs.unregister_pid(self.proc.pid)
        if code != 0:
            raise RuntimeError(f"Spark application failed ({code}); log tail:\n{procs.log_tail(self.log_path)}")
        return json.loads((self.spark_dir / "analysis.json").read_text())

    def kill(self) -> None:
        procs.stop_group(self.proc, grace=10)


def job_description(topo, run_id: str) -> dict:
    """What the Spark job needs to know of each stream, origin resolved.

    A time window's default origin is the stream's first timestamp; the
    operators are told it here, as a deployment's control plane would after
    reading the splitter's ``slide_start`` register.
    """
    from .workload import stream_events

    streams = []
    for s in topo.streams:
        w = s.window
        origin = w.origin if w.origin is not None else int(stream_events(s, topo.seed, limit=1)["ts"][0])
        streams.append({"id": s.id, "name": s.label, "window": w.as_json(), "origin": origin,
                        "operators": list(s.operators), "query": s.query.kind})
    return {"run_id": run_id, "streams": streams}
