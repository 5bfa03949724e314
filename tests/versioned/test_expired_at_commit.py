"""A batch spanning many segments adds files to its pending partition only, and the seal moving its
versions into their segments writes only what a read can see: versions already expired when it commits
are not written (stored ones are deleted), so it adds files to about R / interval + 2 partitions."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.quality.suites import check_table
from tests.reference.versioned import VersionedStoreModel
from tests.versioned.helpers import assert_matches_model, at, batch_frame, create_store, ms_of

RETENTION_MS = 60_000
INTERVAL_MS = 10_000
KEYS = ("k0", "k1", "k2")
STEP_MS = 5_000
#: The long batch spans this many segments (one update of some key every STEP_MS).
SEGMENTS_SPANNED = 300


def _updates(first_ms: int, count: int, first_offset: int) -> list[tuple[str, str | None, int, int, int]]:
    """``count`` updates from ``first_ms`` on, round-robin over the keys, every fifth a delete."""
    return [
        (KEYS[i % len(KEYS)], None if i % 5 == 4 else f"v{n}", first_ms + i * STEP_MS, 0, n)
        for i, n in enumerate(range(first_offset, first_offset + count))
    ]


def test_a_batch_over_many_segments_writes_bounded_files_and_reads_like_the_model(
    spark: SparkSession, table_path: str
) -> None:
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    model = VersionedStoreModel(RETENTION_MS)
    first = _updates(0, 12, 0)
    long = _updates(12 * STEP_MS, SEGMENTS_SPANNED * INTERVAL_MS // STEP_MS, len(first))
    for batch_id, records in enumerate((first, long)):
        for key, value, ms, _, _ in records:
            model.put(key, value, ms)
        store.put_all(batch_frame(spark, records), batch_id=batch_id)

    merge = DeltaTable.forPath(spark, table_path).history(1).first()
    assert merge is not None and merge["operation"] == "MERGE"
    metrics = merge["operationMetrics"]
    # The batch's versions reach back to its first record, 300 segments before its stream time; they are
    # all pending (one partition), expired ones too: they bound the versions before them until the seal.
    assert int(metrics["numTargetFilesAdded"]) <= 2
    assert int(metrics["numTargetRowsDeleted"]) == 0

    for sealed in (False, True):  # the pending versions, then the same after a seal moved them
        if sealed:
            store.seal()
            seal = DeltaTable.forPath(spark, table_path).history(1).first()
            assert seal is not None and seal["operation"] == "MERGE"
            # Only the segments from floor((stream time - R) / interval) on and the latest one are written.
            assert int(seal["operationMetrics"]["numTargetFilesAdded"]) <= RETENTION_MS // INTERVAL_MS + 2
            # The first batch's versions of every key are expired now: the seal deleted each, and wrote no
            # expired version of the long batch.
            physical = spark.read.format("delta").load(table_path)
            horizon_ms = model.stream_time - RETENTION_MS
            stale = physical.where(F.col("valid_to").isNotNull() & (F.unix_millis("valid_to") <= horizon_ms))
            assert stale.count() == 0
            assert physical.count() == len(model.readable_history())
        assert ms_of(store.stream_time) == model.stream_time
        assert_matches_model(store, model)
        horizon = model.stream_time - RETENTION_MS
        for as_of in (0, 30_000, horizon - 1, horizon, model.stream_time):  # expired ... not expired
            rows = store.as_of(at(as_of)).select(
                "k", "v", F.unix_millis("valid_from"), F.unix_millis("valid_to")
            )
            found = {tuple(row) for row in rows.collect()}
            expected = {(k, v.value, v.valid_from, v.valid_to) for k in KEYS if (v := model.get(k, as_of))}
            assert found == expected, as_of
        version = DeltaTable.forPath(spark, table_path).history(1).first()["version"]
        assert check_table(spark, store.path, version).violations.isEmpty()
