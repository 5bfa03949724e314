"""The floor of issue 14's pipeline: the least a pipeline of its shape does, in bare Spark and Delta.

:func:`floor_run` runs the demo's stages on the demo's landed files, read as the pipeline reads them
(:func:`lakehouse.pipeline.sources.read_source`), with nothing else of lakehouse in the data path, each
stage as the issue requires (a ``trigger(availableNow=True)`` + ``foreachBatch`` query with its own
checkpoint, for the three streaming stages) and each write keyed by its batch id (Delta's
``txnAppId``/``txnVersion``), but doing **less** than the issue asks, so that its seconds show what the
shape itself costs here, before the issue's semantics (a measured reference, not a proven lower bound):

- subscribe: one append of the generation's clients;
- materialize: one append of the new versions, with no version closed (no MERGE, no validTo, no segment),
  no late record dropped, no tombstone handled;
- ingest: the batch's ids made distinct, then a left-anti join with the ids of the sink, which doubles as
  the seen-ID index (one commit; lakehouse keeps an index of its own, with an interval, and a quarantine);
  no offset-aware replay, no interval;
- enrich: for each new record of the sink (a Delta stream), the last version of its key at or before its
  time (one window over the batch and every version; no expiry, no tombstone), appended;
- maintain: nothing;
- assign: the generation's clients read back and appended (no assignor).

Each stage's seconds run from its start to its end, so a streaming stage's include its query's start and
stop.

``floor_run(..., issue_tables=True)`` is **floor+**: the floor plus only what the issue names and the floor
leaves out, each done the cheapest way, still short of the issue's semantics (no interval, no processing
order, no offset-aware replay, no validTo, no assignor):

- ingest: a seen-ID index of its own and a quarantine. One left join of the batch with the index's ids
  (cached), then three appends written concurrently: the new records to the sink, their ids to the index,
  the records of seen ids to the quarantine;
- maintain: the newest commits of each of its five tables read (the cheapest way lakehouse knows,
  :func:`lakehouse.commit_log.commit_infos`: the commit files on the driver), as deciding what is due needs;
- assign: the last generation's assignment read too, as a sticky assignor needs.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehouse.commit_log import commit_infos
from lakehouse.pipeline.sources import read_source, read_stream
from lakehouse.pipeline.spec import PipelineSpec

#: The floor's steps in run order, as the bench names lakehouse's.
STEPS = ("subscribe", "materialize", "ingest", "enrich", "maintain", "assign")
#: The tables floor+'s maintain step reads the newest commits of.
_MAINTAINED = ("deduped", "enriched", "store", "index", "quarantine")


def floor_run(
    spark: SparkSession, spec: PipelineSpec, root: str, generation: int, issue_tables: bool = False
) -> dict[str, float]:
    """One run of the floor (floor+ with ``issue_tables``) over what ``spec``'s landing folders hold that its
    checkpoints (under ``root``) have not seen; returns each step's seconds."""
    seconds: dict[str, float] = {}
    steps = {
        "subscribe": lambda: _append(
            _clients(spark, generation), f"{root}/subscriptions", "subscribe", generation
        ),
        "materialize": lambda: _await(
            read_source(spark, spec, "changelog"), f"{root}/_checkpoints/materialize", _materialize(root)
        ),
        "ingest": lambda: _await(
            read_source(spark, spec, "records"),
            f"{root}/_checkpoints/ingest",
            (_ingest_with_index if issue_tables else _ingest)(spark, root),
        ),
        "enrich": lambda: _await(
            read_stream(spark, "deduped", f"{root}/deduped", "delta", "", 0),
            f"{root}/_checkpoints/enrich",
            _enrich(spark, root),
        ),
        "maintain": lambda: _read_newest_commits(spark, root) if issue_tables else None,
        "assign": lambda: _assign(spark, root, generation, issue_tables),
    }
    for name in STEPS:
        started = time.perf_counter()
        steps[name]()
        seconds[name] = time.perf_counter() - started
    return seconds


def _clients(spark: SparkSession, generation: int) -> DataFrame:
    return spark.range(6 if generation == 1 else 5).select(
        F.col("id").alias("client"), F.lit(generation).alias("generation")
    )


def _append(frame: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """One Delta append keyed by ``batch_id`` (skipped by Delta when that batch id was committed)."""
    writer = frame.write.format("delta").mode("append")
    writer.option("txnAppId", app_id).option("txnVersion", batch_id).save(path)


def _await(source: DataFrame, checkpoint: str, handle) -> None:
    query = (
        source.writeStream.foreachBatch(handle)
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    query.awaitTermination()


def _materialize(root: str):
    def handle(batch: DataFrame, batch_id: int) -> None:
        versions = batch.select("currency", "rate", F.col("event_time").alias("valid_from"))
        _append(versions, f"{root}/store", "materialize", batch_id)

    return handle


def _ingest(spark: SparkSession, root: str):
    sink = f"{root}/deduped"

    def handle(batch: DataFrame, batch_id: int) -> None:
        new = batch.dropDuplicates(["txn_id"])
        if os.path.isdir(f"{sink}/_delta_log"):
            seen = spark.read.format("delta").load(sink).select("txn_id")
            new = new.join(seen, "txn_id", "left_anti")
        _append(new, sink, "ingest", batch_id)

    return handle


def _ingest_with_index(spark: SparkSession, root: str):
    def handle(batch: DataFrame, batch_id: int) -> None:
        index = f"{root}/index"
        if os.path.isdir(f"{index}/_delta_log"):
            seen = spark.read.format("delta").load(index).select("txn_id", F.lit(True).alias("seen"))
            joined = batch.join(seen, "txn_id", "left")
        else:
            joined = batch.withColumn("seen", F.lit(None).cast("boolean"))
        joined = joined.persist()
        new = joined.where(F.col("seen").isNull()).drop("seen").dropDuplicates(["txn_id"]).persist()
        appends = [
            (new, f"{root}/deduped"),
            (new.select("txn_id", "timestamp", "partition", "offset"), index),
            (joined.where(F.col("seen")).drop("seen"), f"{root}/quarantine"),
        ]
        with ThreadPoolExecutor(len(appends)) as pool:
            list(pool.map(lambda append: _append(*append, "ingest", batch_id), appends))
        new.unpersist()
        joined.unpersist()

    return handle


def _enrich(spark: SparkSession, root: str):
    def handle(batch: DataFrame, batch_id: int) -> None:
        versions = spark.read.format("delta").load(f"{root}/store")
        records = batch.select(
            "txn_id", "currency", "amount", F.col("timestamp").alias("at"), F.lit(1).alias("is_record")
        )
        rows = records.unionByName(
            versions.select("currency", "rate", F.col("valid_from").alias("at"), F.lit(0).alias("is_record")),
            allowMissingColumns=True,
        )
        upto = (
            Window.partitionBy("currency")
            .orderBy("at", "is_record")
            .rowsBetween(Window.unboundedPreceding, 0)
        )
        joined = rows.withColumn("rate_rate", F.last("rate", ignorenulls=True).over(upto)).where(
            "is_record = 1"
        )
        _append(joined.drop("rate", "is_record"), f"{root}/enriched", "enrich", batch_id)

    return handle


def _read_newest_commits(spark: SparkSession, root: str) -> None:
    for table in _MAINTAINED:
        if os.path.isdir(f"{root}/{table}/_delta_log"):
            commit_infos(spark, f"{root}/{table}", 5)


def _assign(spark: SparkSession, root: str, generation: int, read_last: bool = False) -> None:
    clients = (
        spark.read.format("delta").load(f"{root}/subscriptions").where(F.col("generation") == generation)
    )
    if read_last:  # an assignor computes on the driver: the clients are read once, and written from there
        clients = spark.createDataFrame(clients.collect(), clients.schema)
        if os.path.isdir(f"{root}/assignment/_delta_log"):
            last = spark.read.format("delta").load(f"{root}/assignment")
            last.where(F.col("generation") == generation - 1).collect()
    _append(clients, f"{root}/assignment", "assign", generation)
