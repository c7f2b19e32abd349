"""The operators' windowed computation: one Spark application per run.

Submit with ``spark-submit --master <url> operators/window_job.py --job <run>/spark/job.json``.
The testbed does this for every run (``testbed.spark.SparkApp``).  The job is
self-contained (only pyspark), so it runs on any Spark cluster that can read
the run directory.

What it does, in one application:

1. **Operators.** A Structured Streaming query reads the Parquet files that
   the operator hosts hand over (``spark/in/<host>/``).  Each micro-batch
   assigns every event to the windows *its operator owns*: window ``j`` of a
   stream with N operators belongs to operator ``j mod N``.  It then folds the
   events into partial aggregates, appended to ``spark/partials/``.
2. **Merger.** Once the run marks its input complete (``spark/in/_DONE``),
   the partials are reduced into the output stream ``windows.parquet``:
   stream, window, operator, key, result, n_events, completed_ns.
3. **Centralized reference.** The same windows are computed over the full
   stream that the sources sent (``sources.parquet``), without splitting:
   ``windows_reference.parquet``.
4. **Analysis.** Load per operator, per-window completeness, amplification
   and delivery-latency percentiles: ``spark/analysis.json``.

Window definitions are those of docs/windows.md.  Count windows use the
source's sequence number as the arrival index, which is what the splitter
counts when delivery is lossless and in order (``testbed check`` verifies
that separately).  Time windows use ``ts - origin``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

EVENT_SCHEMA = T.StructType([
    T.StructField("stream", T.LongType()), T.StructField("seq", T.LongType()),
    T.StructField("ts", T.LongType()), T.StructField("key", T.LongType()),
    T.StructField("value", T.LongType()), T.StructField("recv_ns", T.LongType()),
    T.StructField("operator", T.StringType()),
])
#: Bytes on the wire per delivered event: Ethernet 14 + IPv4 20 + UDP 8 + event 32.
FRAME_BYTES = 74
YSB_VIEW = 0


# ---------------------------------------------------------------------------
# window assignment
# ---------------------------------------------------------------------------
def axis(spec: dict) -> F.Column:
    """The event's coordinate on its window axis (docs/windows.md)."""
    if spec["window"]["kind"] == "count":
        return F.col("seq")
    return F.col("ts") - F.lit(spec["origin"])


def window_range(spec: dict) -> tuple[F.Column, F.Column]:
    """``(oldest, newest)`` window ids holding the event at axis position ``_x``.

    Integer division only (``div``), so 64-bit timestamps lose no precision:
    ``newest = x div slide`` and ``oldest = ceil((x - size + 1) / slide)``,
    at least 0.
    """
    size, slide = spec["window"]["size"], spec["window"]["slide"]
    newest = F.expr(f"_x div {slide}")
    oldest = F.expr(f"CASE WHEN _x - {size - 1} <= 0 THEN 0L ELSE (_x - {size - 1} + {slide - 1}) div {slide} END")
    return oldest, newest


def assign(events: DataFrame, spec: dict, per_operator: bool) -> DataFrame:
    """Explode the stream's events into (event, window) rows.

    With ``per_operator`` each row keeps only the windows that the operator
    which received it owns (``j = idx mod N``), stepping through them with
    stride N; otherwise (the centralized reference) every window is kept.
    """
    ops = spec["operators"]
    n_ops = len(ops)
    oldest, newest = window_range(spec)
    df = events.where(F.col("stream") == spec["id"]).withColumn("_x", axis(spec)).where(F.col("_x") >= 0)
    df = df.withColumn("_oldest", oldest).withColumn("_newest", newest)
    empty = F.array().cast("array<long>")
    if per_operator:
        idx = F.array_position(F.array(*[F.lit(o) for o in ops]), F.col("operator")) - 1
        first = F.col("_oldest") + F.pmod(idx - F.col("_oldest"), F.lit(n_ops))
        windows = F.when((idx >= 0) & (first <= F.col("_newest")),
                         F.sequence(first, F.col("_newest"), F.lit(n_ops).cast("long"))).otherwise(empty)
    else:
        windows = F.when(F.col("_oldest") <= F.col("_newest"),
                         F.sequence(F.col("_oldest"), F.col("_newest"))).otherwise(empty)
    df = df.withColumn("window", F.explode(windows)).drop("_x", "_oldest", "_newest")
    owner = F.element_at(F.array(*[F.lit(o) for o in ops]), (F.pmod(F.col("window"), F.lit(n_ops)) + 1).cast("int"))
    return df.withColumn("owner", owner)


# ---------------------------------------------------------------------------
# queries: partial aggregates that merge associatively
# ---------------------------------------------------------------------------
def group_key(spec: dict) -> F.Column:
    return F.col("key") if spec["query"] == "ysb_campaign_count" else F.lit(0).cast("long")


def partials(df: DataFrame, spec: dict) -> DataFrame:
    if spec["query"] == "ysb_campaign_count":
        df = df.where(F.col("value") == YSB_VIEW)
    return (df.withColumn("gkey", group_key(spec))
              .groupBy("stream", "window", "owner", "gkey")
              .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("sum"),
                   F.min("value").alias("min"), F.max("value").alias("max"),
                   # highest bid, lowest bidder on ties: max of (price, -bidder)
                   F.max(F.struct(F.col("value"), (-F.col("key")).alias("neg_key"))).alias("best")))


def merge(parts: DataFrame) -> DataFrame:
    return (parts.groupBy("stream", "window", "owner", "gkey")
                 .agg(F.sum("n").alias("n"), F.sum("sum").alias("sum"), F.min("min").alias("min"),
                      F.max("max").alias("max"), F.max("best").alias("best"),
                      F.max("batch_ns").alias("completed_ns")))


def finalize(df: DataFrame, specs: dict[int, dict]) -> DataFrame:
    """Result column per query kind; ``key`` is the campaign (YSB) or bidder (Q7)."""
    out = None
    for sid, spec in specs.items():
        q = spec["query"]
        part = df.where(F.col("stream") == sid)
        result = {"count": F.col("n").cast("double"), "sum": F.col("sum").cast("double"),
                  "min": F.col("min").cast("double"), "max": F.col("max").cast("double"),
                  "mean": (F.col("sum") / F.col("n")).cast("double"),
                  "nexmark_q7": F.col("best.value").cast("double"),
                  "ysb_campaign_count": F.col("n").cast("double")}[q]
        key = {"nexmark_q7": -F.col("best.neg_key"), "ysb_campaign_count": F.col("gkey")}.get(q, F.lit(None))
        part = part.select("stream", "window", F.col("owner").alias("operator"), key.cast("long").alias("key"),
                           result.alias("result"), F.col("n").alias("n_events"),
                           *([F.col("completed_ns")] if "completed_ns" in df.columns else []))
        out = part if out is None else out.unionByName(part)
    return out


# ---------------------------------------------------------------------------
# the application
# ---------------------------------------------------------------------------
class WindowJob:
    def __init__(self, spark: SparkSession, job: dict):
        self.spark = spark
        self.job = job
        self.run_dir = Path(job["run_dir"])
        self.spark_dir = self.run_dir / "spark"
        self.specs = {int(s["id"]): s for s in job["streams"]}

    def operator_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: every operator's events folded into partial aggregates."""
        now = time.time_ns()
        frames = [partials(assign(batch, spec, per_operator=True), spec) for spec in self.specs.values()]
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        out.withColumn("batch_ns", F.lit(now)).write.mode("append").parquet(str(self.spark_dir / "partials"))

    def stream(self) -> None:
        in_dir = self.spark_dir / "in"
        events = (self.spark.readStream.schema(EVENT_SCHEMA).option("recursiveFileLookup", "true")
                  .parquet(str(in_dir)))
        query = (events.writeStream.foreachBatch(self.operator_batch)
                 .option("checkpointLocation", str(self.spark_dir / "checkpoint"))
                 .trigger(processingTime=f"{self.job.get('trigger_ms', 1000)} milliseconds").start())
        (self.spark_dir / "ready").write_text(str(os.getpid()))
        done = in_dir / "_DONE"
        while not done.exists():
            if query.exception() is not None:
                raise query.exception()
            time.sleep(0.2)
        query.processAllAvailable()
        query.stop()

    def merge_output(self) -> None:
        parts = self.spark.read.parquet(str(self.spark_dir / "partials"))
        finalize(merge(parts), self.specs).orderBy("stream", "window", "key") \
            .toPandas().to_parquet(self.run_dir / "windows.parquet", index=False)

    def reference(self) -> None:
        sources = self.spark.read.parquet(str(self.run_dir / "sources.parquet"))
        frames = [partials(assign(sources, spec, per_operator=False), spec) for spec in self.specs.values()]
        ref = frames[0]
        for f in frames[1:]:
            ref = ref.unionByName(f)
        finalize(ref, self.specs).orderBy("stream", "window", "key") \
            .toPandas().to_parquet(self.run_dir / "windows_reference.parquet", index=False)

    def analysis(self) -> None:
        spark = self.spark
        deliveries = spark.read.parquet(str(self.run_dir / "deliveries.parquet"))
        sources = spark.read.parquet(str(self.run_dir / "sources.parquet"))
        windows = spark.read.parquet(str(self.run_dir / "windows.parquet"))
        ref = spark.read.parquet(str(self.run_dir / "windows_reference.parquet"))
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
        (self.spark_dir / "analysis.json").write_text(json.dumps(analysis, indent=2, default=str))

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
