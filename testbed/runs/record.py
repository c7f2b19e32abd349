"""What a run records of itself: the facts it starts from, and its merged raw data.

Plain functions over a ``RunDir``, tested without root, Mininet or a switch:

- ``base_record`` is ``run.json`` before the run starts: the topology, the
  plan's ports, the versions of everything involved;
- ``collect`` merges the per-host files into ``sources.parquet`` and
  ``deliveries.parquet`` and moves the per-host files to ``raw/``.

What the facts mean (accounting, checks) is the analysis' business
(``testbed.analysis.verdicts``), written to ``verdicts.json``.
"""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import time
from importlib import metadata
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from testbed import ROOT
from testbed.rundir import TABLE_COLUMNS, RunDir, RunRecord
from testbed.semantics.families import compact_families
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
    """Python's, the kernel's and the recorded packages' versions, as text."""
    out = {"python": platform.python_version(), "kernel": platform.release()}
    for pkg in RECORDED_PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            try:
                mod = __import__(pkg)
                out[pkg] = str(getattr(mod, "VERSION", getattr(mod, "__version__", "unknown")))
            except ImportError:
                pass
    return out


def base_record(topo: Topology, plan: SplitterPlan, run_id: str, target: str, topology_file: str) -> RunRecord:
    """Everything known about a run before it starts."""
    return RunRecord(
        name=topo.name, run_id=run_id, target=target, topology_file=topology_file, seed=topo.seed,
        start=time.time(), git_revision=git_revision(), versions=package_versions(), command=list(sys.argv),
        streams={str(s.id): s.record() for s in topo.streams}, operator_hosts=topo.operator_hosts(),
        switch_ports=plan.ports, topology=recorded_topology(topo))


def recorded_topology(topo: Topology) -> dict[str, Any]:
    """The topology as run.json keeps it: a family's members as the family
    (``compact_families``), since ``streams`` holds each of them already;
    65,536 streams written out twice made run.json 120 MB."""
    data = topo.model_dump(mode="json", exclude_none=True)
    data["streams"] = compact_families(data["streams"])
    return data


def collect(rundir: RunDir) -> None:
    """Merge per-host files into sources.parquet and deliveries.parquet (and,
    where sinks recorded any, complex_events.parquet); the per-host files and
    status files move to raw/."""
    rundir.raw.mkdir(parents=True, exist_ok=True)
    for kind, merged in (("sources", rundir.sources), ("deliveries", rundir.deliveries),
                         ("link_drops", rundir.link_drops), ("complex_events", rundir.complex_events)):
        parts = rundir.host_files(kind)
        if parts:
            pq.write_table(pa.concat_tables([pq.read_table(p) for p in parts]), merged)
        elif kind not in ("link_drops", "complex_events"):
            # Every receiver killed before its first flush (all operators failed, say): the
            # run still has a deliveries table, an empty one, so its events are accounted.
            pq.write_table(_empty_table(TABLE_COLUMNS[kind]), merged)
        for p in parts:
            p.replace(rundir.raw / p.name)
    for p in rundir.host_files("status"):
        p.replace(rundir.raw / p.name)
    shutil.rmtree(rundir.barrier_go(0).parent, ignore_errors=True)


def _empty_table(columns: tuple[str, ...]) -> pa.Table:
    """No rows, with the column types the sources and receivers write."""
    return pa.table({c: pa.array([], pa.string() if c in ("operator", "sink") else pa.int64()) for c in columns})
