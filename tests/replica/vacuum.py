"""VACUUM of a source keeps what its registered replicas need within their ``max_lag``: one scenario for any
file system Hadoop reaches, run on a local folder (tests/replica/test_replica.py) and on an object store
(tests/s3/test_replicas.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import SparkSession

from lakehouse.replica import Replica, ReplicaReinitializedWarning, vacuum_source
from lakehouse.versioned import VersionedStore
from tests.replica.helpers import RETENTION_MS, TWO_KEYS, assert_equals_source, no_reinit, put
from tests.versioned.helpers import SCHEMA


def assert_vacuum_keeps_what_a_registered_replica_needs(spark: SparkSession, root: str) -> None:
    """A store at ``root/src`` (``file_retention`` 0: needs the retention check off) with two registered
    replicas, ``kept`` (default ``max_lag``) and ``lost`` (``max_lag`` 0), both one batch behind: VACUUM
    deletes nothing while ``kept`` needs the removed files, deletes them once it caught up, and ``lost``'s
    next sync re-initializes it (its changes are gone)."""
    store = VersionedStore.create(
        spark,
        f"{root}/src",
        "k",
        SCHEMA,
        timedelta(milliseconds=RETENTION_MS),
        file_retention=timedelta(0),  # a plain VACUUM would delete every removed file at once
    )
    put(store, TWO_KEYS, 0)
    kept = Replica.create(spark, store.path, f"{root}/kept")
    lost = Replica.create(spark, store.path, f"{root}/lost", max_lag=timedelta(0))
    kept.sync()
    lost.sync()
    # Both versions written again with new values: the batch rewrites the pending file holding them, so
    # VACUUM has a removed file that the replicas' changes need.
    put(store, [("a", "y", 0, 0, 2), ("b", "y", 1, 0, 3)], 1)
    with pytest.warns(UserWarning, match="further behind"):
        report = vacuum_source(spark, store.path)
    assert report.protected == (kept.path,) and report.beyond_retention == (lost.path,)
    # Delta forgets removed files older than the table's retention (0 here): nothing is vacuumed.
    assert report.held_back_by == (kept.path,) and report.files_deleted == 0
    with no_reinit():
        assert not kept.sync().restored
    assert_equals_source(kept)
    with pytest.warns(UserWarning, match="further behind"):
        report = vacuum_source(spark, store.path)  # kept is caught up: nothing holds VACUUM back
    assert report.held_back_by == () and report.files_deleted > 0
    with pytest.warns(ReplicaReinitializedWarning, match="VACUUM"):
        assert lost.sync().restored
    assert_equals_source(lost)
