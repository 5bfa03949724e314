"""Per-id sequential resolution of a batch, as DataFrame transforms (no Python on the per-row path).

The outline (each step a function below):

1. :func:`prepare`: task of each record, its event time and the task's stream time *at* the record in
   microseconds. In processing order the running maximum of the timestamps over a task is the record's
   partition time (the struct :data:`~lakehouse.ordering.ORDER_COL` is sorted on it first), so stream time
   at a record is ``greatest(stream time before the batch, partition time)``, for one global task too.
2. :func:`live_entries`: the index entries not expired at the start of the batch, pruned to the live
   buckets by literal bounds, and to the batch's range of ids (:func:`id_bounds`) by literal bounds too:
   an entry outside it matches no record, and Delta skips the index files whose id statistics lie outside
   it (ids that grow with time touch the newest files only; random ids read every live file). At most one
   row per (task, id) is live: a forwarded record is saved only when the previous entry of its id has
   already expired (see ``deduplicator.py``).
3. :func:`annotate`: each record with its id's live entry (left join) and the number of records of its
   (task, id) in the batch (a window over the join's own partitioning and sort order: the records are
   shuffled by id once; records with a null id are spread, see there). The caller persists the result:
   :func:`decide` reads it twice.
4. :func:`decide`: the KIP-655 decision of every record, the entry that caused a drop, and whether it is
   its id's new index entry. A record alone of its id in the batch (nearly all of them) is decided by plain
   column expressions over (record, live entry): one step of the sequential fold, code-generated. The
   records of an id with several records are grouped, sorted in processing order and folded with
   ``aggregate`` (a higher-order function, evaluated interpreted in the JVM, distributed over ids), then
   exploded back to one row per record. Both paths share :func:`_decision`, so they decide alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

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
_JOIN_TASK = "_lh_join_task"
_SPREAD_WAYS = 1024
_N = "_lh_n"
_CAUSE_TYPE = "struct<t:bigint,p:int,o:bigint>"
#: Id column types whose bounds round-trip exactly through a Python literal (so they can prune files).
_BOUNDED_TYPES = (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DateType)
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


def id_bounds(df: DataFrame, by: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """The smallest and largest non-null value of each id column of ``df`` whose type bounds exactly
    (strings, integers, dates; others are left out): one small aggregate over the batch. ``(None, None)``
    for a column that is NULL in every record (then no record has an id)."""
    bounded = [c for c in by if isinstance(df.schema[c].dataType, _BOUNDED_TYPES)]
    if not bounded:
        return {}
    row = df.agg(*[F.struct(F.min(c), F.max(c)).alias(c) for c in bounded]).first()
    return {} if row is None else {c: (row[c][0], row[c][1]) for c in bounded}


def live_entries(
    index: DataFrame,
    settings: DedupSettings,
    stream_times: Mapping[int, int],
    bounds: Mapping[str, tuple[Any, Any]],
) -> DataFrame:
    """Entries not expired at the start of the batch (``entry_ts >= stream_time(task) - interval``) whose
    id lies within the batch's ``bounds`` (:func:`id_bounds`; both ends inclusive): the others match no
    record of the batch.

    The bucket and id bounds are literals (partition pruning, and file skipping on the index's id
    statistics); a task never seen has no entry.
    """
    if not stream_times or any(low is None for low, _ in bounds.values()):
        return index.where(F.lit(False)).select(*_entry_columns(settings))
    first_live = (min(stream_times.values()) - settings.interval_us) // settings.bucket_us
    bound = stream_time_before(F.col(TASK_COL), stream_times) - F.lit(settings.interval_us)
    live = index.where(F.col(BUCKET_COL) >= F.lit(first_live)).where(F.unix_micros(ENTRY_TS_COL) >= bound)
    for column, (low, high) in bounds.items():
        typed = index.schema[column].dataType  # literals of the column's type: the column stays unwrapped
        live = live.where(F.col(column).between(F.lit(low).cast(typed), F.lit(high).cast(typed)))
    return live.select(*_entry_columns(settings))


def _entry_columns(settings: DedupSettings) -> list[Column]:
    return [
        F.col(TASK_COL).alias(TASK),
        *[F.col(c) for c in settings.by],
        F.unix_micros(ENTRY_TS_COL).alias(_E_T),
        F.col(ENTRY_PARTITION_COL).alias(_E_P),
        F.col(ENTRY_OFFSET_COL).alias(_E_O),
    ]


def annotate(prepared: DataFrame, live: DataFrame, settings: DedupSettings) -> DataFrame:
    """Every record of ``prepared`` with its id's live entry (NULLs if none) and its id's record count.

    The join and the count share one key, (join task, id): the records are shuffled (and sorted) by it
    once, and the count is a window over that same partitioning and order (no second shuffle or sort).
    The join task is the task of a keyed record and of an entry. A record with a null id matches no
    entry, so its join task is a negative hash of its position instead: such records spread over the
    shuffle rather than all going to the one reducer of the null key. (Both sides' join tasks are
    computed columns, never a literal, so the optimizer keeps them in the join key.)
    """
    keys = [_JOIN_TASK, *settings.by]
    spread = -1 - F.abs(F.hash(PARTITION_COL, OFFSET_COL) % F.lit(_SPREAD_WAYS))
    records = prepared.withColumn(_JOIN_TASK, F.when(null_id(settings.by), spread).otherwise(F.col(TASK)))
    entries = live.withColumnRenamed(TASK, _JOIN_TASK)
    per_id = Window.partitionBy(*keys).rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    return records.join(entries, on=keys, how="left").withColumn(_N, F.count(F.lit(1)).over(per_id))


@dataclass(frozen=True)
class Decide:
    """The column expressions of :func:`decide` for one index's settings and one input's columns.

    Unresolved expressions, independent of any batch: built once (:func:`decide_columns`, a few hundred
    Py4J calls) and applied to every batch of that shape (each use is resolved against its own plan).
    """

    columns: tuple[str, ...]
    group_by: tuple[str, ...]
    unkeyed: Column
    single: tuple[Column, ...]
    several: Column
    record: Column
    fold: Column
    per_record: Column
    out: tuple[Column, ...]


def decide_columns(settings: DedupSettings, columns: Sequence[str]) -> Decide:
    """The expressions :func:`decide` applies to the batches of ``columns`` under ``settings``."""
    unkeyed = null_id(settings.by)
    interval = F.lit(settings.interval_us)
    decision = F.when(unkeyed, F.lit(NULL_ID)).otherwise(
        _decision(
            (F.col(_E_T), F.col(_E_P), F.col(_E_O)),
            (F.col(PARTITION_COL), F.col(OFFSET_COL), F.col(_T), F.col(_ST)),
            interval,
        )
    )
    single = (
        *[F.col(c) for c in columns],
        F.col(TASK),
        decision.alias(DECISION_COL),
        _cause(decision, F.col(_E_T), F.col(_E_P), F.col(_E_O)).alias(CAUSE_COL),
        (decision == F.lit(FORWARDED)).alias(SAVED_COL),
    )
    record = F.struct(
        F.col(ORDER_COL).alias("order"),
        F.col(PARTITION_COL).alias("p"),
        F.col(OFFSET_COL).alias("o"),
        F.col(_T).alias("t"),
        F.col(_ST).alias("st"),
        F.struct(*[F.col(c) for c in columns]).alias("row"),
    )
    per_record = F.transform(
        "recs",
        lambda r, i: F.struct(
            r["row"].alias("row"),
            F.col("fold")["out"][i]["d"].alias("d"),
            F.col("fold")["out"][i]["c"].alias("c"),
            (i == F.col("fold")["saved"]).alias("s"),
        ),
    )
    out = (
        *[F.col("x.row")[c].alias(c) for c in columns],
        F.col(TASK),
        F.col("x.d").alias(DECISION_COL),
        F.col("x.c").alias(CAUSE_COL),
        F.col("x.s").alias(SAVED_COL),
    )
    return Decide(
        columns=tuple(columns),
        group_by=(_JOIN_TASK, *settings.by, TASK, _E_T, _E_P, _E_O),
        unkeyed=unkeyed | (F.col(_N) == F.lit(1)),
        single=single,
        several=~unkeyed & (F.col(_N) > F.lit(1)),
        record=F.array_sort(F.collect_list(record), _in_processing_order).alias("recs"),
        fold=_fold(settings.interval_us).alias("fold"),
        per_record=F.explode(per_record).alias("x"),
        out=out,
    )


def decide(annotated: DataFrame, plan: Decide) -> DataFrame:
    """Every record of ``annotated`` with its decision, as if the batch had been processed one by one.

    Returns ``plan.columns`` plus :data:`TASK`, :data:`DECISION_COL`, :data:`CAUSE_COL` (the entry that
    caused a drop: t, p, o) and :data:`SAVED_COL` (true on the record that is its id's index entry after the
    batch). A record with a null id is :data:`NULL_ID`, never saved. A keyed record alone of its (task, id)
    in the batch is decided from its live entry directly (the fold's first step, see :func:`_decision`);
    the records of an id with several records go through the fold (:func:`_fold_several`).
    """
    single = annotated.where(plan.unkeyed).select(*plan.single)
    return single.unionByName(_fold_several(annotated.where(plan.several), plan))


def _fold_several(several: DataFrame, plan: Decide) -> DataFrame:
    """The records of ids with several records in the batch, decided by the sequential fold per id.

    Grouped by the annotation's shuffle key plus the task and the (per-id) entry columns, so the grouping
    can reuse the records' partitioning.
    """
    groups = several.groupBy(*plan.group_by).agg(plan.record)
    folded = groups.select(TASK, "recs", plan.fold)
    return folded.select(TASK, plan.per_record).select(*plan.out)


def _in_processing_order(left: Column, right: Column) -> Column:
    a, b = left["order"], right["order"]
    return F.when(a < b, F.lit(-1)).when(a > b, F.lit(1)).otherwise(F.lit(0))


def _decision(
    entry: tuple[Column, Column, Column], record: tuple[Column, Column, Column, Column], interval: Column
) -> Column:
    """KIP-655 for one keyed record given its id's current entry: REPLAYED, DUPLICATE, LATE or FORWARDED.

    ``entry`` is (t, partition, offset) of the id's entry (NULLs if none); ``record`` is (partition,
    offset, t, stream time at the record); times in microseconds. The entry counts only while live
    (``entry.t >= stream_time - interval``); a replay needs the same partition and a non-null equal offset;
    a duplicate is within ``interval`` of the entry, both ends inclusive; a late record has
    ``t < stream_time - interval``. FORWARDED (only) means the record becomes the id's entry.
    """
    e_t, e_p, e_o = entry
    p, o, t, st = record
    live = F.coalesce(e_t >= st - interval, F.lit(False))
    same_record = F.coalesce((e_p == p) & (e_o == o), F.lit(False))
    return (
        F.when(live & same_record, F.lit(REPLAYED))
        .when(live & (F.abs(t - e_t) <= interval), F.lit(DUPLICATE))
        .when(t < st - interval, F.lit(LATE))
        .otherwise(F.lit(FORWARDED))
    )


def _cause(decision: Column, e_t: Column, e_p: Column, e_o: Column) -> Column:
    """The entry that made a record a duplicate (t, p, o), NULL for any other decision."""
    entry = F.struct(e_t.cast("bigint").alias("t"), e_p.cast("int").alias("p"), e_o.cast("bigint").alias("o"))
    return F.when(decision == F.lit(DUPLICATE), entry)


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
    decision = _decision((acc["e_t"], acc["e_p"], acc["e_o"]), (r["p"], r["o"], r["t"], r["st"]), interval)
    saved = decision == F.lit(FORWARDED)
    return F.struct(
        F.when(saved, r["t"]).otherwise(acc["e_t"]).alias("e_t"),
        F.when(saved, r["p"]).otherwise(acc["e_p"]).alias("e_p"),
        F.when(saved, r["o"]).otherwise(acc["e_o"]).alias("e_o"),
        F.when(saved, F.size(acc["out"])).otherwise(acc["saved"]).alias("saved"),
        F.concat(
            acc["out"],
            F.array(
                F.struct(decision.alias("d"), _cause(decision, acc["e_t"], acc["e_p"], acc["e_o"]).alias("c"))
            ),
        ).alias("out"),
    )
