"""The operators' windowed computation: one Spark application per run, or one an experiment shares.

Submit with ``spark-submit --master <url> --py-files <run>/spark/testbed.zip
operators/window_job.py --job <run>/spark/job.json``.  The testbed does this
for a single run (``testbed.analysis.spark.SparkApp``).  An experiment's runs
share one warm application instead: ``--serve <folder>`` takes the job
descriptions dropped into the folder one after another, each run's as it
comes, until the folder holds ``stop`` (``testbed.analysis.spark.SparkService``).
Besides pyspark, the job needs only the ``testbed.semantics`` package, which
the zip ships to every executor (and lark, for a topology with CEP rules), so
it runs on any Spark cluster that can read the run directory.
The job description names every path it reads and writes.

What it does, in one application:

1. **Operators.** A Structured Streaming query reads the Parquet files that
   the operator hosts hand over.  Each micro-batch puts every event into
   the windows its copy's Windows header names (the windows of the event
   that its operator owns, as the splitter wrote them) and folds the events
   into partial aggregates, in one ``mapInPandas`` stage; the live merger
   emits every window that became complete.
2. **Merger.** Once the run marks its input complete, the partials are
   reduced into the output stream ``windows.parquet``: stream, window,
   operator, key, result, n_events, completed_ns.
3. **Centralized reference.** The same windows are computed over the full
   stream that reached the switch, without splitting, by the definitions
   (with the epochs the run went through, when it changed a stream):
   ``windows_reference.parquet``.  Events lost before the switch are left
   out, as the switch's windows left them out: the frame check counts
   such a loss, once.  With CEP rules (``cep:``), the same for complex
   events: each stream's, stepped in send order by the definitions of
   docs/cep.md, one Spark group per stream: ``complex_events_reference.parquet``.
4. **Analysis.** Load per operator, per-window completeness, amplification
   and delivery-latency percentiles: ``analysis.json``.

The operators learn their windows from the event alone, so they stay right
across a change of N or of the window spec, and after events lost before the
switch; nothing about the stream's configuration is given to them.  Which
windows hold an event for the reference, and which operator owns a window,
is ``testbed.semantics.windows``; what each query computes is
``testbed.semantics.queries``.  This file only moves data through Spark.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from contextlib import redirect_stderr
from itertools import chain
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from testbed.semantics.cep.changes import CepTimeline
from testbed.semantics.cep.reference import COLUMNS as COMPLEX_EVENT_COLUMNS
from testbed.semantics.cep.reference import complex_events
from testbed.semantics.cep.rules import CepRules
from testbed.semantics.completion import LiveMerger, live_differences
from testbed.semantics.partials import PARTIAL_COLUMNS, fold
from testbed.semantics.queries import query
from testbed.semantics.splitting import key_owners
from testbed.semantics.topology import Stream
from testbed.semantics.windows import make_assigner, window_owners

EVENT_FIELDS = [T.StructField(name, T.LongType()) for name in ("stream", "seq", "ts", "key", "value")]
#: The Windows header of each copy (``testbed.emulation.receiver.HEADER_COLUMNS``).
HEADER_FIELDS = [T.StructField(name, T.LongType()) for name in
                 ("hdr_window", "hdr_span", "hdr_stride", "hdr_epoch", "hdr_old_window", "hdr_old_span",
                  "hdr_old_stride")]
DELIVERY_SCHEMA = T.StructType(EVENT_FIELDS + [T.StructField("recv_ns", T.LongType()),
                                               T.StructField("operator", T.StringType())] + HEADER_FIELDS)
#: The operator name of the copies that warm the streaming query up before the run's stream.
WARM_UP = "warm-up"
#: ``testbed.semantics.cep.reference.COLUMNS`` as Spark types.
COMPLEX_EVENT_SCHEMA = T.StructType([T.StructField(c, T.LongType()) for c in COMPLEX_EVENT_COLUMNS])
#: Micro-batches whose timings spark/live.json keeps.
BATCHES_KEPT = 20
#: How often a micro-batch starts, at most: a batch that takes longer is followed at once by the next.
TRIGGER_MS = 250
#: Bytes on the wire per delivered copy: Ethernet 14 + IPv4 20 + UDP 8 + event 32 + windows 32.
FRAME_BYTES = 106


# ---------------------------------------------------------------------------
# window assignment (the arithmetic is testbed.semantics.windows')
# ---------------------------------------------------------------------------
VALUE_COLUMNS = ["stream", "seq", "ts", "key", "value"]
#: ``testbed.semantics.partials.PARTIAL_COLUMNS`` as Spark types.
FOLDED_SCHEMA = T.StructType([T.StructField(c, T.StringType() if c == "owner" else T.LongType())
                              for c in PARTIAL_COLUMNS])
EXPLODED_SCHEMA = T.StructType([f for f in DELIVERY_SCHEMA.fields if f.name in VALUE_COLUMNS]
                               + [T.StructField("window", T.LongType()), T.StructField("owner", T.StringType())])


def strided(window: np.ndarray, span: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One epoch's fields of many Windows headers: ``(row, window id)`` for
    every window ``window - k * stride`` with ``k * stride < span``
    (``testbed.dataplane.wire.copy_windows``, vectorized)."""
    step = np.maximum(stride, 1)
    count = np.where(span > 0, (span - 1) // step + 1, 0)
    rows = np.repeat(np.arange(len(window)), count)
    k = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    return rows, window[rows] - k * step[rows]


def explode_headers(batch: pd.DataFrame) -> pd.DataFrame:
    """Delivered copies as (event, window, owner) rows, one per window their
    Windows header names; the owner is the operator that received the copy."""
    col = {c: batch[c].fillna(0).to_numpy(dtype=np.int64) for c in batch.columns if c.startswith("hdr_")}
    old_rows, old_ids = strided(col["hdr_old_window"], col["hdr_old_span"], col["hdr_old_stride"])
    new_rows, new_ids = strided(col["hdr_window"], col["hdr_span"], col["hdr_stride"])
    rows, ids = np.concatenate([old_rows, new_rows]), np.concatenate([old_ids, new_ids])
    out = batch.iloc[rows][VALUE_COLUMNS].reset_index(drop=True)
    out["window"] = ids
    out["owner"] = batch["operator"].to_numpy()[rows]
    return out


def operator_partials(events: DataFrame, specs: dict[int, dict]) -> DataFrame:
    """Every operator's partial aggregates of the copies it received, per
    window its copies' headers name: one ``mapInPandas`` stage, exploding
    and folding each partition where it lies (``testbed.semantics.partials``),
    without a shuffle; a group split over partitions has a row in each."""
    kinds = {sid: spec["query"]["kind"] for sid, spec in specs.items()}

    def explode_and_fold(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            exploded = explode_headers(batch)
            # one fold per kind of query (fold keeps streams apart): thousands of streams share a few
            for kind, copies in exploded.groupby(exploded["stream"].map(kinds), sort=False):
                yield fold(copies, query(kind))

    return events.select(*VALUE_COLUMNS, "operator", *[f.name for f in HEADER_FIELDS]).mapInPandas(
        explode_and_fold, FOLDED_SCHEMA)


class ReferenceExplosion:
    """One stream's events, as the sources sent them, exploded into every
    window that holds them by the definitions, each with the operator that
    owns it (split by key: the operator of the event's key)."""

    def __init__(self, spec: dict):
        w = spec["window"]
        self.assigner = make_assigner(w["kind"], w["size"], w["slide"])
        self.operators = list(spec["operators"])
        self.origin = spec["origin"]
        self.by_key = spec.get("split") == "key"

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        ranges = self.assigner.assign_many(batch["seq"].to_numpy(), batch["ts"].to_numpy(), self.origin, None,
                                           len(self.operators))
        out = batch.loc[batch.index.repeat([len(r) for r in ranges])].reset_index(drop=True)
        windows = np.fromiter(chain.from_iterable(ranges), dtype=np.int64, count=len(out))
        out["window"] = windows
        if not len(out):
            out["owner"] = []
        elif self.by_key:
            out["owner"] = key_owners(out["key"].to_numpy(), self.operators)
        else:
            out["owner"] = window_owners(windows, self.operators)
        return out


def reference_windows(events: DataFrame, specs: list[dict]) -> DataFrame:
    """``ReferenceExplosion`` of every stream in ``specs`` in one ``mapInPandas``
    stage: a query plan of one branch per stream does not finish planning
    at thousands of streams."""
    explosions = {int(spec["id"]): ReferenceExplosion(spec) for spec in specs}

    def explode(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            for sid, rows in batch.groupby("stream", sort=False):
                yield explosions[int(sid)](rows.reset_index(drop=True))

    return (events.where(F.col("stream").isin(list(explosions))).select(*VALUE_COLUMNS)
            .mapInPandas(explode, EXPLODED_SCHEMA))


def by_query(specs: list[dict]) -> dict[str, list[dict]]:
    """The specs grouped by their query's kind, which is all ``partials`` and ``finalize`` read of them."""
    groups: dict[str, list[dict]] = {}
    for spec in specs:
        groups.setdefault(spec["query"]["kind"], []).append(spec)
    return groups


def reference_with_epochs(spark: SparkSession, sources: DataFrame, spec: dict,
                          changes: list[dict]) -> DataFrame:
    """``reference_windows`` for a stream that changed during the run, or
    lost events before the switch: the epoch-aware oracle walks its events
    in send order (the order the switch saw them), in the driver, since
    every event's windows depend on the ones before it."""
    stream = Stream.from_record({k: v for k, v in spec.items() if k not in ("origin", "live")})
    oracle = stream.oracle(stream.recorded_changes(changes))
    sent = (sources.where(F.col("stream") == spec["id"]).select(*VALUE_COLUMNS, "send_ns").toPandas()
            .sort_values("send_ns", kind="stable"))
    rows = []
    for ev in sent.itertuples(index=False):
        for window in oracle.step(ev.seq, ev.ts, ev.key).windows:
            rows.append((ev.stream, ev.seq, ev.ts, ev.key, ev.value, int(window), oracle.owner(window, ev.key)))
    return spark.createDataFrame(pd.DataFrame(rows, columns=EXPLODED_SCHEMA.fieldNames()), EXPLODED_SCHEMA)


def reference_complex_events(sources: DataFrame, rules_record: dict, timeline_record: Optional[dict]) -> DataFrame:
    """The complex events of the rules (``cep:`` as run.json keeps it) over
    ``sources`` (every event sent, ``seen`` marking those the switch took), one
    group per stream that a rule reads, each stepped in send order by the
    definitions (``testbed.semantics.cep.reference``), the schedule's changes
    (``timeline_record``) applied at their points."""
    timeline = CepTimeline.model_validate(timeline_record) if timeline_record else None
    streams = sorted({int(r["stream"]) for r in rules_record["complex_events"]}
                     | {c.stream for c in (timeline.changes if timeline else ())})

    def per_stream(events: pd.DataFrame) -> pd.DataFrame:
        return complex_events(CepRules.model_validate(rules_record), events,
                              CepTimeline.model_validate(timeline_record) if timeline_record else None)

    return (sources.where(F.col("stream").isin(streams))
            .select("stream", "seq", "ts", "key", "value", "send_ns", "seen")
            .groupBy("stream").applyInPandas(per_stream, COMPLEX_EVENT_SCHEMA))


# ---------------------------------------------------------------------------
# queries: partial aggregates that merge associatively
# ---------------------------------------------------------------------------
def partials(df: DataFrame, spec: dict) -> DataFrame:
    """The centralized reference's partials, in Spark SQL: per (stream,
    window, owner, gkey), the same aggregates the operators fold in pandas
    (``testbed.semantics.partials``), computed independently of them."""
    q = query(spec["query"]["kind"])
    counted = F.lit(True) if q.only_value is None else (F.col("value") == q.only_value)
    value = F.when(counted, F.col("value"))
    group = F.col("key") if q.group_by_key else F.lit(0).cast("long")
    return (df.withColumn("gkey", group)
              .groupBy("stream", "window", "owner", "gkey")
              .agg(F.count(value).alias("n"), F.sum(value).alias("sum"), F.min(value).alias("min"),
                   F.max(value).alias("max"),
                   # highest value, lowest key on ties: max of (value, -key)
                   F.max(F.when(counted, F.struct(F.col("value"), (-F.col("key")).alias("neg_key")))).alias("best"),
                   F.count(F.lit(1)).alias("events"), F.max("seq").alias("last_seq"))
              .select("stream", "window", "owner", "gkey", "n", "sum", "min", "max",
                      F.col("best.value").alias("best_value"), F.col("best.neg_key").alias("best_negkey"),
                      "events", "last_seq"))


#: The partials each micro-batch leaves in ``spark/partials/`` (``partials``, plus the batch's time).
PARTIALS_SCHEMA = T.StructType(
    [T.StructField("stream", T.LongType()), T.StructField("window", T.LongType()),
     T.StructField("owner", T.StringType())]
    + [T.StructField(name, T.LongType()) for name in ("gkey", "n", "sum", "min", "max", "best_value",
                                                      "best_negkey", "events", "last_seq", "batch_ns")])


def merge(parts: DataFrame) -> DataFrame:
    best = F.max(F.struct(F.col("best_value").alias("value"), F.col("best_negkey").alias("neg_key")))
    return (parts.where(F.col("n") > 0).groupBy("stream", "window", "owner", "gkey")
                 .agg(F.sum("n").alias("n"), F.sum("sum").alias("sum"), F.min("min").alias("min"),
                      F.max("max").alias("max"), best.alias("best"), F.max("batch_ns").alias("completed_ns"))
                 .select("stream", "window", "owner", "gkey", "n", "sum", "min", "max",
                         F.col("best.value").alias("best_value"), F.col("best.neg_key").alias("best_negkey"),
                         "completed_ns"))


#: A query's result and key, named in ``QueryDef``, as columns of the merged partials.
RESULT_COLUMNS = {"n": lambda: F.col("n"), "sum": lambda: F.col("sum"), "min": lambda: F.col("min"),
                  "max": lambda: F.col("max"), "mean": lambda: F.col("sum") / F.col("n"),
                  "best": lambda: F.col("best_value")}
KEY_COLUMNS = {None: lambda: F.lit(None), "group": lambda: F.col("gkey"), "best": lambda: -F.col("best_negkey")}


def finalize(df: DataFrame, specs: dict[int, dict]) -> DataFrame:
    """One row per (stream, window, key): the query's result and its key;
    one branch per kind of query, however many streams."""
    out = None
    for kind, group in by_query(list(specs.values())).items():
        q = query(kind)
        sids = [int(spec["id"]) for spec in group]
        part = df.where(F.col("stream").isin(sids) & (F.col("n") > 0)).select(
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


class JobCancelled(Exception):
    """The run dropped its job (it failed or was stopped before its input was complete)."""


class LiveOutput:
    """The live merger's output while the run goes.

    Each micro-batch's emitted windows become a new Parquet file under
    ``spark/live/`` (written aside and renamed, so a reader never sees half a
    file), and ``spark/live.json`` tells the run's progress display how far
    each operator instance has been processed and how many windows left.
    At the end, ``annotate`` adds to ``windows.parquet`` when and why each
    window was emitted, and checks that each window emitted as complete
    equals its final result."""

    def __init__(self, paths: dict, merger: LiveMerger):
        #: Time-window streams: the only ones whose copies' timestamps the merger needs.
        self.timed = [sid for sid, spec in merger.specs.items() if spec["window"]["kind"] == "time"]
        self.folder = Path(paths["live"])
        self.status = Path(paths["live_status"])
        self.merger = merger
        self.emitted: list[pd.DataFrame] = []
        self.operators: dict[str, dict] = {}
        self.windows = 0
        self.mismatched = 0
        #: The warm-up copies went through (``WindowJob.warm_up``).
        self.warm = False
        self.batches: list[dict] = []
        self.timeline: list[dict] = []
        self.folder.mkdir(parents=True, exist_ok=True)

    def take(self, batch_id: int, parts: pd.DataFrame, seen: pd.DataFrame, started_ns: int) -> None:
        """One micro-batch: its partials (``partials``' columns), its copies'
        ``stream``, ``operator``, ``seq``, ``ts`` and ``recv_ns``, and when
        Spark began it.  The warm-up copies count for nothing."""
        spark_s = (time.time_ns() - started_ns) / 1e9
        started = time.monotonic()
        if (seen["operator"] == WARM_UP).any():
            self.warm = True
            seen = seen[seen["operator"] != WARM_UP]
            parts = parts[parts["owner"] != WARM_UP]
        for name, rows in seen.groupby("operator"):
            progress = self.operators.setdefault(str(name), {"processed": 0, "newest_recv_ns": 0})
            progress["processed"] += len(rows)
            progress["newest_recv_ns"] = max(progress["newest_recv_ns"], int(rows["recv_ns"].max()))
        counts = parts.groupby(["stream", "window", "owner"], as_index=False).agg(
            events=("events", "sum"), last_seq=("last_seq", "max"))
        timed = seen[seen["stream"].isin(self.timed)]
        self._publish(self.merger.add(parts[parts["n"] > 0], counts, timed, time.time_ns()), f"windows-{batch_id:06d}")
        merger_s = time.monotonic() - started
        # the newest micro-batches' timings, in Spark and in the merger
        self.batches = (self.batches + [{"batch": batch_id, "copies": len(seen), "spark_s": round(spark_s, 3),
                                         "merger_s": round(merger_s, 3)}])[-BATCHES_KEPT:]
        if len(seen):
            # every batch's copies and span, for the operators' lag over the whole run
            self.timeline.append({"batch": batch_id, "copies": len(seen), "started_ns": started_ns,
                                  "ended_ns": time.time_ns()})
        print(f"micro-batch {batch_id}: {len(seen)} copies, Spark {spark_s:.2f} s, merger {merger_s:.2f} s",
              file=sys.stderr, flush=True)
        self._write_status()

    def close(self) -> None:
        self._publish(self.merger.close(time.time_ns()), "windows-end")
        self._write_status()

    def _publish(self, rows: pd.DataFrame, name: str) -> None:
        if len(rows):
            part = self.folder / f"{name}.parquet"
            rows.to_parquet(self.folder / f".{name}.tmp", index=False)
            os.replace(self.folder / f".{name}.tmp", part)
            self.emitted.append(rows)
            self.windows += len(rows[["stream", "window"]].drop_duplicates())

    def _write_status(self) -> None:
        status = {"updated_ns": time.time_ns(), "windows_emitted": self.windows,
                  "open_windows": self.merger.open_windows, "after_emission": self.merger.after_emission,
                  "mismatched": self.mismatched, "operators": self.operators, "batches": self.batches}
        self.status.with_suffix(".tmp").write_text(json.dumps(status))
        os.replace(self.status.with_suffix(".tmp"), self.status)

    def annotate(self, merged: pd.DataFrame) -> pd.DataFrame:
        """``merged`` (the final windows) with ``emitted_ns``, ``emitted_by`` and
        ``completing_seq``, and what was emitted (``live_result``,
        ``live_n_events``), for ``testbed check`` to hold against the final rows."""
        if not self.emitted:
            return merged.assign(emitted_ns=pd.Series(dtype="int64"), emitted_by=pd.Series(dtype="object"),
                                 completing_seq=pd.Series(dtype="int64"), live_result=pd.Series(dtype="float64"),
                                 live_n_events=pd.Series(dtype="int64"))
        live = pd.concat(self.emitted, ignore_index=True)
        keyed = lambda df: df.assign(k=pd.to_numeric(df["key"]).fillna(-1).astype(np.int64))  # noqa: E731
        keys = ["stream", "window", "operator", "k"]
        out = keyed(merged).merge(keyed(live)[keys + ["result", "n_events", "emitted_ns", "emitted_by",
                                                      "completing_seq"]].rename(
            columns={"result": "live_result", "n_events": "live_n_events"}), on=keys, how="left")
        out = out.drop(columns=["k"])
        self.mismatched = sum(len(windows) for windows in live_differences(out).values())
        self._write_status()
        return out


class WindowJob:
    """The run's operators, merger, reference and analysis, over the paths of its job description."""

    def __init__(self, spark: SparkSession, job: dict):
        self.spark = spark
        self.job = job
        self.paths = job["paths"]
        self.specs = {int(s["id"]): s for s in job["streams"]}
        self.live = LiveOutput(self.paths, LiveMerger(self.specs, job.get("window_timeout_s")))

    def operator_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch: every operator's events folded into partial
        aggregates, which the live merger takes; the windows it finds
        complete leave at once.  Two Spark jobs: the aggregation, and the
        copies' few columns that give each operator's progress and watermark."""
        now = time.time_ns()
        batch = batch.persist()
        try:
            # one row per partition and group: the live merger and the final merge add them up
            parts = operator_partials(batch, self.specs).toPandas()
            seen = batch.select("stream", "operator", "seq", "ts", "recv_ns").toPandas()
        finally:
            batch.unpersist()
        kept = parts[(parts["n"] > 0) & (parts["owner"] != WARM_UP)]
        if len(kept):
            kept.assign(batch_ns=now).to_parquet(Path(self.paths["partials"]) / f"part-{batch_id:06d}.parquet",
                                                 index=False)
        self.live.take(batch_id, parts, seen, now)

    def warm_up(self, running) -> None:
        """Send one copy per stream, from no operator, through the streaming
        query before the stream begins, and wait until it is processed: the
        first real micro-batch then finds the query's plans compiled, its
        checkpoint log begun and Spark's Python workers started, instead of
        paying for all three (seconds on 2 cores)."""
        rows = [{**{f.name: 0 for f in DELIVERY_SCHEMA.fields}, "stream": sid, "operator": WARM_UP,
                 "hdr_span": 1, "hdr_stride": 1} for sid in self.specs]
        folder = Path(self.paths["in"]) / WARM_UP
        folder.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).astype({f.name: "int64" for f in HEADER_FIELDS + EVENT_FIELDS}).to_parquet(
            folder / ".warm-up.tmp", index=False)
        os.replace(folder / ".warm-up.tmp", folder / f"{WARM_UP}.parquet")
        while not self.live.warm:
            if running.exception() is not None:
                raise running.exception()
            time.sleep(0.05)

    def stream(self) -> None:
        Path(self.paths["partials"]).mkdir(parents=True, exist_ok=True)
        events = (self.spark.readStream.schema(DELIVERY_SCHEMA).option("recursiveFileLookup", "true")
                  .parquet(self.paths["in"]))
        running = (events.writeStream.foreachBatch(self.operator_batch)
                   .option("checkpointLocation", self.paths["checkpoint"])
                   .trigger(processingTime=f"{self.job.get('trigger_ms', TRIGGER_MS)} milliseconds").start())
        try:
            self.warm_up(running)
            Path(self.paths["ready"]).write_text(str(os.getpid()))
            done = Path(self.paths["input_done"])
            cancel = Path(self.paths["cancel"])
            while not done.exists():
                if running.exception() is not None:
                    raise running.exception()
                if cancel.exists():
                    raise JobCancelled("the run ended before its input was complete")
                time.sleep(0.2)
            running.processAllAvailable()
        finally:
            # a warm application serves the next run: no query of this one may stay behind
            running.stop()
        self.live.close()

    def write_windows(self, partial: DataFrame, path: str) -> None:
        finalize(partial, self.specs).orderBy("stream", "window", "key").toPandas().to_parquet(path, index=False)

    def merge_output(self) -> None:
        """``windows.parquet``: every window merged from all partials, as the
        reference is, with when and why the live merger emitted it."""
        merged = finalize(merge(self.spark.read.schema(PARTIALS_SCHEMA).parquet(self.paths["partials"])),
                          self.specs) \
            .orderBy("stream", "window", "key").toPandas()
        self.live.annotate(merged).to_parquet(self.paths["windows"], index=False)

    def given(self, name: str) -> dict:
        """What the run handed over at the end of its input (``changes``, ``unseen``), or nothing."""
        path = Path(self.paths.get(name, ""))
        return json.loads(path.read_text()) if path.is_file() else {}

    def sources_the_switch_saw(self) -> DataFrame:
        """Every event sent but those the run found never reached the switch:
        the switch's windows and complex events are of these alone, and so are
        the references."""
        sources = self.spark.read.parquet(self.paths["sources"])
        unseen = self.given("unseen")
        if any(unseen.values()):
            lost = self.spark.createDataFrame([(int(sid), int(seq)) for sid, seqs in unseen.items() for seq in seqs],
                                              "stream long, seq long")
            sources = sources.join(lost, ["stream", "seq"], "left_anti")
        return sources

    def sources_marked_seen(self) -> DataFrame:
        """Every event sent, ``seen`` False for those the run found never reached the
        switch: the schedule's CEP changes begin at points counted over every event sent."""
        sources = self.spark.read.parquet(self.paths["sources"])
        unseen = self.given("unseen")
        if not any(unseen.values()):
            return sources.withColumn("seen", F.lit(True))
        lost = self.spark.createDataFrame([(int(sid), int(seq), False) for sid, seqs in unseen.items() for seq in seqs],
                                          "stream long, seq long, seen boolean")
        return sources.join(lost, ["stream", "seq"], "left").fillna(True, subset=["seen"])

    def reference(self) -> None:
        sources = self.sources_the_switch_saw()
        changes, unseen = self.given("changes"), self.given("unseen")
        parts, plain = [], []
        for sid, spec in self.specs.items():
            if changes.get(str(sid)) or unseen.get(str(sid)) or spec["window"].get("starts") == "event":
                # The oracle counts the events it is given, so after a loss
                # its count windows are the switch's, whatever the seqs say.
                # Windows that start at events depend on every event before
                # them, so their stream is walked in send order too.
                parts.append(partials(reference_with_epochs(self.spark, sources, spec, changes.get(str(sid), [])),
                                      spec))
            else:
                plain.append(spec)
        if plain:
            exploded = reference_windows(sources, plain)
            for group in by_query(plain).values():
                sids = [int(spec["id"]) for spec in group]
                parts.append(partials(exploded.where(F.col("stream").isin(sids)), group[0]))
        self.write_windows(union_all(parts), self.paths["windows_reference"])

    def cep_reference(self) -> None:
        """``complex_events_reference.parquet``: the complex events of the run's
        CEP rules, computed from the stream the switch saw, per stream in
        parallel (a rule reads one stream); the run holds each sink to it."""
        if not self.job.get("cep"):
            return
        found = reference_complex_events(self.sources_marked_seen(), self.job["cep"],
                                         self.job.get("cep_timeline")).toPandas()
        found.sort_values(["send_ns", "stream", "rank"], kind="stable").to_parquet(
            self.paths["complex_events_reference"], index=False)

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
                    "completeness": rows(completeness), **self.live_analysis(windows, sources),
                    "spark_master": spark.sparkContext.master,
                    "spark_version": spark.version, "application_id": spark.sparkContext.applicationId,
                    # a warm application's earlier runs: 0 for the first run it serves and for a run's own
                    "application_runs_before": self.job.get("served", 1) - 1}
        Path(self.paths["analysis"]).write_text(json.dumps(analysis, indent=2, default=str))

    def live_analysis(self, windows: DataFrame, sources: DataFrame) -> dict:
        """How the live merger did: result latency per stream (send of the event
        that completed a window to the window's emission), how each window
        left, and how its emissions stand against the end of the stream."""
        once = windows.dropDuplicates(["stream", "window"]).select(
            "stream", "window", "emitted_ns", "emitted_by", F.col("completing_seq").alias("seq"))
        sends = sources.select("stream", "seq", "send_ns")
        latency = (once.where((F.col("emitted_by") == "complete") & (F.col("seq") >= 0)).join(sends, ["stream", "seq"])
                   .withColumn("latency_s", (F.col("emitted_ns") - F.col("send_ns")) / 1e9))
        pct = latency.groupBy("stream").agg(
            F.count(F.lit(1)).alias("windows"),
            *[F.percentile_approx("latency_s", p, 10000).alias(f"p{int(p * 100)}") for p in (0.5, 0.9, 0.99)],
            F.max("latency_s").alias("max"))
        last_send = sources.groupBy("stream").agg(F.max("send_ns").alias("last_send_ns"))
        how = (once.join(last_send, "stream").groupBy("stream").agg(
            F.count(F.lit(1)).alias("windows"),
            *[F.sum((F.col("emitted_by") == why).cast("int")).alias(why.replace(" ", "_"))
              for why in ("complete", "end of input", "timeout")],
            F.sum((F.col("emitted_ns") <= F.col("last_send_ns")).cast("int")).alias("before_last_send"),
            ((F.max("emitted_ns") - F.first("last_send_ns")) / 1e9).alias("last_result_after_last_send_s")))
        status = json.loads(Path(self.paths["live_status"]).read_text())
        rows = lambda df: [r.asDict() for r in df.orderBy("stream").collect()]  # noqa: E731
        return {"result_latency_s": rows(pct),
                "live": {"streams": rows(how), "after_emission": status["after_emission"],
                         "mismatched": status["mismatched"], "operators": status["operators"],
                         "batches": self.live.timeline}}

    def run(self) -> None:
        self.stream()
        self.merge_output()
        self.reference()
        self.cep_reference()
        self.analysis()


def serve(spark: SparkSession, folder: Path) -> None:
    """Run the jobs dropped into ``folder`` (``*.json``, in name order, each
    renamed ``*.taken`` as it starts), one at a time, each as ``--job``
    would, until ``folder/stop`` exists.

    Each job's outcome goes to its ``done`` path (``{"ok": true}``, or the
    error and its traceback's tail), and what the job prints to its run's
    log (the job's ``log`` path), so that a failed run leaves the service
    warm for the next.  ``folder/ready`` says the session is up."""
    (folder / "ready").write_text(str(os.getpid()))
    while not (folder / "stop").exists():
        waiting = sorted(folder.glob("*.json"))
        if not waiting:
            time.sleep(0.05)
            continue
        # taken once: an application submitted again after this one died starts with the jobs after it
        taken = waiting[0].with_suffix(".taken")
        os.replace(waiting[0], taken)
        job = json.loads(taken.read_text())
        done = Path(job["paths"]["done"])
        with open(job["log"], "a") as log, redirect_stderr(log):
            print(f"served by the warm Spark application {spark.sparkContext.applicationId}", file=log, flush=True)
            try:
                WindowJob(spark, job).run()
                outcome = {"ok": True}
            except Exception as err:           # the run learns why; the service stays for the next
                traceback.print_exc(file=log)
                outcome = {"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0],
                           "cancelled": isinstance(err, JobCancelled)}
        done.with_suffix(".tmp").write_text(json.dumps(outcome))
        os.replace(done.with_suffix(".tmp"), done)


def main() -> None:
    ap = argparse.ArgumentParser(description="testbed operators: windowed computation on Spark")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--job", type=Path, help="job description written by testbed run")
    mode.add_argument("--serve", type=Path, metavar="FOLDER",
                      help="serve the job descriptions dropped into FOLDER until it holds 'stop'")
    args = ap.parse_args()
    job = json.loads(args.job.read_text()) if args.job else None
    name = f"testbed-{job.get('run_id', 'run')}" if job else f"testbed-warm-{args.serve.parent.name}"
    spark = (SparkSession.builder.appName(name)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    try:
        if job is not None:
            WindowJob(spark, job).run()
        else:
            serve(spark, args.serve)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
