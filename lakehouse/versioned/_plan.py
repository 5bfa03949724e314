"""The put-batch plan of a versioned store, as ``DataFrame -> DataFrame`` transforms.

Applying a batch must equal applying its records one by one in processing order. Two facts make that a
distributed computation rather than a sequential loop:

1. Retention. A record ``i`` is dropped iff ``t_i < max(ST0, task_time_i) - R``, where ``ST0`` is the
   store's stream time before the batch and ``task_time_i`` the running maximum timestamp of its task up
   to and including ``i``. (Every record processed before ``i`` has a task time ``<= task_time_i``; if
   ``t_i < task_time_i`` an earlier record of the same partition reached ``task_time_i``.) A per-partition
   window, no global sort.
2. Versions. Accepted records only set ``map[key][t] = value``, so the final store is the union of the
   existing versions and, per ``(key, t)``, the last accepted record in processing order; each version's
   ``valid_to`` is the next ``valid_from`` of its key. One window per key does both (ordered by time,
   then stored before incoming, then processing order).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.commit_log import INPUT_FINGERPRINT, input_fingerprint
from lakehouse.ordering import ORDER_COL, null_order_condition, task_time, with_processing_order
from lakehouse.versioned.segments import SEGMENT_COL, segment_column

VALID_FROM = "valid_from"
VALID_TO = "valid_to"
TOMBSTONE = "tombstone"
SYSTEM_COLUMNS = (VALID_FROM, VALID_TO, SEGMENT_COL, TOMBSTONE)
# Internal columns of the plan.
_T_US = "_t_us"
_TASK_TIME_US = "_task_time_us"
_DROPPED = "_dropped"
_ORDER_NULL = "_order_null"
_SOURCE = "_source"
INCOMING_FLAG = "_incoming"
_INCOMING, _EXISTING = 1, 0


def prepare_batch(
    df: DataFrame,
    keys: Sequence[str],
    values: Sequence[str],
    timestamp: str,
    tombstone: Column,
    sequence_by: str | None,
) -> DataFrame:
    """Project the batch onto the store's columns plus its processing order and task time (microseconds)."""
    ordered = with_processing_order(df, timestamp, sequence_by)
    return ordered.select(
        *keys,
        *[F.when(tombstone, F.lit(None)).otherwise(F.col(v)).alias(v) for v in values],
        tombstone.alias(TOMBSTONE),
        F.unix_micros(timestamp).alias(_T_US),
        F.unix_micros(task_time(timestamp, sequence_by)).alias(_TASK_TIME_US),
        ORDER_COL,
        null_order_condition(sequence_by).alias(_ORDER_NULL),
    )


def mark_dropped(prepared: DataFrame, stream_time_us: int | None, retention_us: int) -> DataFrame:
    """Add ``_dropped``: the record is older than its task's stream time minus the history retention."""
    task_stream_time = F.col(_TASK_TIME_US)
    if stream_time_us is not None:
        task_stream_time = F.greatest(task_stream_time, F.lit(stream_time_us))
    return prepared.withColumn(_DROPPED, F.col(_T_US) < task_stream_time - F.lit(retention_us))


def batch_stats(marked: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """One-row summary of a marked batch: counts, null violations, the time range of every record and the
    earliest accepted time, and the input's fingerprint (:func:`input_summary`)."""
    accepted_t = F.when(~F.col(_DROPPED), F.col(_T_US))
    return marked.agg(
        F.count(F.lit(1)).alias("records"),
        _fingerprint(keys, values),
        F.count(F.when(F.col(_DROPPED), 1)).alias("dropped"),
        F.count(F.when(_any_null(keys), 1)).alias("null_keys"),
        F.count(F.when(F.col(_T_US).isNull(), 1)).alias("null_timestamps"),
        F.count(F.when(F.col(_ORDER_NULL), 1)).alias("null_order"),
        F.min(accepted_t).alias("min_accepted_us"),
        F.min(F.col(_T_US)).alias("min_us"),
        F.max(F.col(_T_US)).alias("max_us"),
    )


def input_summary(prepared: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """One-row summary of a prepared batch that a replay compares with its commit: ``records`` and the
    :data:`~lakehouse.commit_log.INPUT_FINGERPRINT` of its keys, values, tombstones, times and order."""
    return prepared.agg(F.count(F.lit(1)).alias("records"), _fingerprint(keys, values))


def _fingerprint(keys: Sequence[str], values: Sequence[str]) -> Column:
    columns = [*keys, *values, TOMBSTONE, _T_US, ORDER_COL]
    return input_fingerprint(columns).alias(INPUT_FINGERPRINT)


def _any_null(columns: Sequence[str]) -> Column:
    condition = F.lit(False)
    for column in columns:
        condition = condition | F.col(column).isNull()
    return condition


def accepted_records(marked: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """The accepted (not dropped) records of a marked batch as versions, with their processing order.

    Several records of one ``(key, t)`` are all kept here; :func:`resolve_versions` keeps the last.
    """
    return marked.where(~F.col(_DROPPED)).select(
        *keys, F.timestamp_micros(_T_US).alias(VALID_FROM), TOMBSTONE, *values, ORDER_COL
    )


def batch_versions(
    incoming: DataFrame, keys: Sequence[str], values: Sequence[str], interval_us: int
) -> DataFrame:
    """The versions of a batch on its own: :func:`resolve_versions` against no stored version (per
    ``(key, valid_from)`` the last record in processing order; ``valid_to`` the next version of the key in
    the batch, NULL for its last)."""
    nothing_stored = incoming.select(*keys, VALID_FROM, F.lit(None).cast("timestamp").alias(VALID_TO))
    return resolve_versions(nothing_stored.where(F.lit(False)), incoming, keys, values, interval_us)


def resolve_versions(
    existing: DataFrame,
    incoming: DataFrame,
    keys: Sequence[str],
    values: Sequence[str],
    interval_us: int,
) -> DataFrame:
    """Splice ``incoming`` records into the ``existing`` versions of the same keys, in one window per key.

    ``incoming`` is :func:`accepted_records`: per ``(key, valid_from)`` the last record in processing
    order is the version (it replaces any stored version and earlier records at the same time).
    ``existing`` must hold the key, ``valid_from`` and ``valid_to`` of every stored version of
    ``incoming``'s keys with ``valid_to`` NULL or later than the smallest incoming ``valid_from`` (older
    versions cannot change); their values are not needed, so a store with wide values reads narrow columns.
    Returns the versions the store must write: every incoming version (with its ``valid_to``, values and
    ``_incoming`` true; one that replaces a stored version at the same ``valid_from`` updates it), and
    every stored version whose ``valid_to`` changes (``_incoming`` false, NULL values: only ``valid_to``
    and ``segment`` are to be updated).
    """
    payload = [TOMBSTONE, *values]
    payload_types = dict(incoming.select(*payload).dtypes)
    order_type = incoming.schema[ORDER_COL].dataType
    union = existing.select(
        *keys,
        VALID_FROM,
        VALID_TO,
        *[F.lit(None).cast(payload_types[c]).alias(c) for c in payload],
        F.lit(_EXISTING).alias(_SOURCE),
        F.lit(None).cast(order_type).alias(ORDER_COL),
    ).unionByName(
        incoming.select(
            *keys,
            VALID_FROM,
            F.lit(None).cast("timestamp").alias(VALID_TO),
            *payload,
            F.lit(_INCOMING).alias(_SOURCE),
            ORDER_COL,
        )
    )
    # At one valid_from the stored version sorts first, then the records in processing order: every row
    # but the last of its valid_from sees the same valid_from next and is replaced (dropped; the last
    # record's row updates the stored one), and the last one's next row starts the next version.
    by_time = Window.partitionBy(*keys).orderBy(
        F.col(VALID_FROM).asc(), F.col(_SOURCE).asc(), F.col(ORDER_COL).asc()
    )
    next_from = F.lead(VALID_FROM, 1).over(by_time)
    replaced = next_from == F.col(VALID_FROM)
    resolved = union.select(
        *keys,
        VALID_FROM,
        VALID_TO,
        *payload,
        F.col(_SOURCE),
        next_from.alias("_new_valid_to"),
        F.coalesce(replaced, F.lit(False)).alias("_replaced"),
    )
    incoming_row = F.col(_SOURCE) == _INCOMING
    changed = incoming_row | ~F.col("_new_valid_to").eqNullSafe(F.col(VALID_TO))
    return resolved.where(~F.col("_replaced") & changed).select(
        *keys,
        VALID_FROM,
        F.col("_new_valid_to").alias(VALID_TO),
        segment_column("_new_valid_to", interval_us).alias(SEGMENT_COL),
        *payload,
        incoming_row.alias(INCOMING_FLAG),
    )
