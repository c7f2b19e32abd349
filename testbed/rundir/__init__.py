"""The bottom layer: where a run's and an experiment's files are, and what the record holds.

Every other layer finds its files through ``RunDir`` and ``ExperimentDir``
(``paths``) and reads and writes the run's record through the typed models
of ``record``; this package imports nothing else of the testbed.
"""
from testbed.rundir.paths import ANALYSIS_FIELDS, TABLE_COLUMNS, At, ExperimentDir, RunDir, read_json, write_json_atomic
from testbed.rundir.record import (
    Fault,
    FrameVerdict,
    PathCounters,
    RunDirError,
    RunRecord,
    RunVerdicts,
    SparkLag,
    SwitchCounters,
    WindowVerdict,
)

__all__ = [
    "ANALYSIS_FIELDS", "TABLE_COLUMNS", "At", "ExperimentDir", "Fault", "FrameVerdict", "PathCounters", "RunDir",
    "RunDirError", "RunRecord", "RunVerdicts", "SparkLag", "SwitchCounters", "WindowVerdict", "read_json",
    "write_json_atomic",
]
