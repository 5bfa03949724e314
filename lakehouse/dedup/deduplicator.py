"""``Deduplicator``: KIP-655 deduplication with an interval, as a MERGE against a Delta seen-ID index.

Semantics (the contract; bounds matter). The id of a record is the value of the ``by`` columns:
``by="key"`` is deduplicateByKey, ``by=["key", "<id col>"]`` deduplicateByKeyValue, ``by="<id col>"``
deduplicate over all partitions.

- A record whose id (or any part of it) is NULL is forwarded and never stored.
- A **task** is one source partition when ``key`` is part of ``by`` (each partition has its own stream time
  and its own ids, as in Kafka Streams); otherwise all partitions form one task. **Stream time** is the
  largest timestamp the task has seen, the current record included.
- The index keeps, per (task, id), the last *saved* record: its timestamp, partition and offset. An entry
  with ``entry_ts < stream_time - interval`` is expired: ignored, and dropped by :meth:`purge`.
- A record whose live entry has its partition and (non-null) offset is the same record seen again
  (at-least-once replay of the source): forwarded, index unchanged. A record with a NULL offset never
  counts as a replay.
- Otherwise a record with a live entry and ``|t - entry_ts| <= interval`` (both ends inclusive) is a
  **duplicate**: dropped, index unchanged.
- Otherwise it is forwarded; it replaces the entry unless it is **late** (``t < stream_time - interval``):
  a late record is forwarded and not saved.
- Records are processed in Kafka Streams' task order (``lakehouse.ordering``); a batch gives exactly what
  processing its records one by one gives, several records of one id included.

Physical layout: partitioned by ``bucket = floor(entry_ts / bucket_width)``. A saved record always
arrives after its id's previous entry expired (``t > entry_ts + interval`` and ``t <= stream_time``), so
the index is insert-only: each batch is one append of its new entries (no entry it adds can exist
already, so nothing of the index is read), at most one row per (task, id) is live, and superseded rows
are always expired ones that :meth:`purge` drops by whole buckets (metadata only).

Exactly-once: ``apply(df, batch_id)`` makes one index commit recording the batch id and the tasks' stream
times (``userMetadata``, and the fence ``txnAppId``/``txnVersion``; a batch that saves nothing commits
too).
Re-applying a committed batch id recomputes the same forwarded records against the index as of the version
before that commit and writes nothing (a missing quarantine append excepted). ``run`` then appends them
to a sink with the same batch id as ``txnVersion``, so a crash anywhere followed by a re-run yields each
record exactly once in the sink. The batch id and the stream times survive Delta's checkpoints and log
cleanup (:mod:`lakehouse.commit_log`: every commit of the index, purge included, records the stream
times and each writer's last batch id). The quarantine and the sink record the batch under this
index's own app id (and the writer's name), so deduplicators sharing them never skip each other's
batches. Several jobs may write one index at the same time, each under its own ``writer`` name: a batch
that finds the index moved since it read it, however shortly before its commit, fails with
``ConcurrentWriteError``, writing nothing, and is run again. Readers may query it concurrently.

Exactly-once in the sink also when the *source* re-delivers: a record delivered again under a new batch
id (or twice in one batch) is still forwarded by ``apply`` (KIP-655's offset-aware replay), but ``run``
appends a record with a non-null offset only if the sink (and the batch) do not hold the same record
already: its ``(partition, offset)`` (``(topic, partition, offset)`` when the records have a ``topic``
column) *and* the same value in every other column. A record at a held offset with other content is new
(offsets reset: a topic re-created, a landing folder re-used) and is appended: no record is dropped for
its offset alone. A reset acknowledged by a new ``incarnation`` makes even an identical record at a held
offset new (:mod:`lakehouse.dedup.incarnation`). A deduplicator whose records have no ``topic`` column
is refused at its first batch into a sink another index or writer appends to (two sources' offsets
would collide), also when both start at once: its first sink commit is fenced and checks again
(:func:`lakehouse.commit_log.prepare_append`). Only records
that can be re-deliveries are checked: a record decided plain "forwarded" (not replayed, late or with a
null id) has never been forwarded before, since a forwarded record's own entry either still stands (a
re-delivery is then "replayed") or was superseded or expired, which makes a re-delivery late. The check
reads the sink through literal per-partition offset ranges of the checked records (file skipping on the
offset statistics), and costs nothing when the batch has no such record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.catalog import hadoop_fs, hadoop_path, lakehouse_properties, list_files, path_exists
from lakehouse.commit_log import (
    CONFLICTS,
    INPUT_FINGERPRINT,
    Commit,
    CommitLog,
    hashable_columns,
    input_fingerprint,
    latest_snapshot,
    other_writers,
    prepare_concurrently,
    require_writer_name,
    snapshot_schema,
)
from lakehouse.damage import names_missing_files
from lakehouse.dedup import _resolve
from lakehouse.dedup._resolve import CAUSE_COL, DECISION_COL, SAVED_COL, TASK, TIMESTAMP_COL
from lakehouse.dedup.incarnation import recorded_batch_id, require_incarnation, rows_since, start_version
from lakehouse.dedup.records import DedupStats, PurgeResult
from lakehouse.dedup.settings import (
    BATCH_COL,
    BUCKET_COL,
    ENTRY_OFFSET_COL,
    ENTRY_PARTITION_COL,
    ENTRY_TS_COL,
    KIND,
    TASK_COL,
    DedupSettings,
    bucket_of,
    default_bucket_width,
    system_schema,
)
from lakehouse.errors import InvalidInputError, LakehouseInternalError, SchemaMismatchError
from lakehouse.ordering import OFFSET_COL, PARTITION_COL
from lakehouse.paths import resolve_path
from lakehouse.schemas import load_schema, require_columns
from lakehouse.times import from_micros, require_representable

APP_ID = "lakehouse.dedup"
#: Commit metadata field of an index MERGE: the lowest bucket it writes (that of its oldest new entry),
#: so an index whose newest purge and later MERGEs are retained knows its lowest bucket without a scan.
LOWEST_BUCKET = "lowest_bucket"
QUARANTINE_KIND = "dedup_quarantine"
_STREAM_TIME = "stream_time_us"
#: Rows per write task of an append (:func:`_few_files`): a batch adds about one file per table partition
#: and million rows, so the tables need OPTIMIZE rarely (the pipeline's ``optimize_min_files``).
_ROWS_PER_FILE = 1_000_000
#: How long a sink folder that is not a Delta table must have been left unchanged to be refused: until then
#: it may be a sink another writer is creating (its data files land before its first commit, and that
#: commit can follow them by many seconds on a loaded machine).
_SINK_CREATION_QUIET_S = 30.0
#: A record's whole content as one comparable value (see :func:`_with_record_key`).
_RECORD_KEY = "_lh_record"
#: The conditions of an ALTER TABLE ADD COLUMNS that lost the race to add the same column: checked against
#: the snapshot it read (``FIELD_ALREADY_EXISTS``) or when Delta commits it over the winner's schema
#: (``DELTA_DUPLICATE_COLUMNS_FOUND.ADDING_COLUMNS``); sub-conditions aside.
_COLUMN_ADDED = ("FIELD_ALREADY_EXISTS", "DELTA_DUPLICATE_COLUMNS_FOUND")
_RECORD_COLUMNS = T.StructType(
    [
        T.StructField(PARTITION_COL, T.IntegerType()),
        T.StructField(OFFSET_COL, T.LongType()),
        T.StructField(TIMESTAMP_COL, T.TimestampType()),
    ]
)


@dataclass(frozen=True)
class _BatchColumns:
    """The column expressions a batch of one schema is decided (:func:`_resolve.decide_columns`) and
    summarized (:func:`_summary_columns`) with: unresolved, so built once per schema (each costs Py4J
    calls) and applied to every batch of it."""

    decide: _resolve.Decide
    summary: tuple[Column, ...]


class Deduplicator:
    """KIP-655 deduplication backed by a Delta seen-ID index. Build with :meth:`create` or :meth:`open`.

    Examples:
        >>> dedup = Deduplicator.create(spark, "/lake/txn_index", by="txn_id", interval=timedelta(minutes=10))
        >>> stats = dedup.run(batch_df, batch_id=7, sink="/lake/txn_clean")  # doctest: +SKIP
    """

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        settings: DedupSettings,
        writer: str | None = None,
        incarnation: int = 0,
    ) -> None:
        self.spark = spark
        self.path = path
        self.settings = settings
        self.writer = writer
        self.incarnation = require_incarnation(incarnation)
        self._log = CommitLog(spark, path, APP_ID, (_STREAM_TIME,), writer, fenced=True)
        self._stats: DedupStats | None = None
        self._cached: DataFrame | None = None
        self._id_schema: T.StructType | None = None
        self._with_ids: set[str] = set()
        #: The expressions deciding and summarizing a batch, per input schema (see :class:`_BatchColumns`).
        self._batch_columns: dict[str, _BatchColumns] = {}
        self._sink_app_id: str | None = None
        self._writable = False
        #: Called with a step name after each commit of ``run``; crash-injection tests raise from it.
        self._after_commit: Callable[[str], None] = lambda step: None

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        spark: SparkSession,
        path: str,
        by: str | Sequence[str],
        interval: timedelta,
        *,
        bucket_width: timedelta | None = None,
        quarantine_path: str | None = None,
        writer: str | None = None,
        incarnation: int = 0,
    ) -> Deduplicator:
        """Create the seen-ID index at ``path`` (or open it if it exists with the same settings).

        Args:
            by: The id column(s). Their types are taken from the first batch.
            interval: Records of one id within ``interval`` of its entry (inclusive) are duplicates (>= 0).
            bucket_width: Width of an index partition; default ``max(interval, 1 minute)``.
            quarantine_path: Optional Delta table keeping every dropped duplicate and the entry that
                caused the drop (partitioned by batch id).
            writer: The job writing batches through this handle (see :meth:`open`).
            incarnation: The incarnation of the source the batches come from (see :meth:`open`).

        Raises:
            InvalidInputError: negative interval, empty or reserved ``by``, bucket width under 1 ms, a bad
                writer name.
            StoreSettingsConflictError: an index exists at ``path`` with other settings.
        """
        if not isinstance(interval, timedelta):
            raise InvalidInputError(f"interval must be a timedelta, got {type(interval).__name__}")
        path = resolve_path(path)
        require_writer_name(writer)
        quarantine_path = None if quarantine_path is None else resolve_path(quarantine_path)
        settings = DedupSettings(
            by=(by,) if isinstance(by, str) else tuple(by),
            interval=interval,
            bucket_width=default_bucket_width(interval) if bucket_width is None else bucket_width,
            quarantine_path=quarantine_path,
        )
        if DeltaTable.isDeltaTable(spark, path):
            existing = cls.open(spark, path, writer=writer, incarnation=incarnation)
            settings.check_same(path, existing.settings)
            return existing
        # The quarantine first: an index exists only with its quarantine, so a crash between the two
        # commits leaves no index and the next create() makes both.
        if quarantine_path is not None:
            delta_ops.ensure_table(
                spark,
                quarantine_path,
                load_schema("dedup_quarantine"),
                partition_by=(BATCH_COL,),
                properties={"lakehouse.kind": QUARANTINE_KIND},
            )
        delta_ops.ensure_table(
            spark,
            path,
            system_schema(),
            partition_by=(BUCKET_COL,),
            properties=settings.properties(),
            created_with=delta_ops.CHANGE_FEED,
        )
        return cls(spark, path, settings, writer, incarnation)

    @classmethod
    def open(
        cls, spark: SparkSession, path: str, *, writer: str | None = None, incarnation: int = 0
    ) -> Deduplicator:
        """Open an existing index; its settings are read back from the table's properties.

        Args:
            writer: The job writing batches through this handle (e.g. its pipeline's name). Batch ids are
                counted per writer, in the index and in the sink and quarantine it appends to, so jobs that
                deduplicate into one index with their own batch ids never take each other's batches for
                replays; the tasks' stream times are the index's, whoever advanced them. Default: the
                unnamed writer (one job per index).
            incarnation: Which life of the source the batches come from (default 0). Bump it to
                acknowledge that the source's offsets started again (a topic deleted and re-created, a
                landing folder re-used): batch ids start again from 0, and a record at an offset the
                sink holds is a re-delivery only if the sink got it from this incarnation, so records
                identical to the old incarnation's are written as new
                (:mod:`lakehouse.dedup.incarnation`).

        Raises:
            NotALakehouseTableError: ``path`` holds no seen-ID index.
            InvalidInputError: ``writer`` is empty or contains ``/``, ``incarnation`` is not an integer
                in ``[0, MAX_INCARNATION]``.
        """
        path = resolve_path(path)
        settings = DedupSettings.from_properties(path, lakehouse_properties(spark, path, KIND))
        return cls(spark, path, settings, writer, incarnation)

    # ------------------------------------------------------------------ state
    @property
    def stats(self) -> DedupStats | None:
        """What the last ``apply``/``run`` of this object did (None before the first)."""
        return self._stats

    def register(self, name: str, temporary: bool = True) -> None:
        """Make the index queryable by SQL as ``name`` and the quarantine (if any) as ``<name>_quarantine``.

        See :func:`lakehouse.delta_ops.register_table` for temporary views versus catalog tables.
        """
        delta_ops.register_table(self.spark, name, self.path, temporary=temporary)
        if self.settings.quarantine_path is not None:
            delta_ops.register_table(
                self.spark, f"{name}_quarantine", self.settings.quarantine_path, temporary=temporary
            )

    def index(self) -> DataFrame:
        """The index table as it is now (expired, not yet purged rows included)."""
        return self.spark.read.format("delta").load(self.path)

    def stream_times(self) -> dict[int, datetime]:
        """Stream time of each task seen so far (task = partition, or 0 for one global task)."""
        stream_times = _stream_times(self._log.read().state)
        return {task: from_micros(us) for task, us in stream_times.items()}

    # ------------------------------------------------------------------ batches
    @names_missing_files
    def apply(self, df: DataFrame, batch_id: int | None = None) -> DataFrame:
        """Deduplicate one batch and commit the index; return the forwarded records (``df``'s columns).

        One Delta commit on the index, recording ``batch_id``. If ``batch_id`` was committed already, the
        same forwarded records are recomputed against the index as of the version before that commit and
        nothing is written. The batch's decided records are computed once and cached until the next call;
        the result is a projection of that cache.

        Raises:
            SchemaMismatchError: ``df`` lacks ``partition``/``offset``/``timestamp`` or a ``by`` column, or
                an id column's type differs from the index's.
            InvalidInputError: a NULL timestamp or partition (nothing written), or a batch id below the
                last committed one that was never committed.
        """
        resolved, _ = self._apply(df, recorded_batch_id(self.incarnation, batch_id))
        self._stats = replace(self._stats, batch_id=batch_id) if self._stats else None
        return _forwarded(resolved, df.columns)

    @names_missing_files
    def run(self, df: DataFrame, batch_id: int, sink: str) -> DedupStats:
        """``apply`` and append the forwarded records to the Delta table ``sink``, exactly once.

        Commits, in this order: the index (skipped on replay), the quarantine if any, the sink append
        (``txnAppId``/``txnVersion`` = this index's id and ``batch_id``: skipped if already written). Their
        files are written first, at the same time; nothing is committed if any write fails. A crash
        between any two commits is repaired by running the same batch again.

        Raises:
            SchemaMismatchError: the sink exists and lacks a column of ``df`` or has it with another type
                (checked before anything is committed).
        """
        # Looked up first: DESCRIBE DETAIL then builds the index snapshot that the batch reads anyway.
        recorded = recorded_batch_id(self.incarnation, batch_id)
        sink = resolve_path(sink)
        sink_snapshot = _require_sink_takes(self.spark, sink, df.schema)
        sink_exists = sink_snapshot is not None
        sink_log = CommitLog(self.spark, sink, self._sink_app_id_of_index(), writer=self.writer)
        sole = None if "topic" in df.columns else _shared_sink_refusal(sink)
        if sink_exists and sole is not None:
            _refuse_shared_sink(sink_log, sole, sink_snapshot)

        def sink_append(resolved: DataFrame, stats: DedupStats) -> Callable[[], Commit]:
            # After the batch's checks (bad input writes nothing): may create the sink (incarnation > 0).
            since = start_version(self.spark, sink, sink_log.txn_app_id, self.incarnation, df.schema)
            held = sink if sink_exists or since is not None else None
            rows = _forwarded(resolved, df.columns)
            if stats.replayed or stats.late or stats.null_ids:
                rows = _without_redeliveries(resolved, df.columns, held, since)
            return sink_log.planned_append(
                _few_files(rows, stats.forwarded), recorded, {}, sole=sole, index=self.path
            )

        try:
            _, stats = self._apply(df, recorded, sink_append)
        finally:
            self._release()  # nothing reads the decided batch after its appends (apply's caller may)
        version, rows = _sink_commit(sink_log, recorded)
        self._stats = replace(stats, batch_id=batch_id, sink_rows=rows, sink_version=version)
        return self._stats

    def purge(self) -> PurgeResult:
        """Drop every bucket whose entries are all expired, with a metadata-only partition delete.

        With one task per partition the bound follows the task with the smallest stream time.
        """
        self._check_writable()
        recorded = self._log.read()
        stream_times = _stream_times(recorded.state)
        if not stream_times:
            return PurgeResult(None, 0, 0, None)
        oldest = min(stream_times.values())
        bound = (oldest - self.settings.interval_us) // self.settings.bucket_us
        metrics = delta_ops.drop_partitions_below(self._log, BUCKET_COL, bound, recorded.state)
        return PurgeResult(
            bound,
            int(metrics.get("numRemovedFiles", 0)),
            int(metrics.get("numDeletedRows", 0)),
            from_micros(oldest),
        )

    # ------------------------------------------------------------------ internals
    def _apply(
        self,
        df: DataFrame,
        batch_id: int | None,
        sink_append: Callable[[DataFrame, DedupStats], Callable[[], Commit]] | None = None,
    ) -> tuple[DataFrame, DedupStats]:
        """Decide the batch and commit it: the index (a new batch id only), the quarantine (if any), then
        the sink (when ``sink_append`` plans its append from the decided rows and the stats)."""
        self._check_input(df)
        new, version, stream_times, committed = self._read_point(batch_id)
        prepared = _resolve.prepare(df, self.settings, stream_times)
        live = self._live_entries(version, stream_times, df)
        self._release()
        # The batch is ordered, joined with its entries, shuffled by id and decided once; every consumer
        # below (summary, index append, quarantine, the forwarded records) reads this cache, so the appends'
        # one-task writes only filter and write (deciding there would repeat the fold in each). Deserialized,
        # as a DataFrame's default cache level is: PySpark's MEMORY_AND_DISK is the serialized level (meant
        # for pickled RDDs), which Java-deserializes the cached column batches on each of those reads.
        # Deciding reads the annotated batch twice (ids with one record, and the fold of the others): it is
        # cached too until the summary has filled the decided cache, so the join and its sorts run once.
        annotated = _resolve.annotate(prepared, live, self.settings).persist(
            StorageLevel.MEMORY_AND_DISK_DESER
        )
        columns = self._batch_columns_of(df.schema)
        self._cached = _resolve.decide(annotated, columns.decide).persist(StorageLevel.MEMORY_AND_DISK_DESER)
        resolved = self._cached
        try:
            summary = _summarize(resolved, columns.summary)
        finally:
            annotated.unpersist()
        _check_summary(summary)
        stats = _stats(batch_id, not new, summary)
        if not new:
            self._log.check_replay(batch_id, committed, _input_record(stats, summary))
        # Every append's files are written at the same time (their write jobs share the cores); the commits
        # follow one by one, in the order a re-run of a crashed batch repairs.
        appends: dict[str, Callable[[], Commit]] = {}
        if new:
            self._check_writable()
            appends["index"] = self._index_append(resolved, batch_id, version, stream_times, summary, stats)
        if self.settings.quarantine_path is not None:
            appends["quarantine"] = self._quarantine_append(resolved, batch_id, stats.duplicates)
        if sink_append is not None:
            appends["sink"] = sink_append(resolved, stats)
        for step, commit in zip(
            appends, prepare_concurrently(self.spark, list(appends.values())), strict=True
        ):
            commit()
            self._after_commit(step)
        self._stats = stats
        return resolved, stats

    def _batch_columns_of(self, schema: T.StructType) -> _BatchColumns:
        """The expressions deciding and summarizing the batches of ``schema``: built at the first one."""
        key = schema.json()
        if key not in self._batch_columns:
            decide = _resolve.decide_columns(self.settings, schema.fieldNames())
            self._batch_columns[key] = _BatchColumns(decide, _summary_columns(schema))
        return self._batch_columns[key]

    def _check_input(self, df: DataFrame) -> None:
        require_columns(df.schema, _RECORD_COLUMNS, "dedup input records")
        missing = [c for c in self.settings.by if c not in df.columns]
        if missing:
            what = f"dedup input: the index deduplicates by {list(self.settings.by)}"
            raise SchemaMismatchError(what, missing)
        require_columns(df.schema, self._stored_id_schema(), "dedup input: id columns of the index")
        maps = {
            c: f"{df.schema[c].dataType.simpleString()} (a MAP cannot be compared: ids must be)"
            for c in self.settings.by
            if "map<" in df.schema[c].dataType.simpleString()
        }
        if maps:
            raise SchemaMismatchError("dedup input: id columns", [], maps)

    def _stored_id_schema(self) -> T.StructType:
        """The id columns of the index (none before the first batch); cached once they exist."""
        if self._id_schema is not None:
            return self._id_schema
        schema = self.index().schema
        stored = T.StructType([schema[c] for c in self.settings.by if c in schema.fieldNames()])
        if len(stored.fields) == len(self.settings.by):
            self._id_schema = stored
        return stored

    def _read_point(self, batch_id: int | None) -> tuple[bool, int, dict[int, int], dict[str, Any]]:
        """Whether ``batch_id`` is new, the index version to read, the tasks' stream times (us) there and
        the metadata of the batch's commit ({} for a new batch).

        A new batch (or no batch id) reads the latest version; a committed one the version before its
        commit. One snapshot gives the version and the last batch id; the stream times are those the
        commits at or below the version to read recorded.

        Raises:
            InvalidInputError: ``batch_id`` is negative, or below the last committed batch id without
                having been committed itself (batch ids must increase), or a replay of a batch whose commit
                is no longer in the table's retained log (its output cannot be recomputed).
        """
        recorded = self._log.read()
        if batch_id is None or self._log.check_new(batch_id, recorded.last_batch_id):
            return True, recorded.version, _stream_times(recorded.state), {}
        found = self._log.batch_commit(batch_id)
        if found is None:
            raise InvalidInputError(
                f"batch_id {batch_id} was committed to {self.path} longer ago than the index's log "
                "retention: its forwarded records cannot be recomputed"
            )
        version = found[0] - 1
        return False, version, _stream_times(self._log.state_at(version)), found[1]

    def _live_entries(self, version: int, stream_times: dict[int, int], df: DataFrame) -> DataFrame:
        """The live entries of the index at ``version`` that batch ``df`` can match (see
        :func:`_resolve.live_entries`)."""
        index = self.spark.read.format("delta").option("versionAsOf", version).load(self.path)
        if len(self._stored_id_schema().fields) == len(self.settings.by):
            bounds = _resolve.id_bounds(df, self.settings.by) if stream_times else {}
            return _resolve.live_entries(index, self.settings, stream_times, bounds)
        # The first batch adds the id columns: no entry exists yet.
        empty = T.StructType(
            [
                T.StructField(TASK, T.IntegerType()),
                *[df.schema[c] for c in self.settings.by],
                T.StructField("_lh_e_t", T.LongType()),
                T.StructField("_lh_e_p", T.IntegerType()),
                T.StructField("_lh_e_o", T.LongType()),
            ]
        )
        return self.spark.createDataFrame([], empty)

    def _index_append(
        self,
        resolved: DataFrame,
        batch_id: int | None,
        read_version: int,
        stream_times: dict[int, int],
        summary: list[Row],
        stats: DedupStats,
    ) -> Callable[[], Commit]:
        """The append of the batch's new entries and stream times: one fenced append (recording the batch id
        also when it saves nothing), planned now; the function returned writes its files and returns the
        commit.

        A new entry cannot equal a stored row (a record is saved only after its id's entry expired, see the
        module doc), so the append reads nothing of the index. Fails with ``ConcurrentWriteError``, writing
        nothing, if another writer committed after ``read_version``, the version the batch was resolved
        against (the fence of :mod:`lakehouse.commit_log`: also when that commit lands just before this one).
        """
        new_times = dict(stream_times)
        for row in summary:
            if row["max_us"] is not None:
                new_times[row[TASK]] = max(new_times.get(row[TASK], row["max_us"]), row["max_us"])
        state = {_STREAM_TIME: {str(k): v for k, v in sorted(new_times.items())}}
        extra = {
            "stats": {k: v for k, v in vars(stats).items() if k not in ("batch_id", "replay")},
            **_input_record(stats, summary),
        }
        step = f"dedup batch {batch_id}"
        self._log.require_unchanged(read_version, step)
        if self._ensure_id_columns(
            self.path, [resolved.schema[c] for c in self.settings.by], read_version, step
        ):
            read_version += 1  # our own ALTER TABLE
        entries = _few_files(
            resolved.where(F.col(SAVED_COL)).select(*self._index_columns(batch_id)), stats.saved
        )
        saved_us = [r["min_saved_us"] for r in summary if r["min_saved_us"] is not None]
        if saved_us:
            extra[LOWEST_BUCKET] = min(saved_us) // self.settings.bucket_us
        return self._log.planned_append(
            entries, batch_id, state, read_version=read_version, step=step, **extra
        )

    def _index_columns(self, batch_id: int | None) -> list[Any]:
        return [
            F.col(TASK).alias(TASK_COL),
            *[F.col(c) for c in self.settings.by],
            F.col(TIMESTAMP_COL).alias(ENTRY_TS_COL),
            F.col(PARTITION_COL).alias(ENTRY_PARTITION_COL),
            F.col(OFFSET_COL).alias(ENTRY_OFFSET_COL),
            F.lit(batch_id).cast("long").alias(BATCH_COL),
            bucket_of(F.unix_micros(TIMESTAMP_COL), self.settings.bucket_us).alias(BUCKET_COL),
        ]

    def _ensure_id_columns(
        self, path: str, id_fields: list[T.StructField], read_version: int | None = None, step: str = ""
    ) -> bool:
        """Add the id columns (types of the first batch) to the index or quarantine table, once.

        Returns True if it committed an ALTER TABLE. A writer that added them in the meantime fails this
        one with ``ConcurrentWriteError`` when ``read_version`` (the index version the batch read) is given,
        else (the quarantine) its columns are taken as they are.
        """
        if path in self._with_ids:
            return False
        existing = self.spark.read.format("delta").load(path).columns
        missing = [f for f in id_fields if f.name not in existing]
        if missing:
            columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
            try:
                self.spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({columns})")
            except (AnalysisException, *CONFLICTS) as error:
                lost_race = (
                    not isinstance(error, AnalysisException)
                    or (error.getCondition() or "").partition(".")[0] in _COLUMN_ADDED
                )
                if not lost_race:
                    raise
                if read_version is not None:
                    self._log.require_unchanged(read_version, step)
                    raise
                return self._ensure_id_columns(path, id_fields)
        self._with_ids.add(path)
        return bool(missing)

    def _quarantine_append(
        self, resolved: DataFrame, batch_id: int | None, duplicates: int
    ) -> Callable[[], Commit]:
        """The append of the batch's duplicates to the quarantine, planned now (see :meth:`_index_append`)."""
        path = self.settings.quarantine_path
        assert path is not None
        self._ensure_id_columns(path, [resolved.schema[c] for c in self.settings.by])
        dropped = resolved.where(F.col(DECISION_COL) == F.lit(_resolve.DUPLICATE)).select(
            F.col(TASK).alias(TASK_COL),
            *[F.col(c) for c in self.settings.by],
            F.col(TIMESTAMP_COL).alias("ts"),
            PARTITION_COL,
            OFFSET_COL,
            F.timestamp_micros(F.col(CAUSE_COL)["t"]).alias(ENTRY_TS_COL),
            F.col(CAUSE_COL)["p"].alias(ENTRY_PARTITION_COL),
            F.col(CAUSE_COL)["o"].alias(ENTRY_OFFSET_COL),
            F.lit(batch_id).cast("long").alias(BATCH_COL),
        )
        quarantine = CommitLog(self.spark, path, self._sink_app_id_of_index(), writer=self.writer)
        return quarantine.planned_append(_few_files(dropped, duplicates), batch_id, {}, index=self.path)

    def _sink_app_id_of_index(self) -> str:
        """The app id this index's batches carry in the tables it shares (quarantine and sink), with
        :attr:`writer` naming the job among the index's writers."""
        if self._sink_app_id is None:
            self._sink_app_id = f"{APP_ID}:{delta_ops.table_metadata(self.spark, self.path).id}"
        return self._sink_app_id

    def _check_writable(self) -> None:
        """Raise ``ReadOnlyReplicaError`` on a replica's index (checked once per object)."""
        if not self._writable:
            delta_ops.refuse_replica_writes(self.spark, self.path)
            self._writable = True

    def _release(self) -> None:
        if self._cached is not None:
            self._cached.unpersist()
            self._cached = None


def _stream_times(state: dict[str, Any]) -> dict[int, int]:
    """Task -> stream time (us) from a recorded state."""
    return {int(task): int(us) for task, us in state.get(_STREAM_TIME, {}).items()}


def _require_sink_takes(spark: SparkSession, sink: str, schema: T.StructType) -> Any:
    """The sink's newest snapshot if it exists, None if not; raise unless it is a Delta table that has every
    column of ``schema`` with the same type (its schema read from the snapshot: no DataFrame is planned).

    A folder that is not a Delta table yet may be one another writer is creating (its data files land
    before its first commit): it is refused once nothing in it has changed for
    :data:`_SINK_CREATION_QUIET_S` seconds (at once if it is older). A fixed wait from the first look
    refused a sink whose creator was slow to commit (seen under load: a concurrent writer's retry).
    """
    if not path_exists(spark, sink):
        return None
    snapshot = latest_snapshot(spark, sink)
    while int(snapshot.version()) < 0:
        changed_ms = max(
            int(status.getModificationTime()) for status in [*list_files(spark, sink), _status(spark, sink)]
        )
        if time.time() - changed_ms / 1000 > _SINK_CREATION_QUIET_S:
            raise InvalidInputError(
                f"the dedup sink {sink} exists and is not a Delta table: nothing was written"
            )
        time.sleep(0.5)
        snapshot = latest_snapshot(spark, sink)
    message = f"the dedup sink {sink} cannot take the batch (nothing was written)"
    require_columns(snapshot_schema(snapshot), schema, message)
    return snapshot


def _status(spark: SparkSession, path: str) -> Any:
    """The Hadoop ``FileStatus`` of ``path`` itself."""
    return hadoop_fs(spark, path).getFileStatus(hadoop_path(spark, path))


def _shared_sink_refusal(sink: str) -> Callable[[str], InvalidInputError]:
    """The refusal of records without a ``topic`` column into ``sink``, which another writer (another index
    or writer name: another source) appends to: their ``(partition, offset)`` pairs would collide."""
    return lambda other: InvalidInputError(
        f"the dedup sink {sink} is written by {other} too and the records have no `topic` column telling "
        "the sources apart (their partition/offset pairs would collide): add a `topic` column or use a sink "
        "of its own (nothing was written to the sink)"
    )


def _refuse_shared_sink(
    sink_log: CommitLog, refusal: Callable[[str], InvalidInputError], snapshot: Any
) -> None:
    """Raise ``refusal(other)`` at this writer's first batch into a sink another writer appends to, before
    anything is written (``snapshot``: the sink's newest). Costs no Spark job (the checksum lists the
    writers). (A writer whose first batch races another's is refused at its sink commit: see
    :func:`lakehouse.commit_log.prepare_append`.)"""
    others = other_writers(sink_log.spark, snapshot, sink_log.txn_app_id)
    if others:
        raise refusal(others[0])


def _forwarded(resolved: DataFrame, columns: Sequence[str]) -> DataFrame:
    return resolved.where(F.col(DECISION_COL) != F.lit(_resolve.DUPLICATE)).select(*columns)


def _without_redeliveries(
    resolved: DataFrame, columns: Sequence[str], sink: str | None, since: int | None
) -> DataFrame:
    """The forwarded records less the re-deliveries of a record the sink or the batch holds.

    A re-delivery is the same record again: the same ``(topic,) partition, offset`` *and* the same value
    in every other column (the timestamp included), from the same incarnation of the source (the sink's
    rows committed after version ``since``; None: all of them). A record at an offset the sink holds with
    any other content, or from an earlier incarnation, is a new record (the source's offsets were reset,
    or another source shares the sink) and is kept: no record is dropped for its offset alone. Plain
    forwarded records are kept as they are (they cannot be re-deliveries, see the module doc); replayed,
    late and null-id records with a non-null offset are kept once per distinct record and only if neither
    the sink nor this batch's plain forwarded records hold it.
    """
    spark = resolved.sparkSession
    schema = resolved.select(*columns).schema
    ids = [c for c in ("topic", PARTITION_COL, OFFSET_COL) if c in columns]
    decision = F.col(DECISION_COL)
    fresh = resolved.where(decision == F.lit(_resolve.FORWARDED)).select(*columns)
    again = resolved.where(decision.isin(_resolve.REPLAYED, _resolve.LATE, _resolve.NULL_ID))
    unidentified = again.where(F.col(OFFSET_COL).isNull()).select(*columns)
    identified = again.where(F.col(OFFSET_COL).isNotNull()).select(*columns)
    held = fresh
    if sink is not None:  # None: the sink does not exist yet
        ranges = (
            identified.groupBy(PARTITION_COL)
            .agg(F.min(OFFSET_COL).alias("lo"), F.max(OFFSET_COL).alias("hi"))
            .collect()
        )
        in_ranges = " OR ".join(
            f"(`{PARTITION_COL}` = {r[PARTITION_COL]} AND `{OFFSET_COL}` BETWEEN {r['lo']} AND {r['hi']})"
            for r in ranges
        )
        if in_ranges:
            rows = spark.read.format("delta").load(sink).where(in_ranges)
            if since is not None:
                rows = rows.where(rows_since(since))
            held = held.unionByName(rows.select(*columns))
    # The same record delivered twice: keeping one copy is the specified semantics here.
    keyed = _with_record_key(identified, schema).dropDuplicates([*ids, _RECORD_KEY])
    kept = keyed.join(
        _with_record_key(held, schema).select(*ids, _RECORD_KEY), on=[*ids, _RECORD_KEY], how="left_anti"
    )
    return fresh.unionByName(kept.select(*columns)).unionByName(unidentified)


def _with_record_key(rows: DataFrame, schema: T.StructType) -> DataFrame:
    """``rows`` plus :data:`_RECORD_KEY`: a struct of every column of ``schema`` (a MAP as its JSON text, as
    maps cannot be compared). Two rows have equal keys exactly when every column is equal, NULLs equal."""
    return rows.withColumn(_RECORD_KEY, F.struct(*hashable_columns(schema)))


def _sink_commit(sink: CommitLog, batch_id: int) -> tuple[int, int]:
    """The sink's version whose commit appended ``batch_id`` and the rows it appended (also when this run's
    append was a skipped replay)."""
    found = sink.batch_metrics(batch_id)
    if found is None:
        raise LakehouseInternalError(f"the sink {sink.path} has no commit of batch {batch_id}")
    return found[0], int(found[1].get("numOutputRows", 0))


def _count(decision: int) -> Any:
    return F.sum((F.col(DECISION_COL) == F.lit(decision)).cast("long"))


def _few_files(rows: DataFrame, count: int) -> DataFrame:
    """``rows`` (``count`` of them, decided from the batch's cache) in ``ceil(count / _ROWS_PER_FILE)``
    partitions, at least one: the cached partitions are merged without a shuffle (Delta's optimized write
    would shuffle the rows once more, one more Spark job per append)."""
    return rows.coalesce(max(1, -(-count // _ROWS_PER_FILE)))


def _summary_columns(schema: T.StructType) -> tuple[Column, ...]:
    """The aggregates of :func:`_summarize` for a batch of ``schema``: per task, counts by decision, range
    of timestamps and of saved timestamps, NULL-input counts and the fingerprint of the input's columns."""
    ts_us = F.unix_micros(TIMESTAMP_COL)
    saved_us = F.when(F.col(SAVED_COL), ts_us)
    return (
        F.count(F.lit(1)).alias("input"),
        _count(_resolve.DUPLICATE).alias("duplicates"),
        _count(_resolve.LATE).alias("late"),
        _count(_resolve.REPLAYED).alias("replayed"),
        _count(_resolve.NULL_ID).alias("null_ids"),
        F.sum(F.col(SAVED_COL).cast("long")).alias("saved"),
        F.min(ts_us).alias("min_us"),
        F.max(ts_us).alias("max_us"),
        F.min(saved_us).alias("min_saved_us"),
        F.max(saved_us).alias("max_saved_us"),
        F.sum(F.col(TIMESTAMP_COL).isNull().cast("long")).alias("null_timestamps"),
        F.sum(F.col(PARTITION_COL).isNull().cast("long")).alias("null_partitions"),
        input_fingerprint(hashable_columns(schema)).alias(INPUT_FINGERPRINT),
    )


def _summarize(resolved: DataFrame, aggregates: Sequence[Column]) -> list[Row]:
    """The batch's summary per task: ``aggregates`` (:func:`_summary_columns`) over ``resolved``."""
    return resolved.groupBy(TASK).agg(*aggregates).collect()


def _check_summary(summary: list[Row]) -> None:
    null_ts = sum(r["null_timestamps"] for r in summary)
    null_partitions = sum(r["null_partitions"] for r in summary)
    if null_ts or null_partitions:
        raise InvalidInputError(
            f"dedup input has {null_ts} record(s) with a NULL timestamp and {null_partitions} with a NULL "
            "partition; every record needs both (nothing was written)"
        )
    for row in summary:
        for column in ("min_us", "max_us"):  # every record's, late ones too: year 0 is bad input
            require_representable(row[column], "a record's timestamp")


def _input_record(stats: DedupStats, summary: list[Row]) -> dict[str, Any]:
    """What a commit records of its input for a replay to compare: records and the input fingerprint."""
    fingerprint = sum(row[INPUT_FINGERPRINT] or 0 for row in summary)
    return {"records": stats.input, INPUT_FINGERPRINT: str(fingerprint)}


def _stats(batch_id: int | None, replay: bool, summary: list[Row]) -> DedupStats:
    def total(name: str) -> int:
        return int(sum(r[name] or 0 for r in summary))

    return DedupStats(
        batch_id=batch_id,
        replay=replay,
        input=total("input"),
        forwarded=total("input") - total("duplicates"),
        duplicates=total("duplicates"),
        late=total("late"),
        replayed=total("replayed"),
        null_ids=total("null_ids"),
        saved=0 if replay else total("saved"),
    )
