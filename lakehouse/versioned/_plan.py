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
   ``valid_to`` is the next ``valid_from`` of its key. A window per key.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

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


def batch_stats(marked: DataFrame, keys: Sequence[str]) -> DataFrame:
    """One-row summary of a marked batch: counts, null violations and the accepted time range."""
    accepted_t = F.when(~F.col(_DROPPED), F.col(_T_US))
    return marked.agg(
        F.count(F.lit(1)).alias("records"),
        F.count(F.when(F.col(_DROPPED), 1)).alias("dropped"),
        F.count(F.when(_any_null(keys), 1)).alias("null_keys"),
        F.count(F.when(F.col(_T_US).isNull(), 1)).alias("null_timestamps"),
        F.count(F.when(F.col(_ORDER_NULL), 1)).alias("null_order"),
        F.min(accepted_t).alias("min_accepted_us"),
        F.max(F.col(_T_US)).alias("max_us"),
    )


def _any_null(columns: Sequence[str]) -> Column:
    condition = F.lit(False)
    for column in columns:
        condition = condition | F.col(column).isNull()
    return condition


def incoming_versions(marked: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """Accepted records reduced to one per ``(key, t)``: the last in processing order wins."""
    last_first = Window.partitionBy(*keys, _T_US).orderBy(F.col(ORDER_COL).desc())
    return (
        marked.where(~F.col(_DROPPED))
        .withColumn("_rank", F.row_number().over(last_first))
        .where(F.col("_rank") == 1)
        .select(*keys, F.timestamp_micros(_T_US).alias(VALID_FROM), TOMBSTONE, *values)
    )


def resolve_versions(
    existing: DataFrame,
    incoming: DataFrame,
    keys: Sequence[str],
    values: Sequence[str],
    interval_us: int,
) -> DataFrame:
    """Splice ``incoming`` versions into the ``existing`` versions of the same keys.

    ``existing`` must hold, for every key of ``incoming``, each stored version with ``valid_to`` NULL or
    later than the smallest incoming ``valid_from`` (older versions cannot change). Returns every resolved
    version with its new ``valid_to`` and ``segment``, plus ``_incoming`` (the row comes from the batch)
    and ``_changed`` (the store must write it).
    """
    payload = [TOMBSTONE, *values]
    union = existing.select(
        *keys, VALID_FROM, VALID_TO, *payload, F.lit(_EXISTING).alias(_SOURCE)
    ).unionByName(
        incoming.select(
            *keys,
            VALID_FROM,
            F.lit(None).cast("timestamp").alias(VALID_TO),
            *payload,
            F.lit(_INCOMING).alias(_SOURCE),
        )
    )
    # Existing sorts before incoming at the same valid_from, so an incoming version sees the version it
    # replaces just before it, and a replaced version sees its replacement just after it.
    by_time = Window.partitionBy(*keys).orderBy(F.col(VALID_FROM).asc(), F.col(_SOURCE).asc())
    same_time_before = F.lag(VALID_FROM, 1).over(by_time) == F.col(VALID_FROM)
    replaced = (F.lead(VALID_FROM, 1).over(by_time) == F.col(VALID_FROM)) & (F.col(_SOURCE) == _EXISTING)
    with_neighbours = union.select(
        *keys,
        VALID_FROM,
        *payload,
        F.col(_SOURCE),
        F.lead(VALID_FROM, 1).over(by_time).alias("_new_valid_to"),
        F.coalesce(replaced, F.lit(False)).alias("_replaced"),
        F.coalesce(same_time_before, F.lit(False)).alias("_replaces"),
        F.when(F.col(_SOURCE) == _EXISTING, F.col(VALID_TO))
        .otherwise(F.lag(VALID_TO, 1).over(by_time))
        .alias("_old_valid_to"),
        *[F.lag(c, 1).over(by_time).alias(f"_old_{c}") for c in payload],
    )
    return _flag_changes(with_neighbours.where(~F.col("_replaced")), keys, payload, interval_us)


def _flag_changes(
    resolved: DataFrame, keys: Sequence[str], payload: Sequence[str], interval_us: int
) -> DataFrame:
    incoming = F.col(_SOURCE) == _INCOMING
    same_payload = F.lit(True)
    for column in payload:
        same_payload = same_payload & F.col(column).eqNullSafe(F.col(f"_old_{column}"))
    unchanged_incoming = F.col("_replaces") & same_payload
    same_valid_to = F.col("_new_valid_to").eqNullSafe(F.col("_old_valid_to"))
    changed = F.when(incoming, ~unchanged_incoming | ~same_valid_to).otherwise(~same_valid_to)
    return resolved.select(
        *keys,
        VALID_FROM,
        F.col("_new_valid_to").alias(VALID_TO),
        segment_column(F.col("_new_valid_to"), interval_us).alias(SEGMENT_COL),
        *payload,
        incoming.alias("_incoming"),
        changed.alias("_changed"),
    )
