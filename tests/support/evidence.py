"""A finished run with every kind of evidence ``testbed check`` judges, written without emulation.

One count stream (size 2, slide 1) from h1 to h2, h3, h4, and a CEP rule
whose complex events go to h5; the run's record says its Spark application
finished, so its windows, their reference and Spark's complex events are
part of the run.  Every table is what a faultless run would have written:
the deliveries are the oracle's, the windows equal their reference, and
each sink holds the oracle's complex events.  Tests then damage one piece
and see which verdict notices.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from support import topologies
from support.records import record_of, switch_saw
from testbed.rundir import RunDir
from testbed.semantics.cep.reference import complex_events
from testbed.semantics.cep.rules import CepRules

STREAM = 4
OPERATORS = ["h2", "h3", "h4"]
SINK = "h5"
VALUES = [3, -1, 4, 1, -5, 9, 2, 6, 5, -3, 5, 8]
CEP = {"windows": [{"name": "recent", "stream": STREAM, "field": "value", "size": 2}],
       "complex_events": [{"name": "high", "id": 1, "stream": STREAM, "pattern": "[value > 3]", "sinks": [SINK]}]}
#: What run.json holds of a Spark application that finished (``RunRecord.spark_computed``).
SPARK_FINISHED = {"spark": {"spark_master": "local[2]"}, "spark_master": "local[2]"}


def write_checked_run(root, spark: dict[str, Any] = SPARK_FINISHED) -> RunDir:
    """The run directory at ``root``; ``spark`` holds run.json's Spark facts."""
    window = {"kind": "count", "size": 2, "slide": 1}
    topo = topologies.build([topologies.stream(STREAM, window, OPERATORS, events=len(VALUES))], 5, cep=CEP)
    stream = topo.streams[0]
    rundir = RunDir(root).create()
    n = len(VALUES)
    sources = pd.DataFrame({"stream": STREAM, "seq": range(n), "ts": range(n), "key": 0, "value": VALUES,
                            "send_ns": range(100, 100 + n)})
    oracle = stream.oracle()
    copies = [(seq, op) for seq in range(n) for op in oracle.step(seq, seq).operators]
    deliveries = pd.DataFrame({"stream": STREAM, "seq": [s for s, _ in copies], "operator": [op for _, op in copies],
                               "recv_ns": 1000}).merge(sources.drop(columns="send_ns"), on=["stream", "seq"])
    sources.to_parquet(rundir.sources)
    deliveries.to_parquet(rundir.deliveries)
    # Window j holds events j and j+1; the last, partial window is left out as the job leaves it out.
    last = n - 1
    windows = pd.DataFrame({"stream": STREAM, "window": range(last),
                            "operator": [OPERATORS[j % 3] for j in range(last)],
                            "key": None, "result": [float(VALUES[j] + VALUES[j + 1]) for j in range(last)],
                            "n_events": 2, "completed_ns": 2000})
    windows.to_parquet(rundir.windows)
    windows.to_parquet(rundir.windows_reference)
    found = complex_events(CepRules.model_validate(CEP), sources)
    found.to_parquet(rundir.complex_events_reference)
    found.drop(columns=["send_ns", "rank"]).assign(recv_ns=found["send_ns"] + 1000, at=0, sink=SINK) \
        .to_parquet(rundir.complex_events)
    record = record_of({str(STREAM): stream.record()}, name="evidence", topology=topo.model_dump(mode="json"),
                       switch=switch_saw(STREAM, n, out=len(copies)), **spark)
    rundir.write_record(record)
    return rundir
