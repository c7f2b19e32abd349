"""The operators' windowed computation: one Spark application per run.

Submit with ``spark-submit --master <url> --py-files <run>/spark/testbed.zip
operators/window_job.py --job <run>/spark/job.json``.  The testbed does this
for every run (``testbed.analysis.spark.SparkApp``).  Besides pyspark, the job
needs only the ``testbed.semantics`` package, which the zip ships to every
executor, so it runs on any Spark cluster that can read the run directory.
The job description names every path it reads and writes.

What it does, in one application:

1. **Operators.** A Structured Streaming query reads the Parquet files that
   the operator hosts hand over.  Each micro-batch assigns every event to
   the windows *its operator owns* and folds the events into partial
   aggregates.
2. **Merger.** Once the run marks its input complete, the partials are
   reduced into the output stream ``windows.parquet``: stream, window,
   operator, key, result, n_events, completed_ns.
3. **Centralized reference.** The same windows are computed over the full
   stream that the sources sent, without splitting: ``windows_reference.parquet``.
4. **Analysis.** Load per operator, per-window completeness, amplification
   and delivery-latency percentiles: ``analysis.json``.

Which windows hold an event, and which operator owns a window, is
``testbed.semantics.windows``; what each query computes is
``testbed.semantics.queries``.  This file only moves data through Spark.
Count windows use the source's sequence number as the arrival index, which
is what the splitter counts when delivery is lossless and in order
(``testbed check`` verifies that separately).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from itertools import chain
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from testbed.semantics.queries import query
from testbed.semantics.windows import make_assigner, window_owners

EVENT_FIELDS = [T.StructField(name, T.LongType()) for name in ("stream", "seq", "ts", "key", "value")]
DELIVERY_SCHEMA = T.StructType(EVENT_FIELDS + [T.StructField("recv_ns", T.LongType()),
                                               T.StructField("operator", T.StringType())])
#: Bytes on the wire per delivered event: Ethernet 14 + IPv4 20 + UDP 8 + event 32.
FRAME_BYTES = 74


# ---------------------------------------------------------------------------
# window assignment (the arithmetic is testbed.semantics.windows')
# ---------------------------------------------------------------------------
def assign(events: DataFrame, spec: dict, per_operator: bool) -> DataFrame:
    """Explode the stream's events into (event, window, owner) rows.

    With ``per_operator`` each row keeps only the windows that the operator
    which received it owns; otherwise (the centralized reference) every
    window is kept.
    """
    w = spec["window"]
    assigner = make_assigner(w["kind"], w["size"], w["slide"])
    operators = list(spec["operators"])
    index = {op: i for i, op in enumerate(operators)}
    origin = spec["origin"]
    columns = ["stream", "seq", "ts", "key", "value"] + (["operator"] if per_operator else [])
    df = events.where(F.col("stream") == spec["id"]).select(*columns)
    schema = T.StructType([f for f in DELIVERY_SCHEMA.fields if f.name in columns]
                          + [T.StructField("window", T.LongType()), T.StructField("owner", T.StringType())])

    def explode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            owner = (batch["operator"].map(index).fillna(-1).to_numpy(dtype=np.int64)
                     if per_operator else None)
            ranges = assigner.assign_many(batch["seq"].to_numpy(), batch["ts"].to_numpy(), origin,
                                          owner, len(operators))
            out = batch.loc[batch.index.repeat([len(r) for r in ranges])].reset_index(drop=True)
            windows = np.fromiter(chain.from_iterable(ranges), dtype=np.int64, count=len(out))
            out["window"] = windows
            out["owner"] = window_owners(windows, operators) if len(out) else []
            yield out

    return df.mapInPandas(explode, schema)


# ---------------------------------------------------------------------------
# queries: partial aggregates that merge associatively
# ---------------------------------------------------------------------------
def partials(df: DataFrame, spec: dict) -> DataFrame:
    q = query(spec["query"]["kind"])
    if q.only_value is not None:
        df = df.where(F.col("value") == q.only_value)
    group = F.col("key") if q.group_by_key else F.lit(0).cast("long")
    return (df.withColumn("gkey", group)
              .groupBy("stream", "window", "owner", "gkey")
              .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("sum"),
                   F.min("value").alias("min"), F.max("value").alias("max"),
                   # highest value, lowest key on ties: max of (value, -key)
                   F.max(F.struct(F.col("value"), (-F.col("key")).alias("neg_key"))).alias("best")))


def merge(parts: DataFrame) -> DataFrame:
    return (parts.groupBy("stream", "window", "owner", "gkey")
                 .agg(F.sum("n").alias("n"), F.sum("sum").alias("sum"), F.min("min").alias("min"),
                      F.max("max").alias("max"), F.max("best").alias("best"),
                      F.max("batch_ns").alias("completed_ns")))


#: A query's result and key, named in ``QueryDef``, as columns of the merged partials.
RESULT_COLUMNS = {"n": lambda: F.col("n"), "sum": lambda: F.col("sum"), "min": lambda: F.col("min"),
                  "max": lambda: F.col("max"), "mean": lambda: F.col("sum") / F.col("n"),
                  "best": lambda: F.col("best.value")}
KEY_COLUMNS = {None: lambda: F.lit(None), "group": lambda: F.col("gkey"), "best": lambda: -F.col("best.neg_key")}


def finalize(df: DataFrame, specs: dict[int, dict]) -> DataFrame:
    """One row per (stream, window, key): the query's result and its key."""
    out = None
    for sid, spec in specs.items():
        q = query(spec["query"]["kind"])
        part = df.where(F.col("stream") == sid).select(
            "stream", "window", F.col("owner").alias("operator"), KEY_COLUMNS[q.key]().cast("long").alias("key"),
            RESULT_COLUMNS[q.result]().cast("double").alias("result"), F.col("n").alias("n_events"),
            *([F.col("completed_ns")] if "completed_ns" in df.columns else []))
        out = part if out is None else out.unionByName(part)
    return out


# ---------------------------------------------------------------------------
# the application
# ---------------------------------------------------------------------------
def union_all(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


class WindowJob:
    """The run's operators, merger, reference and analysis, over the paths of its job description."""

    def __init__(self, spark: SparkSession, job: dict):
        self.spark = spark
        self.job = job
        self.paths = job["paths"]
        self.specs = {int(s["id"]): s for s in job["streams"]}

    def operator_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: every operator's events folded into partial aggregates."""
        now = time.time_ns()
        out = union_all([partials(assign(batch, spec, per_operator=True), spec) for spec in self.specs.values()])
        out.withColumn("batch_ns", F.lit(now)).write.mode("append").parquet(self.paths["partials"])

    def stream(self) -> None:
        events = (self.spark.readStream.schema(DELIVERY_SCHEMA).option("recursiveFileLookup", "true")
                  .parquet(self.paths["in"]))
        running = (events.writeStream.foreachBatch(self.operator_batch)
                   .option("checkpointLocation", self.paths["checkpoint"])
                   .trigger(processingTime=f"{self.job.get('trigger_ms', 1000)} milliseconds").start())
        Path(self.paths["ready"]).write_text(str(os.getpid()))
        done = Path(self.paths["input_done"])
        while not done.exists():
            if running.exception() is not None:
                raise running.exception()
            time.sleep(0.2)
        running.processAllAvailable()
        running.stop()

    def write_windows(self, partial: DataFrame, path: str) -> None:
        finalize(partial, self.specs).orderBy("stream", "window", "key").toPandas().to_parquet(path, index=False)

    def merge_output(self) -> None:
        self.write_windows(merge(self.spark.read.parquet(self.paths["partials"])), self.paths["windows"])

    def reference(self) -> None:
        sources = self.spark.read.parquet(self.paths["sources"])
        self.write_windows(union_all([partials(assign(sources, spec, per_operator=False), spec)
                                      for spec in self.specs.values()]), self.paths["windows_reference"])

    def analysis(self) -> None:
        spark = self.spark
        deliveries = spark.read.parquet(self.paths["deliveries"])
        sources = spark.read.parquet(self.paths["sources"])
        windows = spark.read.parquet(self.paths["windows"])
        ref = spark.read.parquet(self.paths["windows_reference"])
        load = (deliveries.groupBy("operator", "stream").agg(F.count(F.lit(1)).alias("events"))
                .withColumn("bytes", F.col("events") * FRAME_BYTES)
                .join(windows.groupBy("operator", "stream").agg(F.countDistinct("window").alias("windows")),
                      ["operator", "stream"], "left").fillna(0, ["windows"]))
        sent = sources.groupBy("stream").agg(F.count(F.lit(1)).alias("sent"))
        out = deliveries.groupBy("stream").agg(F.count(F.lit(1)).alias("delivered"))
        amp = sent.join(out, "stream", "left").fillna(0, ["delivered"]) \
                  .withColumn("amplification", F.col("delivered") / F.col("sent"))
        lat = deliveries.join(sources.select("stream", "seq", "send_ns"), ["stream", "seq"]) \
                        .withColumn("latency_us", (F.col("recv_ns") - F.col("send_ns")) / 1000.0)
        pct = lat.groupBy("stream").agg(*[F.percentile_approx("latency_us", p, 10000).alias(f"p{int(p * 100)}")
                                          for p in (0.5, 0.9, 0.99)], F.max("latency_us").alias("max"))
        # key is null for unkeyed queries, and null never equals null in a join
        keyed = lambda df, n: df.select("stream", "window", F.coalesce("key", F.lit(-1)).alias("k"),  # noqa: E731
                                        F.col("n_events").alias(n))
        keys = ["stream", "window", "k"]
        comp = keyed(ref, "expected").join(keyed(windows, "got"), keys, "left").fillna(0, ["got"])
        completeness = comp.groupBy("stream").agg(
            F.count(F.lit(1)).alias("windows"),
            F.sum((F.col("got") == F.col("expected")).cast("int")).alias("complete"),
            F.avg(F.col("got") / F.col("expected")).alias("mean_fill"))
        rows = lambda df: [r.asDict() for r in df.orderBy(*df.columns[:2]).collect()]
        analysis = {"load": rows(load), "amplification": rows(amp), "latency_us": rows(pct),
                    "completeness": rows(completeness), "spark_master": spark.sparkContext.master,
                    "spark_version": spark.version, "application_id": spark.sparkContext.applicationId}
        Path(self.paths["analysis"]).write_text(json.dumps(analysis, indent=2, default=str))

    def run(self) -> None:
        self.stream()
        self.merge_output()
        self.reference()
        self.analysis()


def main() -> None:
    ap = argparse.ArgumentParser(description="testbed operators: windowed computation on Spark")
    ap.add_argument("--job", required=True, type=Path, help="job description written by testbed run")
    args = ap.parse_args()
    job = json.loads(args.job.read_text())
    spark = (SparkSession.builder.appName(f"testbed-{job.get('run_id', 'run')}")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    try:
        WindowJob(spark, job).run()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
