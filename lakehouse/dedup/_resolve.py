"""Per-id sequential resolution of a batch, as DataFrame transforms (no Python on the per-row path).

The outline (each step a function below):

1. :func:`prepare`: task of each record, its event time and the task's stream time *at* the record in
   microseconds. In processing order the running maximum of the timestamps over a task is the record's
   partition time (the struct :data:`~lakehouse.ordering.ORDER_COL` is sorted on it first), so stream time
   at a record is ``greatest(stream time before the batch, partition time)``, for one global task too.
2. :func:`live_entries`: the index entries not expired at the start of the batch, pruned to the live
   buckets by literal bounds. At most one row per (task, id) is live: a forwarded record is saved only
   when the previous entry of its id has already expired (see ``deduplicator.py``).
3. :func:`resolve`: group the records of each (task, id) (a shuffle keyed by id), sort them in processing
   order, join the id's live entry and fold the KIP-655 decision over the records with ``aggregate`` (a
   higher-order function evaluated in the JVM, distributed over ids), then explode back to one row per
   record with its decision, the entry that caused a drop, and whether it is the id's new index entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.dedup.settings import (
    BUCKET_COL,
    ENTRY_OFFSET_COL,
    ENTRY_PARTITION_COL,
    ENTRY_TS_COL,
    TASK_COL,
    DedupSettings,
)
from lakehouse.ordering import OFFSET_COL, ORDER_COL, PARTITION_COL, with_processing_order

TIMESTAMP_COL = "timestamp"
# Decisions (values of DECISION_COL).
FORWARDED, DUPLICATE, LATE, REPLAYED, NULL_ID = 0, 1, 2, 3, 4
DECISION_COL = "_lh_decision"
SAVED_COL = "_lh_saved"
CAUSE_COL = "_lh_cause"
TASK = "_lh_task"
_T = "_lh_t"
_ST = "_lh_st"
_E_T, _E_P, _E_O = "_lh_e_t", "_lh_e_p", "_lh_e_o"
_CAUSE_TYPE = "struct<t:bigint,p:int,o:bigint>"
_OUT_TYPE = f"array<struct<d:int,c:{_CAUSE_TYPE}>>"


def null_id(by: Sequence[str]) -> Column:
    """True for records whose id (or any part of it) is null: always forwarded, never stored."""
    return reduce(lambda a, b: a | b, [F.col(c).isNull() for c in by])


def _long_map(values: Mapping[int, int]) -> Column:
    if not values:
        return F.create_map().cast("map<int,bigint>")
    pairs = [F.lit(x) for task, us in sorted(values.items()) for x in (task, us)]
    return F.create_map(*pairs).cast("map<int,bigint>")


def stream_time_before(task: Column, stream_times: Mapping[int, int]) -> Column:
    """The task's stream time before the batch (microseconds), NULL for a task never seen."""
    return F.element_at(_long_map(stream_times), task)


def prepare(df: DataFrame, settings: DedupSettings, stream_times: Mapping[int, int]) -> DataFrame:
    """``df`` plus :data:`TASK`, the event time and the stream time at each record, in microseconds."""
    ordered = with_processing_order(df, TIMESTAMP_COL)
    task = F.col(PARTITION_COL) if settings.per_partition else F.lit(0)
    partition_time = F.unix_micros(F.col(ORDER_COL)["partition_time"])
    return ordered.select(
        *df.columns,
        F.col(ORDER_COL),
        task.cast("int").alias(TASK),
        F.unix_micros(TIMESTAMP_COL).alias(_T),
        F.greatest(stream_time_before(task.cast("int"), stream_times), partition_time).alias(_ST),
    )


def live_entries(index: DataFrame, settings: DedupSettings, stream_times: Mapping[int, int]) -> DataFrame:
    """Entries not expired at the start of the batch: ``entry_ts >= stream_time(task) - interval``.

    The bucket bound is a literal (partition pruning); a task never seen has no entry.
    """
    if not stream_times:
        return index.where(F.lit(False)).select(*_entry_columns(settings))
    first_live = (min(stream_times.values()) - settings.interval_us) // settings.bucket_us
    bound = stream_time_before(F.col(TASK_COL), stream_times) - F.lit(settings.interval_us)
    return (
        index.where(F.col(BUCKET_COL) >= F.lit(first_live))
        .where(F.unix_micros(ENTRY_TS_COL) >= bound)
        .select(*_entry_columns(settings))
    )


def _entry_columns(settings: DedupSettings) -> list[Column]:
    return [
        F.col(TASK_COL).alias(TASK),
        *[F.col(c) for c in settings.by],
        F.unix_micros(ENTRY_TS_COL).alias(_E_T),
        F.col(ENTRY_PARTITION_COL).alias(_E_P),
        F.col(ENTRY_OFFSET_COL).alias(_E_O),
    ]


def resolve(
    prepared: DataFrame, live: DataFrame, settings: DedupSettings, columns: Sequence[str]
) -> DataFrame:
    """Every record of ``prepared`` with its decision, as if the batch had been processed one by one.

    Returns ``columns`` plus :data:`TASK`, :data:`DECISION_COL`, :data:`CAUSE_COL` (the entry that caused a
    drop: t, p, o) and :data:`SAVED_COL` (true on the record that is its id's index entry after the batch).
    """
    keyed = prepared.where(~null_id(settings.by))
    record = F.struct(
        F.col(ORDER_COL).alias("order"),
        F.col(PARTITION_COL).alias("p"),
        F.col(OFFSET_COL).alias("o"),
        F.col(_T).alias("t"),
        F.col(_ST).alias("st"),
        F.struct(*[F.col(c) for c in columns]).alias("row"),
    )
    groups = keyed.groupBy(TASK, *settings.by).agg(
        F.array_sort(F.collect_list(record), _in_processing_order).alias("recs")
    )
    with_entry = groups.join(live, on=[TASK, *settings.by], how="left")
    folded = with_entry.select(TASK, "recs", _fold(settings.interval_us).alias("fold"))
    per_record = F.transform(
        "recs",
        lambda r, i: F.struct(
            r["row"].alias("row"),
            F.col("fold")["out"][i]["d"].alias("d"),
            F.col("fold")["out"][i]["c"].alias("c"),
            (i == F.col("fold")["saved"]).alias("s"),
        ),
    )
    exploded = folded.select(TASK, F.explode(per_record).alias("x"))
    decided = exploded.select(
        *[F.col("x.row")[c].alias(c) for c in columns],
        TASK,
        F.col("x.d").alias(DECISION_COL),
        F.col("x.c").alias(CAUSE_COL),
        F.col("x.s").alias(SAVED_COL),
    )
    unkeyed = prepared.where(null_id(settings.by)).select(
        *columns,
        TASK,
        F.lit(NULL_ID).alias(DECISION_COL),
        F.lit(None).cast(_CAUSE_TYPE).alias(CAUSE_COL),
        F.lit(False).alias(SAVED_COL),
    )
    return decided.unionByName(unkeyed)


def _in_processing_order(left: Column, right: Column) -> Column:
    a, b = left["order"], right["order"]
    return F.when(a < b, F.lit(-1)).when(a > b, F.lit(1)).otherwise(F.lit(0))


def _fold(interval_us: int) -> Column:
    """KIP-655 over one id's records in processing order, starting from its live entry (if any)."""
    start = F.struct(
        F.col(_E_T).cast("bigint").alias("e_t"),
        F.col(_E_P).cast("int").alias("e_p"),
        F.col(_E_O).cast("bigint").alias("e_o"),
        F.lit(-1).alias("saved"),
        F.array().cast(_OUT_TYPE).alias("out"),
    )
    return F.aggregate("recs", start, lambda acc, r: _step(acc, r, F.lit(interval_us)))


def _step(acc: Column, r: Column, interval: Column) -> Column:
    live = F.coalesce(acc["e_t"] >= r["st"] - interval, F.lit(False))
    same_record = F.coalesce((acc["e_p"] == r["p"]) & (acc["e_o"] == r["o"]), F.lit(False))
    replayed = live & same_record
    duplicate = live & (F.abs(r["t"] - acc["e_t"]) <= interval)
    late = r["t"] < r["st"] - interval
    decision = (
        F.when(replayed, F.lit(REPLAYED))
        .when(duplicate, F.lit(DUPLICATE))
        .when(late, F.lit(LATE))
        .otherwise(F.lit(FORWARDED))
    )
    saved = decision == F.lit(FORWARDED)
    cause = F.when(
        decision == F.lit(DUPLICATE),
        F.struct(acc["e_t"].alias("t"), acc["e_p"].alias("p"), acc["e_o"].alias("o")),
    )
    return F.struct(
        F.when(saved, r["t"]).otherwise(acc["e_t"]).alias("e_t"),
        F.when(saved, r["p"]).otherwise(acc["e_p"]).alias("e_p"),
        F.when(saved, r["o"]).otherwise(acc["e_o"]).alias("e_o"),
        F.when(saved, F.size(acc["out"])).otherwise(acc["saved"]).alias("saved"),
        F.concat(acc["out"], F.array(F.struct(decision.alias("d"), cause.alias("c")))).alias("out"),
    )
