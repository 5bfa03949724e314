"""Batches append to the pending partition and leave the sealed versions alone; reads, SQL and the
quality suite see the pending versions resolved; a seal moves them into their segments, reads unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.commit_log import PartitionRows, partition_rows
from lakehouse.quality.suites import check_table
from lakehouse.versioned import SealPolicy, VersionedStore
from lakehouse.versioned.pending import PENDING_SEGMENT
from tests.reference.versioned import VersionedStoreModel
from tests.versioned.helpers import assert_matches_model, at, batch_frame, create_store, store_history

RETENTION_MS = 100_000
INTERVAL_MS = 10_000
KEYS = [f"k{i}" for i in range(6)]


def _last_commit(spark: SparkSession, path: str) -> dict:
    row = DeltaTable.forPath(spark, path).history(1).first()
    assert row is not None
    return {"version": row["version"], "operation": row["operation"], **row["operationMetrics"]}


def _files_with(spark: SparkSession, path: str, value: str) -> list[Path]:
    """The data files of the table at ``path`` holding a row whose value ``v`` is ``value``."""
    rows = spark.read.format("delta").load(path).where(F.col("v") == value)
    names = {r["file"] for r in rows.select(F.input_file_name().alias("file")).distinct().collect()}
    return [Path(unquote(urlparse(name).path)) for name in names]


@contextmanager
def _moved_aside(files: list[Path]) -> Iterator[None]:
    """``files`` are missing inside the block (opening one fails), back in place after it."""
    for file in files:
        file.rename(file.with_name(f".aside-{file.name}"))
    try:
        yield
    finally:
        for file in files:
            file.with_name(f".aside-{file.name}").rename(file)


def _pending_rows(spark: SparkSession, path: str) -> int:
    table = spark.read.format("delta").load(path)
    return table.where(F.col("segment") == PENDING_SEGMENT).count()


def test_a_batch_touches_only_pending_rows_and_reads_are_the_same_before_and_after_a_seal(
    spark: SparkSession, table_path: str
) -> None:
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    model = VersionedStoreModel(RETENTION_MS)
    first = [(k, "a", 1_000 + i, 0, i) for i, k in enumerate(KEYS)]
    # Updates of every key, one late (inside the first version of k0), one at an existing time (k1).
    second = [(k, "b", 50_000 + i, 0, 10 + i) for i, k in enumerate(KEYS)]
    second += [("k0", "late", 1_500, 0, 20), ("k1", "same", 1_001, 0, 21)]
    for batch_id, records in enumerate((first, second)):
        for key, value, ms, _, _ in records:
            model.put(key, value, ms)
        store.put_all(batch_frame(spark, records), batch_id=batch_id)
        if batch_id == 0:
            assert _last_commit(spark, table_path)["operation"] == "WRITE"  # nothing pending: an append
            assert store.seal().rows_written == 2 * len(KEYS)  # each pending row out, its version in
            assert _pending_rows(spark, table_path) == 0

    batch = _last_commit(spark, table_path)
    # The second batch appended to the empty pending partition: no sealed file was read or removed.
    assert batch["operation"] == "WRITE" and int(batch.get("numRemovedFiles", 0)) == 0
    assert _pending_rows(spark, table_path) == len(second)
    pending_history = store_history(store)
    assert_matches_model(store, model)
    probes = [(k, t) for k in ("k0", "k1", "k5") for t in (None, 1_000, 1_200, 1_500, 49_999, 50_005)]
    before = {p: store.get(p[0], None if p[1] is None else at(p[1])) for p in probes}
    as_of_before = sorted(tuple(r) for r in store.as_of(at(1_600)).collect())
    assert check_table(spark, store.path, batch["version"]).violations.isEmpty()

    sealed = store.seal()
    assert sealed.rows_written > 0 and _pending_rows(spark, table_path) == 0
    assert _last_commit(spark, table_path)["operation"] == "MERGE"
    assert store.seal().rows_written == 0  # nothing pending: no commit
    assert store_history(store) == pending_history
    assert {p: store.get(p[0], None if p[1] is None else at(p[1])) for p in probes} == before
    assert sorted(tuple(r) for r in store.as_of(at(1_600)).collect()) == as_of_before
    assert before[("k0", 1_500)] is not None and before[("k0", 1_500)].value == {"v": "late"}
    assert before[("k1", 1_200)] is not None and before[("k1", 1_200)].value == {"v": "same"}


def test_sql_sees_pending_versions_resolved(spark: SparkSession, table_path: str) -> None:
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    store.put_all(batch_frame(spark, [("k0", "a", 1_000, 0, 0), ("k1", "a", 1_000, 0, 1)]))
    store.seal()
    store.put_all(batch_frame(spark, [("k0", "b", 2_000, 0, 2)]))
    store.register("pending_rates")
    latest = spark.sql("SELECT k, v FROM pending_rates WHERE valid_to IS NULL AND NOT tombstone").collect()
    assert sorted(tuple(r) for r in latest) == [("k0", "b"), ("k1", "a")]
    closed = spark.sql("SELECT unix_millis(valid_to) FROM pending_rates WHERE k = 'k0' AND v = 'a'").first()
    assert closed is not None and closed[0] == 2_000
    at_1500 = spark.sql("SELECT k, v FROM pending_rates_as_of(TIMESTAMP_MILLIS(1500)) ORDER BY k").collect()
    assert [tuple(r) for r in at_1500] == [("k0", "a"), ("k1", "a")]


def test_put_all_seals_itself_when_its_policy_is_due(spark: SparkSession, table_path: str) -> None:
    """A batch leaving pending rows >= pending_per_live_key x the live keys (as of the newest seal's read)
    seals the store after its commit; one leaving fewer leaves them pending; reads are the model's."""
    create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    policy = SealPolicy(pending_per_live_key=0.5, min_rows=0)
    store = VersionedStore.open(spark, table_path, seal_policy=policy)
    model = VersionedStoreModel(RETENTION_MS)
    batches = [
        [(k, "a", 1_000 + i, 0, i) for i, k in enumerate(KEYS[:4])],  # no live key yet: seals
        [("k0", "b", 2_000, 0, 10)],  # the seal before read no live key (all pending then): seals
        [("k1", "b", 2_000, 0, 11)],  # 1 pending row < 0.5 x 4 live keys: stays pending
        [("k2", "b", 2_000, 0, 12)],  # 2 pending rows >= 0.5 x 4: seals
    ]
    sealed = []
    for batch_id, records in enumerate(batches):
        for key, value, ms, _, _ in records:
            model.put(key, value, ms)
        sealed.append(store.put_all(batch_frame(spark, records), batch_id=batch_id).sealed_rows)
        assert (store.pending_commits() == 0) == (sealed[-1] is not None)
    assert [s is not None and s > 0 for s in sealed] == [True, True, False, True]
    assert _pending_rows(spark, table_path) == 0
    assert_matches_model(store, model)
    # A replayed batch writes nothing and seals nothing; a handle without a policy never seals by itself.
    assert store.put_all(batch_frame(spark, batches[-1]), batch_id=3).sealed_rows is None
    manual = VersionedStore.open(spark, table_path, seal_policy=None)
    assert manual.put_all(batch_frame(spark, [("k3", "c", 3_000, 0, 13)]), batch_id=4).sealed_rows is None
    assert manual.pending_commits() == 1


def test_a_seal_rewrites_the_latest_versions_once_their_deletion_vectors_delete_as_many_rows_as_they_hold(
    spark: SparkSession, table_path: str
) -> None:
    """Each seal deletes the latest version of each key it moves by deletion vector: the seal whose
    deletions reach the live keys compacts the latest versions' files (an OPTIMIZE), reads unchanged."""
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    model = VersionedStoreModel(RETENTION_MS)
    batches = [[(k, "a", 1_000 + i, 0, i) for i, k in enumerate(KEYS)]]  # one file of the 6 latest
    updates = [("k0", "k1"), ("k2", "k3"), ("k4", "k0")]  # no file loses every row (Delta drops it)
    batches += [
        [(k, f"b{n}", 2_000 + n, 0, 10 * n + i) for i, k in enumerate(keys)]
        for n, keys in enumerate(updates, 1)
    ]
    purged, latest = [], []
    for batch_id, records in enumerate(batches):
        for key, value, ms, _, _ in records:
            model.put(key, value, ms)
        store.put_all(batch_frame(spark, records), batch_id=batch_id)
        purged.append(store.seal().purged)
        version = DeltaTable.forPath(spark, table_path).history(1).first()["version"]
        latest.append(partition_rows(spark, table_path, version, "segment"))
        assert_matches_model(store, model)
    assert purged == [False, False, False, True]
    assert latest == [PartitionRows(6, 0), PartitionRows(6, 2), PartitionRows(6, 4), PartitionRows(6, 0)]
    assert _last_commit(spark, table_path)["operation"] == "OPTIMIZE"


def test_a_batch_over_pending_rows_rewrites_only_the_versions_it_replaces(
    spark: SparkSession, table_path: str
) -> None:
    """A batch into a non-empty pending partition inserts its versions and updates only a pending row at a
    ``(key, valid_from)`` it writes again: the pending versions its later ones follow are not re-bounded
    (reads bound them by the next version), so no file is rewritten unless a version is replaced."""
    store = create_store(spark, table_path, RETENTION_MS, INTERVAL_MS)
    model = VersionedStoreModel(RETENTION_MS)
    batches = [
        [(k, "a", 1_000 + i, 0, i) for i, k in enumerate(KEYS)],
        [(k, "b", 2_000 + i, 0, 10 + i) for i, k in enumerate(KEYS[:3])],  # later versions only
        [("k1", "c", 3_000, 0, 20), ("k0", "same", 2_000, 0, 21)],  # k0's version at 2 000 again
    ]
    merges = []
    for batch_id, records in enumerate(batches):
        for key, value, ms, _, _ in records:
            model.put(key, value, ms)
        if batch_id < 2:
            store.put_all(batch_frame(spark, records), batch_id=batch_id)
        else:  # its versions lie in [00:00:02, 00:00:03]: the first batch's file (00:00:01...) is skipped
            with _moved_aside(_files_with(spark, table_path, "a")):  # by its statistics, never opened
                store.put_all(batch_frame(spark, records), batch_id=batch_id)
        merges.append(_last_commit(spark, table_path))
    assert [m["operation"] for m in merges] == ["WRITE", "MERGE", "MERGE"]
    later, replacing = merges[1], merges[2]
    assert (int(later["numTargetRowsInserted"]), int(later["numTargetRowsUpdated"])) == (3, 0)
    assert int(later["numTargetFilesRemoved"]) == 0
    assert (int(replacing["numTargetRowsInserted"]), int(replacing["numTargetRowsUpdated"])) == (1, 1)
    assert _pending_rows(spark, table_path) == len(KEYS) + 3 + 1
    assert_matches_model(store, model)
    history = store_history(store)
    store.seal()
    assert store_history(store) == history
