"""Kafka Streams' processing order of a batch of records, shared by every stateful primitive.

Within a source partition records are processed by offset. Across partitions a Kafka Streams task takes
next the record of the partition whose head has the smallest timestamp, ties going to the lower partition
number. For a batch that is the same as sorting by ``(running max of the timestamp within the partition,
partition, offset)``: a partition whose time has run ahead waits while the others catch up.

Frames that do not come from Kafka name an explicit ``sequence_by`` column instead.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.errors import SchemaMismatchError

#: Column added by :func:`with_processing_order`; ascending order is processing order.
ORDER_COL = "_lh_order"
PARTITION_COL = "partition"
OFFSET_COL = "offset"


def with_processing_order(df: DataFrame, timestamp: str, sequence_by: str | None = None) -> DataFrame:
    """Add :data:`ORDER_COL`, a struct whose ascending order is the processing order of ``df``.

    Args:
        df: Records with ``partition`` and ``offset`` columns (Kafka-shaped), or ``sequence_by``.
        timestamp: The event-time column.
        sequence_by: Optional column whose ascending order is the processing order; replaces the
            partition/offset order.

    The running maximum is a window per source partition ordered by offset, so each partition of a batch
    is ordered in one Spark task; partitions run in parallel.
    """
    require_order_columns(df, sequence_by)
    if sequence_by is not None:
        return df.withColumn(ORDER_COL, F.struct(F.col(sequence_by).alias("sequence")))
    per_partition = (
        Window.partitionBy(PARTITION_COL)
        .orderBy(F.col(OFFSET_COL).asc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    order = F.struct(
        F.max(timestamp).over(per_partition).alias("partition_time"),
        F.col(PARTITION_COL).alias(PARTITION_COL),
        F.col(OFFSET_COL).alias(OFFSET_COL),
    )
    return df.withColumn(ORDER_COL, order)


def require_order_columns(df: DataFrame, sequence_by: str | None) -> None:
    """Raise unless ``df`` has what :func:`with_processing_order` needs."""
    if sequence_by is not None:
        if sequence_by not in df.columns:
            raise SchemaMismatchError("sequence_by", [sequence_by])
        return
    missing = [c for c in (PARTITION_COL, OFFSET_COL) if c not in df.columns]
    if missing:
        raise SchemaMismatchError(
            "records without partition/offset need an explicit sequence_by column", missing
        )
    # A STRING offset would order "10" before "9": Kafka's partitions and offsets are integers.
    wrong = {
        c: f"{df.schema[c].dataType.simpleString()} (expected an integer type)"
        for c in (PARTITION_COL, OFFSET_COL)
        if not isinstance(df.schema[c].dataType, T.IntegralType)
    }
    if wrong:
        raise SchemaMismatchError("partition/offset order columns", [], wrong)


def null_order_condition(sequence_by: str | None) -> Column:
    """True for records whose processing order is undefined (a null order column)."""
    if sequence_by is not None:
        return F.col(sequence_by).isNull()
    return F.col(PARTITION_COL).isNull() | F.col(OFFSET_COL).isNull()


def task_time(timestamp: str, sequence_by: str | None) -> Column:
    """The largest ``timestamp`` processed so far (this record included) by the record's task.

    With partition/offset order that is the running maximum within the source partition (computed by
    :func:`with_processing_order`); with ``sequence_by`` the whole frame is one task, so it is a running
    maximum over the global sequence (one Spark task).
    """
    if sequence_by is None:
        return F.col(ORDER_COL)["partition_time"]
    in_sequence = Window.orderBy(F.col(ORDER_COL).asc()).rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    return F.max(timestamp).over(in_sequence)
