"""``asof_join``: each stream record joined with the table version valid at the record's time.

Semantics (the contract; bounds matter):

- A stream record with key K and time t matches the version of K whose ``[valid_from, valid_to)``
  contains t (inclusive at ``valid_from``, exclusive at ``valid_to``; ``valid_to`` NULL is open). That is
  exactly what ``VersionedStore.get(K, as_of=t)`` returns.
- Tombstoned at t, or no version of K at or before t, or a NULL key or time: no match (NULL table columns
  for ``how="left"``, no row for ``how="inner"``).
- Expired lookups (a ``VersionedStore`` only): at ``t < stream_time - history_retention`` only the latest
  version may answer, when it is not a tombstone and ``valid_from <= t``; otherwise no match, never an
  older version that happens to be stored still. Such lookups are counted (:class:`AsOfJoinStats`) and
  logged as a warning.
- A batch is not a stream: the join sees every table version committed when it runs, whatever the order
  in which stream and table records arrived. Kafka Streams looks up at each stream record's arrival, so
  a table update arriving after the stream record is missed there and seen here (and a later re-run can
  give another answer if the table changed; pin the store's Delta version for reproducible re-runs).
- Output: every stream column, then the table's value columns and the matched version's ``valid_from``,
  named ``prefix + name + suffix``. A name that clashes with a stream column raises
  :class:`ColumnClashError`. The key columns are the stream's (not repeated).

Execution: one small aggregate over the stream batch (record count, expired count, min and max time, and
the records per coarse hash group of keys), then one equi-join on the key (plus a time bucket when some
keys are hot) with the range condition as a join filter: never a cross join, never a collect. One more
small query runs only when a coarse group is hot: the exact hot keys (their 64-bit key hash) among the
records of the hot groups. The expiry rule is a join filter only when some record of the batch is expired.
The table side is pruned with literal bounds from the batch: validTo segments below the batch's start (or
below the retention horizon) are not read (Delta partition pruning), and versions starting after the
batch's end are skipped by file statistics. A batch of up to ``_KEYED_MAX_RECORDS`` records also has its
distinct keys broadcast and only their versions read: a store picks those keys' rows before resolving its
pending versions (:meth:`VersionedStore.versions` ``of_keys``), so neither that resolution nor the join
shuffles the rows of every live key. An ordinary key is joined in one piece (each version read
once, no duplication). A hot key (at least ``hot_events`` records in the batch) is split into time
buckets of about ``hot_events / 64`` records, each version repeated once per bucket its validity covers,
so its events and versions spread over many join tasks and each event is compared with the few versions
of its bucket instead of all the key's versions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.asof._source import SEGMENT, TOMBSTONE, VALID_FROM, VALID_TO, VersionSource, source_of
from lakehouse.errors import InvalidInputError, LakehouseInternalError, SchemaMismatchError
from lakehouse.times import from_micros, micros, require_representable, timestamp_lit
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.segments import segment_of

log = logging.getLogger(__name__)

DEFAULT_HOT_EVENTS = 10_000
_HOT_SPLIT = 64  # a hot key's time buckets hold about hot_events / _HOT_SPLIT events each
_HASH_GROUPS = 1 << 12  # records are counted per coarse hash group: a bounded aggregate, whatever the keys
_HOT_FACTOR = 8  # a hot group (and a hot key) also has >= _HOT_FACTOR x the mean records per group
_MAX_HOT_KEYS = 64
#: Up to this many records, a batch's keys are broadcast and only their versions read (see the module doc).
_KEYED_MAX_RECORDS = 250_000
_HOW = ("left", "inner")
_GROUP = "__asof_group"
_STREAM_BUCKET = "__asof_stream_bucket"
_TABLE_BUCKET = "__asof_table_bucket"
_TO = "__asof_valid_to"
_KEY = "__asof_key_{}"


class ColumnClashError(InvalidInputError):
    """A column the join adds has the name of a stream column; give ``prefix=`` or ``suffix=``."""

    def __init__(self, clashes: list[str]) -> None:
        self.clashes = clashes
        super().__init__(
            f"as-of join output columns {clashes} clash with stream columns; "
            "pass prefix= or suffix= to rename the table's columns"
        )


@dataclass(frozen=True)
class AsOfJoinStats:
    """What the join's one aggregate found, and the plan it chose.

    Attributes:
        records: Stream records in the batch.
        expired_lookups: Records with ``t < stream_time - history_retention`` (answered by the latest
            version only, or not at all).
        min_time / max_time: The batch's time range (None for an empty batch or all-NULL times).
        bucket: Width of the time buckets of an ordinary key (the batch's whole time range, unless
            ``bucket=`` was given).
        first_segment: The oldest validTo segment read (None: no segment pruning applied).
        hot_keys: Keys (by 64-bit key hash) split into finer time buckets.
    """

    records: int
    expired_lookups: int
    min_time: datetime | None
    max_time: datetime | None
    bucket: timedelta
    first_segment: int | None
    hot_keys: int = 0


@dataclass(frozen=True)
class AsOfJoinResult:
    """The joined frame (lazy) and the stats of the batch it was planned for."""

    frame: DataFrame
    stats: AsOfJoinStats


def asof_join(
    stream_df: DataFrame,
    store: VersionedStore | DataFrame,
    on: str | Sequence[str] | None = None,
    timestamp: str = "timestamp",
    how: str = "left",
    prefix: str = "",
    suffix: str = "",
    bucket: timedelta | None = None,
    hot_events: int = DEFAULT_HOT_EVENTS,
) -> DataFrame:
    """Join each stream record with the table version valid at its ``timestamp`` (see the module doc).

    Args:
        stream_df: The stream batch: the key columns and a TIMESTAMP ``timestamp`` column.
        store: A :class:`VersionedStore`, or a DataFrame with the key columns, TIMESTAMP ``valid_from``
            and ``valid_to`` (NULL: open), an optional boolean ``tombstone`` and value columns.
        on: Key column(s), named alike on both sides; default: the store's key columns.
        how: ``"left"`` (keep unmatched stream records) or ``"inner"``.
        prefix: Added before the names of the table's value columns and ``valid_from``.
        suffix: Added after the names of the table's value columns and ``valid_from``.
        bucket: Width of the join's time buckets for every key (no hot-key detection); default: one
            bucket for an ordinary key, finer buckets for hot keys.
        hot_events: Records in the batch from which a key is hot and split into buckets.

    Returns:
        A lazy DataFrame: the stream's columns, then the value columns and ``<prefix>valid_from<suffix>``.

    Raises:
        ColumnClashError: an added column would shadow a stream column.
        SchemaMismatchError: a missing key or timestamp column, or a timestamp that is not TIMESTAMP.
        InvalidInputError: a bad ``how``, ``on``, ``bucket`` or ``hot_events``.

    Examples:
        >>> priced = asof_join(transactions, rates_store, timestamp="event_time")  # doctest: +SKIP
    """
    return asof_join_with_stats(
        stream_df, store, on, timestamp, how, prefix, suffix, bucket, hot_events
    ).frame


def asof_join_with_stats(
    stream_df: DataFrame,
    store: VersionedStore | DataFrame,
    on: str | Sequence[str] | None = None,
    timestamp: str = "timestamp",
    how: str = "left",
    prefix: str = "",
    suffix: str = "",
    bucket: timedelta | None = None,
    hot_events: int = DEFAULT_HOT_EVENTS,
) -> AsOfJoinResult:
    """:func:`asof_join`, also returning the batch's :class:`AsOfJoinStats` (expired lookups, plan).

    A :class:`VersionedStore` is read at one Delta version (its current one): the rows and the stream time
    that decides expiry come from the same snapshot, and commits made after this call are not seen.
    """
    options = JoinOptions(timestamp, how, prefix, suffix, bucket, hot_events)
    return join_source(stream_df, source_of(store, on), options)


@dataclass(frozen=True)
class JoinOptions:
    """The arguments of :func:`asof_join` past the two sides and the key; checked when built."""

    timestamp: str = "timestamp"
    how: str = "left"
    prefix: str = ""
    suffix: str = ""
    bucket: timedelta | None = None
    hot_events: int = DEFAULT_HOT_EVENTS

    def __post_init__(self) -> None:
        if self.how not in _HOW:
            raise InvalidInputError(f"how must be one of {list(_HOW)}, got {self.how!r}")
        if self.hot_events < 1:
            raise InvalidInputError(f"hot_events must be >= 1, got {self.hot_events}")
        if self.bucket is not None and self.bucket < timedelta(microseconds=1):
            raise InvalidInputError(f"bucket must be >= 1 microsecond, got {self.bucket}")


def join_source(stream_df: DataFrame, source: VersionSource, options: JoinOptions) -> AsOfJoinResult:
    """:func:`asof_join_with_stats` over an already normalized (and, for a store, pinned) table side."""
    timestamp, how = options.timestamp, options.how
    _check_stream(stream_df, source, timestamp)
    renamed = {v: f"{options.prefix}{v}{options.suffix}" for v in (*source.values, VALID_FROM)}
    _check_clashes(stream_df, list(renamed.values()))
    key_types = {f.name: f.dataType for f in stream_df.schema.fields if f.name in source.keys}
    batch = _batch_stats(stream_df, timestamp, source, options.bucket, options.hot_events)
    stats = batch.stats
    if stats.expired_lookups:
        log.warning(
            "as-of join: %d stream record(s) older than the store's stream time minus history retention "
            "(horizon %s): answered by the latest version only, or not matched",
            stats.expired_lookups,
            from_micros(source.horizon_us or 0),
        )
    if 0 < stats.records <= _KEYED_MAX_RECORDS:
        source = replace(source, frame=source.versions_of(_batch_keys(stream_df, source)))
    versions = _bucketed_versions(_pruned_versions(source, batch), source, renamed, batch, key_types)
    frame = _join(stream_df, versions, source, timestamp, how, renamed, batch)
    return AsOfJoinResult(frame, stats)


# ---------------------------------------------------------------------- phases
def _check_stream(stream_df: DataFrame, source: VersionSource, timestamp: str) -> None:
    """The stream side has the key columns, typed as the table side's, and a TIMESTAMP ``timestamp``."""
    types = {f.name: f.dataType for f in stream_df.schema.fields}
    key_types = {f.name: f.dataType for f in source.frame.schema.fields if f.name in source.keys}
    missing = [c for c in (*source.keys, timestamp) if c not in types]
    wrong = {
        key: f"expected {key_types[key].simpleString()} (the table side's), got {types[key].simpleString()}"
        for key in source.keys
        if key in types and key in key_types and types[key] != key_types[key]
    }
    if timestamp in types and types[timestamp] != T.TimestampType():
        wrong[timestamp] = f"expected timestamp, got {types[timestamp].simpleString()}"
    if missing or wrong:
        raise SchemaMismatchError("as-of join stream side", missing, wrong)


def _check_clashes(stream_df: DataFrame, added: list[str]) -> None:
    stream_columns = {c.lower() for c in stream_df.columns}
    clashes = sorted(c for c in added if c.lower() in stream_columns)
    duplicated = sorted({c for c in added if added.count(c) > 1})
    if clashes or duplicated:
        raise ColumnClashError(clashes + duplicated)


@dataclass(frozen=True)
class _Batch:
    """The stream batch's bounds in microseconds (None: no timed record) and the plan's numbers.

    ``widths`` maps a hot key's hash (:func:`_key_hash`) to its bucket width; ``bucket_us`` is every
    other key's width.
    ``bucketed`` is False when the join needs no bucket at all (every key joined in one piece).
    """

    stats: AsOfJoinStats
    min_us: int | None
    max_us: int | None
    lower_us: int | None  # the oldest time a non-latest version must still cover: max(min, horizon)
    bucket_us: int
    widths: dict[int, int]

    @property
    def bucketed(self) -> bool:
        return bool(self.widths) or self.bucket_us <= (self.max_us or 0) - (self.min_us or 0)


def _key_hash(columns: list[Column]) -> Column:
    """The 64-bit hash of a key: a hot key's bucket width is looked up by it."""
    return F.xxhash64(*columns)


def _coarse_group(key_hash: Column) -> Column:
    """The coarse hash group of a key (one of ``_HASH_GROUPS``): records are counted per group."""
    return key_hash.bitwiseAND(F.lit(_HASH_GROUPS - 1))


def _batch_stats(
    stream_df: DataFrame,
    timestamp: str,
    source: VersionSource,
    bucket: timedelta | None,
    hot_events: int,
) -> _Batch:
    """The batch's one aggregate (per coarse hash group, then in total: a bounded result), the exact hot
    keys when a group is hot, and the bucket widths and first segment they imply."""
    t_us = F.unix_micros(F.col(timestamp))
    key_hash = _key_hash([F.col(k) for k in source.keys])
    expired = F.lit(False) if source.horizon_us is None else t_us < F.lit(source.horizon_us)
    per_group = stream_df.groupBy(_coarse_group(key_hash).alias(_GROUP)).agg(
        F.count(F.lit(1)).alias("records"),
        F.count(F.when(expired, 1)).alias("expired"),
        F.min(t_us).alias("min_us"),
        F.max(t_us).alias("max_us"),
    )
    row = per_group.agg(
        F.sum("records").alias("records"),
        F.sum("expired").alias("expired"),
        F.min("min_us").alias("min_us"),
        F.max("max_us").alias("max_us"),
        F.collect_list(F.when(F.col("records") >= hot_events, F.struct(_GROUP, "records"))).alias("hot"),
    ).first()
    if row is None:
        raise LakehouseInternalError("an aggregate returned no row")
    records = int(row["records"] or 0)
    min_us, max_us = row["min_us"], row["max_us"]
    for us in (min_us, max_us):
        require_representable(us, f"a stream record's {timestamp}")
    span_us = 1 if min_us is None else max_us - min_us + 1
    widths: dict[int, int] = {}
    if bucket is not None:
        bucket_us = micros(bucket)
    else:
        bucket_us = span_us
        widths = _hot_widths(stream_df, key_hash, row["hot"], records, span_us, hot_events)
    lower_us = None
    if min_us is not None:
        lower_us = min_us if source.horizon_us is None else max(min_us, source.horizon_us)
    first_segment = None
    if lower_us is not None and source.interval_us is not None:
        first_segment = segment_of(lower_us, source.interval_us)
    stats = AsOfJoinStats(
        records=records,
        expired_lookups=int(row["expired"] or 0),
        min_time=None if min_us is None else from_micros(min_us),
        max_time=None if max_us is None else from_micros(max_us),
        bucket=timedelta(microseconds=bucket_us),
        first_segment=first_segment,
        hot_keys=len(widths),
    )
    return _Batch(stats, min_us, max_us, lower_us, bucket_us, widths)


def _hot_widths(
    stream_df: DataFrame, key_hash: Column, groups: list[Any], records: int, span_us: int, hot_events: int
) -> dict[int, int]:
    """Bucket width of each hot key: about ``hot_events / _HOT_SPLIT`` of its records per bucket.

    A coarse group, and then a key, is hot with at least ``hot_events`` records and ``_HOT_FACTOR`` x the
    mean records per coarse group (so a big uniform batch splits nothing). Only when some group is hot
    are its records counted per key hash (one more small aggregate, over the hot groups' records); the
    ``_MAX_HOT_KEYS`` hottest keys are split.
    """
    floor_records = max(hot_events, _HOT_FACTOR * records / _HASH_GROUPS)
    hot_groups = sorted(
        int(g[_GROUP]) for g in groups or [] if g is not None and g["records"] >= floor_records
    )
    if not hot_groups:
        return {}
    in_hot_group = _coarse_group(key_hash).isin(*hot_groups)
    counted = stream_df.where(in_hot_group).groupBy(key_hash.alias(_GROUP)).agg(F.count(F.lit(1)).alias("n"))
    hot = counted.where(F.col("n") >= F.lit(floor_records)).orderBy(F.desc("n"), _GROUP)
    per_bucket = max(1, hot_events // _HOT_SPLIT)
    return {
        int(r[_GROUP]): max(1, math.ceil(span_us / math.ceil(int(r["n"]) / per_bucket)))
        for r in hot.limit(_MAX_HOT_KEYS).collect()
    }


def _batch_keys(stream_df: DataFrame, source: VersionSource) -> DataFrame:
    """The distinct non-null keys of the batch: only their versions can match."""
    return stream_df.select(*source.keys).dropna().distinct()


def _pruned_versions(source: VersionSource, batch: _Batch) -> DataFrame:
    """The versions that can answer a lookup of this batch, with literal bounds only (so they prune).

    A non-latest version must end after ``lower`` (``valid_to > max(batch start, horizon)``): on a
    versioned store that is a filter on the segment partition column, which Delta prunes by partition
    values. Every version must start by the batch's end (``valid_from <= max``): file statistics skip the
    rest. Tombstones never match, so they are dropped here.
    """
    frame = source.frame
    if batch.min_us is None or batch.max_us is None or batch.lower_us is None:
        return frame.where(F.lit(False))
    if batch.stats.first_segment is not None:
        segment = F.col(SEGMENT)
        frame = frame.where(segment.isNull() | (segment >= F.lit(batch.stats.first_segment)))
    live = F.col(VALID_TO).isNull() | (F.col(VALID_TO) > timestamp_lit(batch.lower_us))
    started = F.col(VALID_FROM) <= timestamp_lit(batch.max_us)
    frame = frame.where(live & started)
    if source.has_tombstones:
        frame = frame.where(~F.coalesce(F.col(TOMBSTONE), F.lit(False)))
    return frame


def _bucketed_versions(
    versions: DataFrame,
    source: VersionSource,
    renamed: dict[str, str],
    batch: _Batch,
    key_types: dict[str, T.DataType],
) -> DataFrame:
    """The join's table side: each version once per time bucket its validity covers within the batch's
    time range (once in all when the join is not bucketed)."""
    columns = [
        *[F.col(k).alias(_KEY.format(i)) for i, k in enumerate(source.keys)],
        F.col(VALID_TO).alias(_TO),
        *[F.col(v).alias(renamed[v]) for v in source.values],
        F.col(VALID_FROM).alias(renamed[VALID_FROM]),
    ]
    if not batch.bucketed:
        return versions.select(*columns)
    # Hash the key as the stream types it, so that both sides of a key get the same hash.
    group = _key_hash([F.col(k).cast(key_types[k]) for k in source.keys])
    from_us = F.unix_micros(F.col(VALID_FROM))
    # valid_to is exclusive: the last instant a version covers is valid_to - 1 microsecond.
    last_us = F.coalesce(F.unix_micros(F.col(VALID_TO)) - 1, F.lit(batch.max_us))
    first = _bucket_of(F.greatest(from_us, F.lit(batch.min_us)), group, batch)
    last = _bucket_of(F.least(last_us, F.lit(batch.max_us)), group, batch)
    return versions.select(*columns, F.explode(F.sequence(first, last)).alias(_TABLE_BUCKET))


def _bucket_of(t_us: Column, group: Column, batch: _Batch) -> Column:
    """The bucket of time ``t_us`` for a key of hash ``group`` (buckets count from the batch start)."""
    width = F.lit(batch.bucket_us)
    if batch.widths:
        hot = F.create_map(*[F.lit(x) for item in sorted(batch.widths.items()) for x in item])
        width = F.coalesce(F.element_at(hot, group), width)
    return F.floor((t_us - F.lit(batch.min_us)) / width).cast("long")


def _join(
    stream_df: DataFrame,
    versions: DataFrame,
    source: VersionSource,
    timestamp: str,
    how: str,
    renamed: dict[str, str],
    batch: _Batch,
) -> DataFrame:
    """Equi-join on the key (and bucket) with the half-open range and the expiry rule as the join filter."""
    # Every table column is renamed apart from the stream's, so the stream's own columns need no alias.
    stream = stream_df
    if batch.bucketed:
        group = _key_hash([F.col(k) for k in source.keys])
        stream = stream_df.select(
            "*", _bucket_of(F.unix_micros(F.col(timestamp)), group, batch).alias(_STREAM_BUCKET)
        )
    t, valid_to = stream[timestamp], F.col(_TO)
    same_key = [stream[k] == F.col(_KEY.format(i)) for i, k in enumerate(source.keys)]
    if batch.bucketed:
        same_key.append(F.col(_STREAM_BUCKET) == F.col(_TABLE_BUCKET))
    inside = t < valid_to
    if batch.stats.expired_lookups and source.horizon_us is not None:
        # An expired lookup (t < horizon) may only be answered by the latest version (valid_to NULL).
        # Left out when no record of the batch is expired (then t >= horizon holds for every record).
        inside = inside & (t >= timestamp_lit(source.horizon_us))
    in_range = (F.col(renamed[VALID_FROM]) <= t) & (valid_to.isNull() | inside)
    joined = stream.join(versions, on=_all([*same_key, in_range]), how=how)
    return joined.select(
        *[stream[c] for c in stream_df.columns],
        *[F.col(renamed[v]) for v in (*source.values, VALID_FROM)],
    )


def _all(conditions: list[Column]) -> Column:
    combined = conditions[0]
    for condition in conditions[1:]:
        combined = combined & condition
    return combined
