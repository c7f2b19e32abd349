"""The bench's file names inside its experiment directory, in one place.

    experiment.json                   the record: parameters, a summary per part (``ours``)
    raw/<part>.parquet                one row per measured sample or configuration
    raw/<run>.yaml                    the topology of each emulation run
    runs/<run>/                       the emulation runs (rate points, scale runs)
    <part>.png                        figures, drawn from raw/ alone
"""
from __future__ import annotations

from pathlib import Path

from testbed.rundir import ExperimentDir, RunDir


class BenchFiles:
    """Paths of the bench's raw tables, topologies and runs under one ``ExperimentDir``."""

    def __init__(self, expdir: ExperimentDir):
        self.expdir = expdir

    def table(self, part: str) -> Path:
        return self.expdir.raw / f"{part}.parquet"

    def topology(self, run: str) -> Path:
        return self.expdir.raw / f"{run}.yaml"

    def run(self, run: str) -> RunDir:
        return self.expdir.run(run)

    def figure(self, part: str) -> Path:
        return self.expdir.figure(part)
