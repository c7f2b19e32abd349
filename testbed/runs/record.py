"""What a run leaves behind: merged raw data, the accounting and ``run.json``.

These are plain functions over a ``RunDir`` and the run's record, so they
are tested without root, Mininet or a switch:

- ``collect`` merges the per-host files into ``sources.parquet`` and
  ``deliveries.parquet`` and moves the per-host files to ``raw/``;
- ``account`` says where every event went: sent, received by each
  operator, dropped at the switch and why, lost and where;
- ``evaluate`` runs the checks and writes accounting and verdicts into the record.
"""
from __future__ import annotations

import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from testbed import ROOT
from testbed.analysis.check import (
    StreamCheck,
    WindowCheck,
    check_frames,
    check_windows,
    failed_operators_windows,
    read_link_drops,
)
from testbed.runs.rundir import RunDir, read_json
from testbed.semantics.plan import SplitterPlan
from testbed.semantics.topology import Topology

#: Packages whose versions every run records.
RECORDED_PACKAGES = ("mininet", "scapy", "pyarrow", "pandas", "pydantic", "pyspark", "matplotlib")


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
    for pkg in RECORDED_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            try:
                mod = __import__(pkg)
                out[pkg] = getattr(mod, "VERSION", getattr(mod, "__version__", "unknown"))
            except ImportError:
                pass
    return out


def base_record(topo: Topology, plan: SplitterPlan, run_id: str, target: str, topology_file: str) -> dict[str, Any]:
    """Everything known about a run before it starts."""
    return {
        "name": topo.name, "run_id": run_id, "target": target,
        "topology_file": topology_file, "seed": topo.seed,
        "start": time.time(), "git_revision": git_revision(), "versions": package_versions(),
        "command": sys.argv,
        "streams": {str(s.id): s.record() for s in topo.streams},
        "operator_hosts": topo.operator_hosts(),
        "switch_ports": plan.ports,
        "topology": topo.model_dump(mode="json"),
    }


def collect(rundir: RunDir) -> None:
    """Merge per-host files into sources.parquet and deliveries.parquet;
    the per-host files and status files move to raw/."""
    rundir.raw.mkdir(parents=True, exist_ok=True)
    for kind, merged in (("sources", rundir.sources), ("deliveries", rundir.deliveries),
                         ("link_drops", rundir.link_drops)):
        parts = rundir.host_files(kind)
        if parts:
            pq.write_table(pa.concat_tables([pq.read_table(p) for p in parts]), merged)
        for p in parts:
            p.replace(rundir.raw / p.name)
    for p in rundir.host_files("status"):
        p.replace(rundir.raw / p.name)


def account(record: dict[str, Any], rundir: RunDir, sources: pd.DataFrame, deliveries: pd.DataFrame,
            results: dict[int, StreamCheck]) -> dict[str, Any]:
    """Every event: sent, received by each operator, dropped and why, lost and where."""
    received = deliveries.groupby(["stream", "operator"]).size()
    sent_per_stream = sources["stream"].value_counts()
    distinct_per_stream = sources.groupby("stream")["seq"].nunique()
    switch = record.get("switch", {})
    receivers = {host: read_json(rundir.raw_receiver_status(host)).get("kernel_drops", {})
                 for host in record["operator_hosts"]}
    out: dict[str, Any] = {"streams": {}, "receiver_kernel_drops": receivers,
                           "switch_socket": switch.get("socket", {}),
                           "non_event_frames_at_switch": switch.get("non_event", 0)}
    for sid_text, stream in record["streams"].items():
        sid = int(sid_text)
        r = results[sid]
        counters = switch.get("streams", {}).get(sid) or switch.get("streams", {}).get(sid_text, {})
        sent = int(sent_per_stream.get(sid, 0))
        per_operator = {op: int(received.get((sid, op), 0)) for op in stream["operators"]}
        seen: Optional[int] = None
        if counters:
            seen = counters.get("in", 0) + sum(counters.get("dropped", {}).values()) + r.lost_on_link
        out["streams"][sid_text] = {
            "planned": stream["events"],
            # A perturbed source withholds some events and repeats others on purpose.
            "withheld_at_source": stream["events"] - int(distinct_per_stream.get(sid, 0)),
            "sent": sent,
            "received_per_operator": per_operator,
            "switch_accepted": counters.get("in"),
            "switch_copies_out": counters.get("out"),
            "dropped_at_switch": counters.get("dropped", {}),
            "undelivered_by_design": r.by_design,
            # Where events went: dropped by a link relay, never counted by the
            # switch (lost on the way in), dropped by the switch (by reason,
            # too_late among them), and copies the switch sent that no
            # operator recorded.  Events lost before the switch count once:
            # the check numbers count windows over the events the switch saw.
            "lost_on_link": r.lost_on_link,
            "lost_before_switch": None if seen is None else sent - seen,
            "lost_after_switch": None if not counters else counters.get("out", 0) - sum(per_operator.values()),
            "lost": r.missing,
            "lost_events": r.lost,
            "lost_per_operator": r.missing_by_operator,
        }
    dead = {f["what"].rsplit(" ", 1)[-1] for f in record.get("faults", []) if f["what"].startswith("receiver")}
    if dead:
        # A receiver that died recorded nothing after its death: what its operator
        # misses is lost there, not in the network.
        out["lost_at_dead_receivers"] = {host: sum(s["lost_per_operator"].get(host, 0)
                                                   for s in out["streams"].values()) for host in sorted(dead)}
    return out


@dataclass
class Verdicts:
    """The checks of a finished run."""

    frames: dict[int, StreamCheck]
    windows: dict[int, WindowCheck] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.frames.values()) and all(w.ok for w in self.windows.values())


def check_deliveries(record: dict[str, Any], rundir: RunDir) -> dict[int, StreamCheck]:
    """The frame check of a collected run, per stream."""
    return check_frames(record["streams"], pd.read_parquet(rundir.sources), pd.read_parquet(rundir.deliveries),
                        record, read_link_drops(rundir))


def evaluate(record: dict[str, Any], rundir: RunDir, with_windows: bool,
             frames: Optional[dict[int, StreamCheck]] = None) -> Verdicts:
    """Check the run's deliveries (and windows), and put accounting and verdicts into ``record``;
    ``frames`` is the frame check if it was already made (``check_deliveries``)."""
    sources = pd.read_parquet(rundir.sources)
    deliveries = pd.read_parquet(rundir.deliveries)
    verdicts = Verdicts(frames if frames is not None else
                        check_frames(record["streams"], sources, deliveries, record, read_link_drops(rundir)))
    record["accounting"] = account(record, rundir, sources, deliveries, verdicts.frames)
    record["check"] = {str(k): v.as_json() for k, v in verdicts.frames.items()}
    if with_windows:
        # Windows a failed operator owned are the failure's: named, not failures of the splitter.
        verdicts.windows = check_windows(rundir, record, failed_operators_windows(verdicts.frames))
        record["window_check"] = {str(k): v.as_json() for k, v in verdicts.windows.items()}
    record["ok"] = verdicts.ok
    return verdicts
