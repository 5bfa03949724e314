"""Expiry drops whole segments in metadata only, then VACUUM deletes their files: one scenario for any file
system Hadoop reaches, run on a local folder (tests/versioned/test_store.py) and on an object store
(tests/s3/test_retention.py)."""

from __future__ import annotations

from datetime import timedelta

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from lakehouse.versioned import VersionedStore
from tests.files import existing, matching
from tests.versioned.helpers import SCHEMA, at, batch_frame

RETENTION_MS = 60_000
INTERVAL_MS = 10_000


def _value(store: VersionedStore, key: str, as_of_ms: int) -> str | None:
    found = store.get(key, at(as_of_ms))
    return None if found is None else found.value["v"]


def assert_expiry_is_metadata_only_then_vacuum_deletes(spark: SparkSession, path: str) -> None:
    """A store at ``path`` (``file_retention`` 0: needs the retention check off) with two sealed batches:
    ``expire()`` removes the files of the segments out of retention in one commit that copies no row and
    adds no file, reads inside retention are unchanged, and ``vacuum()`` deletes those files."""
    store = VersionedStore.create(
        spark,
        path,
        "k",
        SCHEMA,
        timedelta(milliseconds=RETENTION_MS),
        timedelta(milliseconds=INTERVAL_MS),
        file_retention=timedelta(0),
    )
    records = [(f"k{i % 3}", f"v{i}", i * 5_000, 0, i) for i in range(30)]  # 0 s .. 145 s
    # Two batches, each sealed into its segments: a seal writes no version already expired at its commit,
    # so the old segments hold the first batch's versions that only the second one expired.
    store.put_all(batch_frame(spark, records[:15]), batch_id=0)
    store.seal()
    store.put_all(batch_frame(spark, records[15:]), batch_id=1)
    store.seal()
    # All >= ST - R; each key has a version every 15 s, so two probes land in each.
    probes = [(f"k{k}", t) for k in range(3) for t in range(85_000, 150_000, 7_500)]
    before = [_value(store, key, t) for key, t in probes]
    rows_before = store.table().count()

    expired = store.expire()

    assert expired.first_live_segment == (145_000 - RETENTION_MS) // INTERVAL_MS
    assert expired.removed_files > 0
    metrics = DeltaTable.forPath(spark, path).history(1).first()["operationMetrics"]
    assert int(metrics.get("numCopiedRows", "0")) == 0 and int(metrics.get("numAddedFiles", "0")) == 0
    segments = {r["segment"] for r in store.table().select("segment").distinct().collect()}
    assert min(s for s in segments if s is not None) >= expired.first_live_segment
    assert store.table().count() == rows_before - expired.removed_rows
    assert [_value(store, key, t) for key, t in probes] == before
    old_files = [
        f for s in range(expired.first_live_segment) for f in matching(spark, f"{path}/segment={s}/*.parquet")
    ]
    assert old_files
    assert store.vacuum() >= len(old_files)
    assert existing(spark, old_files) == []
    assert store.expire().removed_files == 0
