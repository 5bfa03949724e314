"""Several writers on object storage (issue 38): Delta 4.4's S3 log store arbitrates the commits of one
driver only, and lakehouse says so, once and loudly, when a second writer commits to such a table."""

from __future__ import annotations

import warnings

import pytest
from pyspark.sql import SparkSession

from lakehouse.commit_log import latest_snapshot
from lakehouse.errors import UnarbitratedWritersWarning
from lakehouse.log_store import arbitrates_between_drivers, log_store_class
from lakehouse.versioned import VersionedStore
from tests.objectstore import ObjectStore
from tests.versioned.helpers import batch_frame, create_store


def _two_writers_put(spark: SparkSession, path: str) -> list[warnings.WarningMessage]:
    """Writers "one" and "two" each put two batches into the store at ``path``; the warnings raised."""
    create_store(spark, path, retention_ms=10_000_000)
    one, two = (VersionedStore.open(spark, path, writer=name) for name in ("one", "two"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch_id in (0, 1):
            one.put_all(batch_frame(spark, [("a", f"a{batch_id}", 100 + batch_id, 0, batch_id)]), batch_id)
            two.put_all(batch_frame(spark, [("b", f"b{batch_id}", 200 + batch_id, 1, batch_id)]), batch_id)
    return [w for w in caught if issubclass(w.category, UnarbitratedWritersWarning)]


@pytest.mark.slow
def test_a_second_writer_of_a_store_on_s3_is_warned_once_that_one_driver_is_arbitrated(
    spark: SparkSession, s3: ObjectStore
) -> None:
    path = s3.uri("store")
    warned = _two_writers_put(spark, path)

    assert log_store_class(latest_snapshot(spark, path)).endswith("S3SingleDriverLogStore")
    assert not arbitrates_between_drivers(latest_snapshot(spark, path))
    assert len(warned) == 1  # once per table and process, not per batch
    message = str(warned[0].message)
    assert path in message and "'one'" in message and "'two'" in message
    assert "S3SingleDriverLogStore" in message and "\n" not in message
    # Both writers' batches are there: within one driver, Delta's lock arbitrates.
    keys = sorted(r["k"] for r in VersionedStore.open(spark, path).history().collect())
    assert keys == ["a", "a", "b", "b"]


def test_two_writers_on_a_file_system_with_atomic_rename_are_not_warned(
    spark: SparkSession, table_path: str
) -> None:
    assert _two_writers_put(spark, table_path) == []
    assert arbitrates_between_drivers(latest_snapshot(spark, table_path))


def test_one_named_writer_on_s3_is_not_warned(spark: SparkSession, s3: ObjectStore) -> None:
    """One named job beside the unnamed writer (one job per store; a demo's first load) is one driver's
    work, not two writers sharing a store."""
    path = s3.uri("store")
    create_store(spark, path, retention_ms=10_000_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnarbitratedWritersWarning)
        for batch_id, writer in ((0, None), (1, "one"), (2, "one"), (3, None)):
            store = VersionedStore.open(spark, path, writer=writer)
            store.put_all(batch_frame(spark, [("a", f"a{batch_id}", 100 + batch_id, 0, batch_id)]), batch_id)
        VersionedStore.open(spark, path).seal()


def test_the_object_store_refuses_a_conditional_put_over_an_existing_object(
    spark: SparkSession, s3: ObjectStore
) -> None:
    """What the docs say of S3's conditional PUT: S3A 3.5 sends ``If-None-Match: *`` on request, and the
    store refuses to overwrite (Delta 4.4's S3 log store does not ask for it)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(s3.uri("_delta_log", "00000000000000000001.json"))
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())  # type: ignore[union-attr]

    def create(text: str) -> None:
        stream = fs.createFile(path).must("fs.option.create.conditional.overwrite", True).build()
        stream.write(bytearray(text.encode()))
        stream.close()

    create("first")
    with pytest.raises(Exception, match=r"412|PreconditionFailed"):
        create("second")
    stream = fs.open(path)
    assert jvm.java.lang.String(jvm.org.apache.commons.io.IOUtils.toByteArray(stream)) == "first"
    stream.close()
