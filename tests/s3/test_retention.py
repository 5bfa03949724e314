"""Retention on an object store (issue 38): a versioned store's expiry drops whole segments in metadata
only and VACUUM deletes their files, on ``s3a://`` as on a local folder (the same scenario)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from tests.objectstore import ObjectStore
from tests.versioned.expiry import assert_expiry_is_metadata_only_then_vacuum_deletes


def test_expiry_drops_whole_segments_metadata_only_and_vacuum_removes_files(
    spark: SparkSession, s3: ObjectStore, retention_check_off: None
) -> None:
    assert_expiry_is_metadata_only_then_vacuum_deletes(spark, s3.uri("store"))
