"""A source's *incarnation*: which life of a source its offsets belong to.

A source whose offsets start again (a Kafka topic deleted and re-created, a Delta source table
re-created, a landing folder re-used with offsets from 0) is a new incarnation of it: its records at
offsets the sink already holds are new records, not re-deliveries. The user acknowledges the reset by
bumping the incarnation number (``Deduplicator.open(..., incarnation=N)``, the pipeline's
``records_incarnation`` spec key). The number is part of two identities:

- **Batch ids**: batch ``b`` of incarnation ``N`` is recorded (index, quarantine and sink
  ``txnVersion``) as ``N * 2**40 + b``, so a new incarnation's batch ids start again from 0 without
  being taken for replays of the old one's, and the old incarnation's batch ids can no longer be run.
- **The sink's delivery identity**: a record is a re-delivery only of a record the sink got *from the
  same incarnation*. At a writer's first batch of incarnation ``N > 0`` the sink gets Delta's row
  tracking (a metadata-only backfill, once) and the table property :func:`property_key` =
  ``"N:V"``, ``V`` being the sink's version before that first batch; rows of incarnation ``N`` are then
  those whose ``_metadata.row_commit_version`` is above ``V`` (Delta keeps a row's commit version through
  OPTIMIZE). Incarnation 0 (the default) compares with the whole sink and changes nothing of it.
"""

from __future__ import annotations

import hashlib

from delta.tables import DeltaTable
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.commit_log import CONFLICTS, latest_snapshot
from lakehouse.errors import InvalidInputError

#: Bits of a recorded batch id that hold the incarnation's own batch id.
BATCH_BITS = 40
#: Largest incarnation whose recorded batch ids fit in a (signed 64-bit) ``txnVersion``.
MAX_INCARNATION = 2 ** (63 - BATCH_BITS) - 1
_ROW_TRACKING = "delta.enableRowTracking"
#: Tries of an incarnation's first metadata commits against concurrent commits to the sink.
_ATTEMPTS = 3


def require_incarnation(incarnation: int) -> int:
    """``incarnation`` if it is an integer in ``[0, MAX_INCARNATION]``; else :class:`InvalidInputError`."""
    if isinstance(incarnation, bool) or not isinstance(incarnation, int):
        raise InvalidInputError(f"incarnation must be an integer, got {incarnation!r}")
    if not 0 <= incarnation <= MAX_INCARNATION:
        raise InvalidInputError(f"incarnation must be between 0 and {MAX_INCARNATION}, got {incarnation}")
    return incarnation


def recorded_batch_id(incarnation: int, batch_id: int | None) -> int | None:
    """The batch id recorded for batch ``batch_id`` (``>= 0``, ``< 2**40``) of ``incarnation``.

    Raises:
        InvalidInputError: ``batch_id`` is not an integer or is out of that range.
    """
    if batch_id is None:
        return None
    if isinstance(batch_id, bool) or not isinstance(batch_id, int):
        raise InvalidInputError(f"batch_id must be an integer, got {batch_id!r}")
    if not 0 <= batch_id < 2**BATCH_BITS:
        raise InvalidInputError(f"batch_id must be >= 0 and < 2**{BATCH_BITS}, got {batch_id}")
    return (incarnation << BATCH_BITS) | batch_id


def property_key(txn_app_id: str) -> str:
    """The sink property recording where incarnation of the writer ``txn_app_id`` began."""
    return f"lakehouse.incarnation.{hashlib.sha1(txn_app_id.encode()).hexdigest()[:16]}"


def start_version(
    spark: SparkSession, sink: str, txn_app_id: str, incarnation: int, schema: T.StructType | None
) -> int | None:
    """The sink version after which the rows of ``incarnation`` of writer ``txn_app_id`` were committed
    (-1: all of them), or None for incarnation 0 (every row counts).

    At the writer's first batch of the incarnation this enables row tracking on the sink (when it lacks
    it) and records the version (the property of :func:`property_key`); a sink that does not exist yet is
    created empty (columns of ``schema``) with both. Later batches read the property (no Spark job).
    """
    if incarnation == 0:
        return None
    key = property_key(txn_app_id)
    if not DeltaTable.isDeltaTable(spark, sink):
        assert schema is not None
        properties = {_ROW_TRACKING: "true", key: f"{incarnation}:-1"}
        delta_ops.ensure_table(spark, sink, schema, created_with=properties)
    recorded = delta_ops.table_properties(spark, sink, "").get(key, "")
    number, _, version = recorded.partition(":")
    if number == str(incarnation):
        return int(version)
    for _ in range(_ATTEMPTS - 1):
        try:
            return _record_start(spark, sink, key, incarnation)
        except CONFLICTS:  # a concurrent commit (another writer's append): each step is idempotent
            continue
    return _record_start(spark, sink, key, incarnation)


def _record_start(spark: SparkSession, sink: str, key: str, incarnation: int) -> int:
    """Enable row tracking on ``sink`` (if not yet) and record its current version as where
    ``incarnation`` began (the property ``key``); the version."""
    if delta_ops.table_properties(spark, sink, _ROW_TRACKING).get(_ROW_TRACKING) != "true":
        spark.sql(f"ALTER TABLE delta.`{sink}` SET TBLPROPERTIES ('{_ROW_TRACKING}' = 'true')")
    version = int(latest_snapshot(spark, sink).version())
    spark.sql(f"ALTER TABLE delta.`{sink}` SET TBLPROPERTIES ('{key}' = '{incarnation}:{version}')")
    return version


def rows_since(version: int) -> Column:
    """Rows committed after ``version`` (a table with row tracking)."""
    return F.col("_metadata.row_commit_version") > F.lit(version)
