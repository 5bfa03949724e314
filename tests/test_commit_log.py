"""The commit log of a writer: idempotent commits, the last batch id and state, scoped txn settings."""

from __future__ import annotations

import shutil
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from delta.exceptions import ConcurrentTransactionException
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.commit_log import (
    CommitLog,
    FileStats,
    PartitionRows,
    append_if,
    append_to_table,
    commit_infos,
    latest_snapshot,
    parse_metadata,
    partition_rows,
    prepare_append,
    prepare_concurrently,
    recorded_txn,
)
from lakehouse.delta_ops import ensure_table
from lakehouse.errors import ConcurrentWriteError, InvalidInputError
from lakehouse.times import micros
from tests.durability import FAST_CLEANUP, age_log, deleted_since

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("part", T.IntegerType())])
APP = "test-app"


def _rows(spark: SparkSession, path: str) -> list[tuple[int, int]]:
    return sorted((r["id"], r["part"]) for r in spark.read.format("delta").load(path).collect())


def test_replayed_batch_is_skipped_by_delta_for_appends_and_merges(
    spark: SparkSession, table_path: str
) -> None:
    ensure_table(spark, table_path, SCHEMA)
    log = CommitLog(spark, table_path, APP, ("t",))
    batch = spark.createDataFrame([(1, 0), (2, 0)], SCHEMA)
    for _ in range(2):
        batch.write.format("delta").mode("append").options(**log.writer_options(0, {"t": 1})).save(table_path)
    assert _rows(spark, table_path) == [(1, 0), (2, 0)]
    update = spark.createDataFrame([(1, 5)], SCHEMA)
    for _ in range(2):
        session = log.session(1, {"t": 2})
        DeltaTable.forPath(session, table_path).alias("t").merge(
            update.alias("s"), "t.id = s.id"
        ).whenMatchedUpdate(set={"part": "t.part + s.part"}).execute()
    assert _rows(spark, table_path) == [(1, 5), (2, 0)]
    assert spark.conf.get("spark.databricks.delta.write.txnVersion", None) is None
    recorded = log.read()
    assert (recorded.version, recorded.last_batch_id, recorded.state) == (2, 1, {"t": 2})
    assert [log.batch_commit(b)[0] for b in (0, 1)] == [1, 2]  # type: ignore[index]


def test_check_new_tells_replays_and_rejects_gaps(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA)
    log = CommitLog(spark, table_path, APP)
    assert log.check_new(0, log.last_batch_id())
    spark.createDataFrame([(1, 0)], SCHEMA).write.format("delta").mode("append").options(
        **log.writer_options(5, {})
    ).save(table_path)
    last = log.last_batch_id()
    assert last == 5
    assert not log.check_new(5, last)
    assert log.check_new(6, last)
    with pytest.raises(InvalidInputError, match="batch ids must increase"):
        log.check_new(4, last)
    with pytest.raises(InvalidInputError, match=">= 0"):
        log.check_new(-1, last)
    for bad in ("42", 41.5, True):
        with pytest.raises(InvalidInputError, match="must be an integer"):
            log.check_new(bad, last)  # type: ignore[arg-type]
    assert CommitLog(spark, table_path, "another-writer").last_batch_id() is None


def test_state_is_the_largest_recorded_and_survives_log_cleanup(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA, properties=FAST_CLEANUP)
    log = CommitLog(spark, table_path, APP, ("t", "m"))
    row = spark.createDataFrame([(1, 0)], SCHEMA)

    def commit(batch: int | None, state: dict[str, object]) -> None:
        options = log.writer_options(batch, state)
        row.write.format("delta").mode("append").options(**options).save(table_path)

    commit(0, {"t": 5, "m": {"0": 1}})
    commit(1, {"t": 9, "m": {"0": 1, "1": 4}})
    # A maintenance commit that read the state before batch 1 committed cannot move it backwards.
    commit(None, {"t": 5})
    assert log.read().state == {"t": 9, "m": {"0": 1, "1": 4}}
    before = age_log(table_path)
    for _ in range(2):  # maintenance commits carry the state on; the checkpoint triggers the cleanup
        commit(None, log.read().state)
    assert "00000000000000000002.json" in deleted_since(table_path, before)  # batch 1's commit is gone
    assert log.batch_commit(1) is None
    recorded = log.read()
    assert (recorded.last_batch_id, recorded.state) == (1, {"t": 9, "m": {"0": 1, "1": 4}})
    assert not log.check_new(1, recorded.last_batch_id)
    with pytest.raises(InvalidInputError, match="older than the table's log retention"):
        log.check_new(0, recorded.last_batch_id)


def test_a_handle_reads_the_state_of_a_table_created_again_at_its_path(
    spark: SparkSession, table_path: str
) -> None:
    """A handle remembers the state of the last version it read (issue 36): never across tables."""
    log = CommitLog(spark, table_path, APP, ("t",))
    row = spark.createDataFrame([(1, 0)], SCHEMA)

    def commit(t: int) -> None:
        row.write.format("delta").mode("append").options(**log.writer_options(None, {"t": t})).save(
            table_path
        )

    for t in (5, 9):  # versions 0 and 1 of the first table
        commit(t)
    assert (log.read().version, log.read().state, log.state_at(1)) == (1, {"t": 9}, {"t": 9})
    shutil.rmtree(table_path)
    for t in (1, 2):  # versions 0 and 1 of a table created again at the path
        commit(t)
    assert (log.read().version, log.read().state, log.state_at(1)) == (1, {"t": 2}, {"t": 2})


def test_commit_infos_read_on_the_driver_equal_delta_history_and_stop_at_log_cleanup(
    spark: SparkSession, table_path: str
) -> None:
    ensure_table(spark, table_path, SCHEMA, properties=FAST_CLEANUP)
    log = CommitLog(spark, table_path, APP, ("t",))
    row = spark.createDataFrame([(1, 0)], SCHEMA)
    row.write.format("delta").mode("append").options(**log.writer_options(0, {"t": 1})).save(table_path)
    DeltaTable.forPath(spark, table_path).alias("t").merge(row.alias("s"), "t.id = s.id").whenMatchedUpdate(
        set={"part": "s.part + 1"}
    ).execute()
    fields = ("version", "operation", "operationParameters", "operationMetrics", "userMetadata")

    def history() -> list[tuple[object, ...]]:
        rows = DeltaTable.forPath(spark, table_path).history().orderBy(F.desc("version")).collect()
        return [(micros(r["timestamp"]) // 1000, *(r[f] for f in fields)) for r in rows]

    def read(**kwargs: int) -> list[tuple[object, ...]]:
        group = "commit_infos"
        spark.sparkContext.setJobGroup(group, group)
        try:
            infos = commit_infos(spark, table_path, **kwargs)
        finally:
            spark.sparkContext.setJobGroup("", "")
        assert not spark.sparkContext.statusTracker().getJobIdsForGroup(group)  # read on the driver
        return [(i["timestamp"], *(i.get(f) for f in fields)) for i in infos]

    spark.sql(f"ALTER TABLE delta.`{table_path}` SET TBLPROPERTIES ('x' = '1')")
    assert read() == history() and len(history()) == 4
    assert read(limit=2) == history()[:2] and read(after=1) == history()[:2]
    before = age_log(table_path)
    for _ in range(2):  # the checkpoint these commits write triggers the log cleanup
        row.write.format("delta").mode("append").save(table_path)
    assert "00000000000000000000.json" in deleted_since(table_path, before)
    assert read(after=-1) == history() and read(after=-1)[-1][1] > 0


def test_writes_fail_with_one_line_when_the_table_moved_since_it_was_read(
    spark: SparkSession, table_path: str
) -> None:
    ensure_table(spark, table_path, SCHEMA)
    log = CommitLog(spark, table_path, APP)
    read = log.read().version
    spark.createDataFrame([(1, 0)], SCHEMA).write.format("delta").mode("append").options(
        **CommitLog(spark, table_path, "other").writer_options(3, {})
    ).save(table_path)
    with pytest.raises(ConcurrentWriteError, match="batch 3 of other") as raised:
        log.require_unchanged(read, "test step")
    assert "\n" not in str(raised.value)
    log.require_unchanged(read + 1, "test step")


def test_txn_settings_do_not_leak_into_other_threads_writes(spark: SparkSession, tmp_path: object) -> None:
    """19.2: a session's txn confs made another thread's plain appends skip rows and carry our metadata."""
    ours, theirs = f"{tmp_path}/ours", f"{tmp_path}/theirs"
    ensure_table(spark, ours, SCHEMA)
    ensure_table(spark, theirs, SCHEMA)
    log = CommitLog(spark, ours, APP)
    update = spark.createDataFrame([(1, 5)], SCHEMA)
    appended = threading.Event()

    def append_elsewhere() -> None:
        for i in range(6):
            spark.createDataFrame([(i, 0)], SCHEMA).write.format("delta").mode("append").save(theirs)
        appended.set()

    thread = threading.Thread(target=append_elsewhere)
    session = log.session(100, {"t": 1})  # our write's settings exist while the other thread appends
    thread.start()
    for batch in range(101, 104):
        DeltaTable.forPath(session, ours).alias("t").merge(
            update.alias("s"), "t.id = s.id"
        ).whenNotMatchedInsertAll().execute()
        session = log.session(batch, {"t": 1})
    thread.join()
    assert appended.is_set()
    assert _rows(spark, theirs) == [(i, 0) for i in range(6)]
    history = DeltaTable.forPath(spark, theirs).history().select("userMetadata").collect()
    assert all(parse_metadata(row["userMetadata"]) is None for row in history)
    assert CommitLog(spark, theirs, APP).last_batch_id() is None
    assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None


def _crc_listed(snapshot: object) -> bool:
    checksum = snapshot.checksumOpt()  # type: ignore[attr-defined]
    return bool(checksum.isDefined() and checksum.get().setTransactions().isDefined())


def test_recorded_txn_from_the_checksum_equals_delta_state_without_it(
    spark: SparkSession, table_path: str
) -> None:
    ensure_table(spark, table_path, SCHEMA)
    log = CommitLog(spark, table_path, APP)
    spark.createDataFrame([(1, 0)], SCHEMA).write.format("delta").mode("append").options(
        **log.writer_options(3, {})
    ).save(table_path)
    snapshot = latest_snapshot(spark, table_path)
    assert _crc_listed(snapshot)
    from_checksum = recorded_txn(spark, snapshot, log.txn_app_id)
    for crc in (Path(table_path) / "_delta_log").glob("*.crc"):
        crc.unlink()
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    rebuilt = latest_snapshot(spark, table_path)
    assert not _crc_listed(rebuilt)
    assert from_checksum == recorded_txn(spark, rebuilt, log.txn_app_id) == 3


def test_recorded_txn_drops_transactions_the_table_expires_like_delta(
    spark: SparkSession, table_path: str
) -> None:
    retention = {"delta.setTransactionRetentionDuration": "interval 1 seconds"}
    ensure_table(spark, table_path, SCHEMA, properties=retention)
    log = CommitLog(spark, table_path, APP)
    spark.createDataFrame([(1, 0)], SCHEMA).write.format("delta").mode("append").options(
        **log.writer_options(3, {})
    ).save(table_path)
    time.sleep(2)
    spark.createDataFrame([(2, 0)], SCHEMA).write.format("delta").mode("append").save(table_path)
    spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
    snapshot = latest_snapshot(spark, table_path)
    assert not _crc_listed(snapshot)  # Delta keeps expiring transactions out of the checksum
    assert snapshot.transactions().get(log.txn_app_id).isEmpty()  # Delta expired it: a replay would write
    assert recorded_txn(spark, snapshot, log.txn_app_id) is None


def _last_commit(spark: SparkSession, path: str) -> tuple[object, ...]:
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    assert row is not None
    metrics = row["operationMetrics"]
    return (row["operation"], row["operationParameters"], row["userMetadata"], metrics["numOutputRows"])


def test_append_to_table_commits_what_deltas_writer_commits_and_skips_a_recorded_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    writer, ours = str(tmp_path / "writer"), str(tmp_path / "ours")
    for path in (writer, ours):
        ensure_table(spark, path, SCHEMA)
    log = CommitLog(spark, ours, APP)
    batch = spark.createDataFrame([(1, 0), (2, 1)], SCHEMA)
    options = CommitLog(spark, writer, APP).writer_options(4, {"t": 1})
    batch.write.format("delta").mode("append").options(**options).save(writer)
    append_to_table(batch.select("part", "id"), ours, log.writer_options(4, {"t": 1}))
    assert _last_commit(spark, ours) == _last_commit(spark, writer)
    assert log.read().last_batch_id == 4
    append_to_table(batch, ours, log.writer_options(4, {"t": 1}))  # a replay: nothing is written
    assert _rows(spark, ours) == [(1, 0), (2, 1)]
    with pytest.raises(Exception, match="DELTA_FAILED_TO_MERGE_FIELDS"):  # Delta's writer decides
        append_to_table(batch.withColumn("part", F.col("part").cast("long")), ours, {})
    assert _rows(spark, ours) == [(1, 0), (2, 1)]


def test_append_if_commits_only_files_its_check_accepts(spark: SparkSession, table_path: str) -> None:
    ensure_table(spark, table_path, SCHEMA)
    log = CommitLog(spark, table_path, APP)
    batch = spark.createDataFrame([(1, 0), (2, 1)], SCHEMA)
    seen: list[int] = []

    def least_id_above(bound: int) -> Callable[[FileStats], bool]:
        def check(added: FileStats) -> bool:  # the written files' statistics describe the rows
            seen.append(sum(stats["numRecords"] for stats in added))
            return all(stats["minValues"]["id"] > bound for stats in added)

        return check

    version = latest_snapshot(spark, table_path).version()
    assert not append_if(batch, table_path, log.writer_options(1, {}), least_id_above(1))
    assert latest_snapshot(spark, table_path).version() == version and _rows(spark, table_path) == []
    assert log.read().last_batch_id is None  # refused: nothing committed, not even the batch id
    assert append_if(batch, table_path, log.writer_options(1, {}), least_id_above(0))
    assert _rows(spark, table_path) == [(1, 0), (2, 1)] and log.read().last_batch_id == 1
    assert seen == [2, 2]
    assert append_if(batch, table_path, log.writer_options(1, {}), least_id_above(5))  # made before
    assert seen == [2, 2] and _rows(spark, table_path) == [(1, 0), (2, 1)]
    other_columns = batch.withColumn("part", F.col("part").cast("long"))  # only Delta's writer appends it
    assert not append_if(other_columns, table_path, log.writer_options(2, {}), least_id_above(0))
    assert _rows(spark, table_path) == [(1, 0), (2, 1)]


def test_partition_rows_are_the_rows_of_the_null_partition_less_those_deletion_vectors_delete(
    spark: SparkSession, table_path: str
) -> None:
    ensure_table(
        spark, table_path, SCHEMA, partition_by=("part",), properties={"delta.enableDeletionVectors": "true"}
    )
    rows = [(i, None if i % 3 else 1) for i in range(30)]
    spark.createDataFrame(rows, SCHEMA).repartition(3).write.format("delta").mode("append").save(table_path)
    DeltaTable.forPath(spark, table_path).delete("id % 2 = 0")  # marks rows deleted, rewrites no file
    table = spark.read.format("delta").load(table_path)
    version = latest_snapshot(spark, table_path).version()
    assert table.where("part IS NULL").count() == 10
    assert partition_rows(spark, table_path, version, "part") == PartitionRows(rows=10, deleted=10)
    assert partition_rows(spark, table_path, version - 1, "part") == PartitionRows(20, 0)  # before it
    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        spark.createDataFrame([(99, None)], SCHEMA).write.format("delta").mode("append").save(table_path)
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    assert partition_rows(spark, table_path, version + 1, "part") is None  # a file without statistics


def test_append_to_table_fails_when_another_commit_of_its_app_id_landed_first(
    spark: SparkSession, table_path: str
) -> None:
    ensure_table(spark, table_path, SCHEMA)
    options = CommitLog(spark, table_path, APP).writer_options(1, {})
    first = prepare_append(spark.createDataFrame([(1, 0)], SCHEMA), table_path, options)
    second = prepare_append(spark.createDataFrame([(2, 0)], SCHEMA), table_path, options)
    first()
    with pytest.raises(ConcurrentTransactionException):
        second()
    assert _rows(spark, table_path) == [(1, 0)]


def test_prepare_concurrently_writes_every_append_and_leaves_the_commits_to_the_caller(
    spark: SparkSession, tmp_path: Path
) -> None:
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    for path in (first, second):
        ensure_table(spark, path, SCHEMA)
    with warnings.catch_warnings():  # a job's stdout holds its JSON metrics only: no PySpark warning
        warnings.simplefilter("error")
        commits = prepare_concurrently(
            spark,
            [
                lambda: prepare_append(spark.createDataFrame([(1, 0)], SCHEMA), first, {}),
                lambda: prepare_append(spark.createDataFrame([(2, 0)], SCHEMA), second, {}),
            ],
        )
    assert _rows(spark, first) == [] and _rows(spark, second) == []  # written, not committed
    commits[1]()
    assert _rows(spark, first) == [] and _rows(spark, second) == [(2, 0)]
    commits[0]()
    assert _rows(spark, first) == [(1, 0)]


def test_prepare_concurrently_raises_a_failed_write_and_nothing_is_committed(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "table")
    ensure_table(spark, path, SCHEMA)

    def failing() -> Callable[[], None]:
        raise InvalidInputError("bad batch")

    with pytest.raises(InvalidInputError, match="bad batch"):
        prepare_concurrently(
            spark, [lambda: prepare_append(spark.createDataFrame([(1, 0)], SCHEMA), path, {}), failing]
        )
    assert _rows(spark, path) == []
    assert int(latest_snapshot(spark, path).version()) == 0
