"""A tiny warehouse with one table of every checked kind, and corruptions the way real bugs make them."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.asof import asof_join
from lakehouse.assignment import AssignmentConfig, AssignmentStore, ClientState
from lakehouse.assignment.job import assign_generation
from lakehouse.dedup import Deduplicator
from lakehouse.quality import mark_enriched
from lakehouse.versioned import VersionedStore

T0 = datetime(2024, 1, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RATE_SCHEMA = T.StructType([T.StructField("currency", T.StringType()), T.StructField("rate", T.DoubleType())])
# (currency, rate or None for a delete, ms after T0); one partition, in offset order.
RATE_UPDATES = [
    ("EUR", 1.0, 0),
    ("GBP", 2.0, 500),
    ("EUR", 1.1, 1500),
    ("EUR", 1.2, 2200),
    ("GBP", None, 2500),
    ("EUR", 1.3, 3200),
]
#: The updates up to T0 + 2.2 s are the first put_all batch, the rest the second.
FIRST_BATCH_UPDATES = 4
RETENTION = timedelta(seconds=1)
SEGMENT = timedelta(seconds=1)
ASSIGNMENT_CONFIG = AssignmentConfig(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
TRANSACTIONS = [("t1", "EUR", 1600), ("t2", "GBP", 2600), ("t3", "EUR", 3300), ("t4", "GBP", 900)]


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def segment_holding(ms: int) -> int:
    """The segment of a version whose valid_to is ``ms`` after T0."""
    return (at(ms) - EPOCH) // SEGMENT


def build_warehouse(spark: SparkSession, root: Path) -> dict[str, str]:
    """A versioned store (expired once), a dedup index, an assignment store and an enriched output."""
    paths = {
        "rates": str(root / "rates"),
        "index": str(root / "txn_index"),
        "assignment": str(root / "assign"),
        "priced": str(root / "txn_priced"),
    }
    rates = VersionedStore.create(spark, paths["rates"], "currency", RATE_SCHEMA, RETENTION, SEGMENT)
    updates = spark.createDataFrame(
        [(c, r, at(ms), 0, i) for i, (c, r, ms) in enumerate(RATE_UPDATES)],
        "currency string, rate double, timestamp timestamp, partition int, offset long",
    )
    # Two batches, each sealed as the pipeline's maintain stage does: EUR's [0, 1500) and [1500, 2200) are
    # live when the first seal commits (one batch would not write them at all: they are expired at its
    # stream time), and expire() then drops [0, 1500). The corruptions below go to the sealed segments.
    rates.put_all(updates.where(F.col("offset") < FIRST_BATCH_UPDATES), batch_id=0)
    rates.seal()
    rates.put_all(updates.where(F.col("offset") >= FIRST_BATCH_UPDATES), batch_id=1)
    rates.seal()
    rates.expire()
    transactions = spark.createDataFrame(
        [(txn, cur, at(ms), 0, i) for i, (txn, cur, ms) in enumerate(TRANSACTIONS)],
        "txn_id string, currency string, timestamp timestamp, partition int, offset long",
    )
    Deduplicator.create(spark, paths["index"], by="txn_id", interval=timedelta(minutes=10)).apply(
        transactions, batch_id=0
    )
    asof_join(transactions, rates, on="currency", prefix="rate_").write.format("delta").save(paths["priced"])
    mark_enriched(
        spark, paths["priced"], record_id="txn_id", timestamp="timestamp", valid_from="rate_valid_from"
    )
    assignment = AssignmentStore.create(spark, paths["assignment"], ASSIGNMENT_CONFIG)
    clients = {f"c{n}": ClientState(f"c{n}", tags={"zone": f"z{n % 2}"}) for n in range(4)}
    assignment.write_subscriptions(1, clients, [f"0_{p}" for p in range(4)], at=T0)
    assign_generation(assignment, at=T0)
    return paths


def copy_table(source: str, target: Path) -> str:
    """A byte copy of a Delta table (its log names files relative to the table folder)."""
    shutil.copytree(source, target)
    return str(target)


def append_behind_the_back(spark: SparkSession, path: str, rows: list[tuple], schema: T.StructType) -> None:
    """A plain Delta append that bypasses the store's API (what a buggy writer would do)."""
    spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(path)


def table_schema(spark: SparkSession, path: str) -> T.StructType:
    return spark.read.format("delta").load(path).schema


def drop_segment_files(path: str, segment: int) -> list[Path]:
    """Delete the data files of one segment from storage, leaving the Delta log as it is."""
    files = sorted((Path(path) / f"segment={segment}").glob("*.parquet"))
    for file in files:
        file.unlink()
    return files


def garble_segment_files(path: str, segments: range) -> list[Path]:
    """Overwrite the data files of ``segments`` in place with bytes that are not Parquet (no commit, the
    same names): a read that opens one fails, a listing still finds them."""
    files = sorted(file for s in segments for file in (Path(path) / f"segment={s}").glob("*.parquet"))
    for file in files:
        file.write_bytes(b"not parquet")
    return files


def duplicate_active(spark: SparkSession, assignment_path: str, generation: int) -> str:
    """Append one active row of ``generation`` again (a replayed append); returns its task."""
    table = spark.read.format("delta").load(assignment_path)
    row = (
        table.where((F.col("generation") == generation) & (F.col("role") == "active"))
        .orderBy("task", "client")
        .first()
    )
    assert row is not None
    append_behind_the_back(spark, assignment_path, [tuple(row)], table.schema)
    return str(row["task"])
