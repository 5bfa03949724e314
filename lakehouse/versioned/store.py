"""``VersionedStore``: a KIP-889 versioned key-value store materialized as one Delta table.

Semantics (the contract; bounds matter):

- A version ``(key, value, valid_from)`` is valid in ``[valid_from, valid_to)``; ``valid_to`` is the next
  version's ``valid_from`` (exclusive) or NULL for the latest. ``value`` None (or a record marked by
  ``deletes``) is a tombstone: stored as a version, and reads landing on it return nothing.
- Observed stream time ``ST`` is the largest timestamp of any accepted put, **for the whole store** (Kafka
  keeps one per partition; one lakehouse table is one store). A put with ``t < ST - R`` (R = history
  retention, which is also the grace period) is not put; ``t == ST - R`` is accepted.
- A read at ``as_of < ST - R`` is *expired*: only the latest version may answer, when it is not a
  tombstone and ``valid_from <= as_of``; a read at exactly ``ST - R`` is not expired.
- A version already expired (``valid_to <= ST - R``) can answer no read. A batch still writes it into
  the pending partition (below), where it bounds the version before it; the seal that moves the batch's
  versions into their segments does not write it (a stored one the seal would change is deleted): the
  stored history of a key may start later, or have a gap, before ``ST - R`` only.
- Every write (put, delete, put_all batch) is one atomic Delta commit; a batch given a ``batch_id`` that
  the table has already recorded is a no-op (replay), and a batch id is recorded even when every record
  of the batch is dropped (or there is none). Each writer's last batch id and ``ST`` are recorded by every
  commit the store makes, batches, expiry and VACUUM alike, so both survive Delta's checkpoints and log
  cleanup (:mod:`lakehouse.commit_log`).

Physical layout: partitioned by ``segment = floor(valid_to / segment_interval)`` (NULL for the latest
versions). A batch appends its versions to the pending partition (:mod:`lakehouse.versioned.pending`),
reading and rewriting nothing else, so its cost follows the batch, not the number of live keys;
:meth:`VersionedStore.seal` moves pending versions into their segments (one MERGE for many batches), and
every read resolves the pending versions against the sealed ones, so reads are the same before and after
a seal. Expiry drops whole segments with a metadata-only DELETE; reads prune segments.
Several jobs may write one store, each under its own ``writer`` name (batch ids are per writer); a batch
commits only on the table version it was planned from, else it fails with ``ConcurrentWriteError``,
writing nothing, whenever the other writer committed (the fence of :mod:`lakehouse.commit_log`). Readers may
run concurrently (snapshot isolation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.catalog import lakehouse_properties
from lakehouse.commit_log import (
    CONFLICTS,
    INPUT_FINGERPRINT,
    CommitLog,
    Recorded,
    append_to_table,
    commit_metrics,
    partition_rows,
    require_writer_name,
)
from lakehouse.damage import names_missing_files
from lakehouse.errors import ConcurrentWriteError, InvalidInputError, LakehouseInternalError, first_line
from lakehouse.ordering import ORDER_COL, require_order_columns
from lakehouse.paths import resolve_path
from lakehouse.schemas import require_columns
from lakehouse.times import from_micros, from_micros_or_none, micros, require_representable, timestamp_lit
from lakehouse.versioned import _plan
from lakehouse.versioned._plan import TOMBSTONE, VALID_FROM, VALID_TO
from lakehouse.versioned.pending import (
    PENDING_SEGMENT,
    oldest_pending_segment_sql,
    table_reference,
    versions_sql,
)
from lakehouse.versioned.policy import SealPolicy
from lakehouse.versioned.records import (
    ExpireResult,
    PutAllResult,
    PutResult,
    PutStatus,
    SealResult,
    VersionedRecord,
)
from lakehouse.versioned.segments import (
    SEGMENT_COL,
    default_segment_interval,
    first_live_segment,
    segment_of,
    segments_from,
)
from lakehouse.versioned.settings import KIND, StoreSettings, table_schema

APP_ID = "lakehouse.versioned_store"
#: Commit metadata field of a MERGE: no partition it writes is below this segment, so a store whose
#: newest drop and later MERGEs are retained knows its lowest segment without reading data.
LOWEST_SEGMENT = "lowest_segment"
_STREAM_TIME = "stream_time_us"
# Pending-tier state (grow-only counters, like every state field): pending rows may exist iff more commits
# appended pending rows than the newest seal had sealed; the stream time of the newest seal bounds the
# oldest pending valid_from (every later put is at or after it minus the retention).
_PENDING_WRITES = "pending_writes"
_SEALED_WRITES = "sealed_writes"
_SEAL_STREAM_TIME = "seal_stream_time_us"
# The seal policy's counters (grow-only too): the records batches accepted into the pending partition, that
# count at the newest seal, and the rows of the latest-version partition the newest seal read (live keys:
# a key never leaves that partition, so the count never shrinks).
_PENDING_ROWS = "pending_rows"
_SEALED_ROWS = "sealed_rows"
_LIVE_KEYS = "live_keys"
#: A seal rewrites the latest versions' files once their deletion vectors delete this many rows per row
#: they hold (:meth:`VersionedStore._purge_latest`).
_PURGE_DELETED_PER_LIVE_ROW = 1.0
#: Commit metadata fields that make up a store's state (replicas copy them).
STATE_FIELDS = (
    _STREAM_TIME,
    _PENDING_WRITES,
    _SEALED_WRITES,
    _SEAL_STREAM_TIME,
    _PENDING_ROWS,
    _SEALED_ROWS,
    _LIVE_KEYS,
)
#: The state fields of a store's pending tier: the commits that appended pending rows, those the newest seal
#: had sealed, and that seal's stream time. A shard replica (``lakehouse.Replica``) lays out its source's
#: versions itself: it records its own values of these (:func:`pending_tier_appended`,
#: :func:`pending_tier_sealed`), never the source's.
PENDING_TIER_FIELDS = (_PENDING_WRITES, _SEALED_WRITES, _SEAL_STREAM_TIME)
#: The ``operation`` a seal's commit records in its metadata (a seal changes no read).
SEAL_OPERATION = "seal"
#: The ``operation`` a VACUUM's commits record in their metadata.
VACUUM_OPERATION = "vacuum"
#: Commit metadata operations of the store that change no read (every read is the same before and after):
#: a follower of the store's changelog skips exactly these, and its batches (metadata ``records``) and
#: partition drops; any other commit of the store it cannot interpret.
READ_NEUTRAL_OPERATIONS = frozenset({SEAL_OPERATION, VACUUM_OPERATION})
#: The policy a store handle seals by unless told otherwise (:mod:`lakehouse.versioned.policy`).
DEFAULT_SEAL_POLICY = SealPolicy()
_SINGLE_PUT_SEQUENCE = "_lh_sequence"
# A seal's MERGE source flag: the row deletes the pending row of its version.
_UNPEND = "_lh_unpend"
_DEFAULT_FILE_RETENTION = timedelta(days=7)
# Delta refuses VACUUM ... RETAIN under this (its default deletedFileRetentionDuration) unless told not to.
_DELTA_SAFE_FILE_RETENTION = timedelta(days=7)
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# Our MERGE source is checkpointed already (see VersionedStore._merge).
_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


class VersionedStore:
    """A versioned key-value store on Delta Lake. Build with :meth:`create` or :meth:`open`."""

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        settings: StoreSettings,
        schema: T.StructType,
        writer: str | None = None,
        seal_policy: SealPolicy | None = DEFAULT_SEAL_POLICY,
    ) -> None:
        self.spark = spark
        self.path = path
        self.settings = settings
        self.schema = schema
        self.seal_policy = seal_policy
        self._writable = False
        self._maintains_replica = False
        self._log = CommitLog(spark, path, APP_ID, STATE_FIELDS, writer, fenced=True)

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        spark: SparkSession,
        path: str,
        key: str | Sequence[str],
        schema: T.StructType,
        history_retention: timedelta,
        segment_interval: timedelta | None = None,
        file_retention: timedelta = _DEFAULT_FILE_RETENTION,
        deletion_vectors: bool = True,
        *,
        writer: str | None = None,
        seal_policy: SealPolicy | None = DEFAULT_SEAL_POLICY,
    ) -> VersionedStore:
        """Create the store's Delta table at ``path`` (or open it if it exists with the same settings).

        Args:
            key: Key column(s) of ``schema``; every other column of ``schema`` is a value column.
            schema: Key and value columns (no system columns).
            history_retention: ``R``: how long history stays readable behind stream time (>= 0); also the
                grace period for out-of-order puts.
            segment_interval: Width of a validTo segment; default derived from ``R`` like Kafka's.
            file_retention: How long VACUUM keeps files of dropped segments for time travel and for
                readers still running (``delta.deletedFileRetentionDuration``). Below Delta's 7-day safety
                threshold only when the session sets ``spark.databricks.delta.retentionDurationCheck.enabled``
                to ``false``, as Delta's own ``VACUUM ... RETAIN`` requires.
            deletion_vectors: Let each batch's MERGE mark replaced rows in deletion vectors instead of
                rewriting every file it touches (``delta.enableDeletionVectors``; readers need Delta 2.3+).
            writer: The job writing batches through this handle (see :meth:`open`).
            seal_policy: When this handle's ``put_all`` seals after its batch (see :meth:`open`).

        Raises:
            InvalidInputError: a negative retention, a segment interval under 1 ms, an unsafe
                ``file_retention``, a bad key, schema or writer name.
            StoreSettingsConflictError: a table exists at ``path`` with other settings.
        """
        path = resolve_path(path)
        require_writer_name(writer)
        keys = (key,) if isinstance(key, str) else tuple(key)
        settings = StoreSettings(
            keys=keys,
            values=tuple(f.name for f in schema.fields if f.name not in keys),
            history_retention=history_retention,
            segment_interval=(
                default_segment_interval(history_retention) if segment_interval is None else segment_interval
            ),
        )
        _require_safe_file_retention(spark, file_retention)
        full_schema = table_schema(schema, keys)
        properties = {
            **settings.properties(),
            "delta.deletedFileRetentionDuration": f"interval {micros(file_retention) // 1_000_000} seconds",
            "delta.enableDeletionVectors": str(deletion_vectors).lower(),
        }
        delta_ops.ensure_table(
            spark,
            path,
            full_schema,
            partition_by=(SEGMENT_COL,),
            properties=properties,
            created_with=delta_ops.CHANGE_FEED,
        )
        return cls(spark, path, settings, full_schema, writer, seal_policy)

    @classmethod
    def open(
        cls,
        spark: SparkSession,
        path: str,
        *,
        writer: str | None = None,
        seal_policy: SealPolicy | None = DEFAULT_SEAL_POLICY,
    ) -> VersionedStore:
        """Open an existing store; its settings are read back from the table's properties.

        Args:
            writer: The job writing batches through this handle (e.g. its pipeline's name). Batch ids are
                counted per writer, so jobs that write one store with their own batch ids never take each
                other's batches for replays; stream time and retention are the store's, whoever advanced
                them. Default: the unnamed writer (one job per store).
            seal_policy: When a ``put_all`` batch through this handle seals the store right after its commit
                (:class:`~lakehouse.versioned.policy.SealPolicy`: pending rows relative to live keys, so
                reads stay bounded whatever schedule runs :meth:`seal`); None: only explicit seals.

        Raises:
            NotALakehouseTableError: ``path`` holds no versioned store.
            InvalidInputError: ``writer`` is empty or contains ``/``.
        """
        path = resolve_path(path)
        settings = StoreSettings.from_properties(path, lakehouse_properties(spark, path, KIND))
        schema = spark.read.format("delta").load(path).schema
        return cls(spark, path, settings, schema, writer, seal_policy)

    # ------------------------------------------------------------------ state
    def table(self) -> DataFrame:
        """The store's versions as they are now, tombstones included: :meth:`versions` of the current
        version."""
        return self.versions()

    def versions(self, version: int | None = None, of_keys: DataFrame | None = None) -> DataFrame:
        """Every version of the store as of the table's ``version`` (default: now), tombstones included:
        the store's columns, each version with its ``valid_to`` and ``segment``, pending versions
        resolved against sealed ones (:mod:`lakehouse.versioned.pending`), so the frame is the same before
        and after :meth:`seal` except for versions already expired.

        ``of_keys``: a small frame of key columns; only the versions of its keys are returned, each key's
        resolved from that key's rows alone (its rows are picked before any join or window: the cost of
        resolving pending versions then follows those keys, not the store).

        Versions with ``valid_to`` at or before ``stream_time - R`` answer no read: those expired when a
        seal committed are not stored (pending ones are until the seal), the rest stay until
        :meth:`expire`.
        """
        if version is None:
            recorded = self._log.read()
            version, state = recorded.version, recorded.state
        else:
            state = self._log.state_at(version)
        return self._versions(version, state, of_keys)

    def _versions(
        self, version: int, state: Mapping[str, Any], of_keys: DataFrame | None = None
    ) -> DataFrame:
        """:meth:`versions` at ``version`` of state ``state`` (the table itself when nothing is pending)."""
        rows = self._snapshot(version)
        if of_keys is not None:
            keys = list(self.settings.keys)
            rows = rows.join(F.broadcast(of_keys.select(*keys)), on=keys, how="left_semi")
        if not has_pending(state):
            return rows
        region_from = self._region_from(state)
        query = versions_sql(
            "{rows}",
            self.schema.fieldNames(),
            self.settings.keys,
            self.settings.interval_us,
            None if region_from is None else str(region_from),
            few_keys=of_keys is not None,
        )
        return self.spark.sql(query, rows=rows)

    def _region_from(self, state: Mapping[str, Any]) -> int | None:
        """The first sealed segment that pending rows can change (None: any): that of ``stream_time - R``
        at the newest seal, since every put accepted after it is at or after that time."""
        sealed_at = state.get(_SEAL_STREAM_TIME)
        if sealed_at is None:
            return None
        return segment_of(int(sealed_at) - self.settings.retention_us, self.settings.interval_us)

    @property
    def stream_time(self) -> datetime | None:
        """Observed stream time: the largest timestamp of any accepted put (None before the first put)."""
        us = self._stream_time_us()
        return None if us is None else from_micros(us)

    def _stream_time_us(self) -> int | None:
        return _stream_time_of(self._log.read())

    def state_version(self) -> tuple[int, int | None]:
        """The store's current Delta version and its stream time (microseconds) as of that version."""
        recorded = self._log.read()
        return recorded.version, _stream_time_of(recorded)

    def horizon_us_at(self, version: int) -> int | None:
        """``stream_time - R`` in microseconds as of the table's ``version`` (None before the first put):
        reads before it are expired, and no version with ``valid_to`` at or before it can answer a read."""
        found = self._log.state_at(version).get(_STREAM_TIME)
        return None if found is None else int(found) - self.settings.retention_us

    def pending_commits(self) -> int:
        """How many commits wrote versions into the pending partition since the newest :meth:`seal` (0:
        nothing is pending), from the store's state: no Spark job."""
        return _pending_commits(self._log.read().state)

    def _is_expired(self, as_of_us: int, stream_time_us: int | None) -> bool:
        return stream_time_us is not None and as_of_us < stream_time_us - self.settings.retention_us

    # ------------------------------------------------------------------ writes
    def put(self, key: Any, value: Any, t: datetime) -> PutResult:
        """Put one version; ``value`` None is a tombstone. Same key and ``t`` replaces. One commit.

        Returns:
            ``NOT_PUT`` if ``t < stream_time - R`` (nothing written, stream time unchanged); ``LATEST`` if
            it is now the key's latest version; ``HISTORY`` with its ``valid_to`` (the next version's
            ``valid_from``, possibly a tombstone's) if it went into history.
        """
        self._check_writable()
        return self._put(key, value, micros(t), self._log.read())

    def _put(self, key: Any, value: Any, t_us: int, recorded: Recorded) -> PutResult:
        """:meth:`put` planned against the store as ``recorded``."""
        if self._is_expired(t_us, _stream_time_of(recorded)):
            return PutResult(PutStatus.NOT_PUT)
        record = {**self._key_dict(key), **self._value_dict(value)}
        batch = self._one_record_frame(record, t_us)
        # One accepted record at t_us: its summary is known, so no job computes it.
        known = {"records": 1, "dropped": 0, "null_keys": 0, "null_timestamps": 0, "null_order": 0}
        known.update(min_accepted_us=t_us, min_us=t_us, max_us=t_us)
        written = self._write(
            batch, None, _SINGLE_PUT_SEQUENCE, F.lit(value is None), "timestamp", recorded, known
        )
        # The new version is valid until the key's next version, if any.
        if written.source is not None:  # written straight into its segment: the MERGE source says
            mine = written.source.where(F.col(_plan.INCOMING_FLAG) & (F.unix_micros(VALID_FROM) == t_us))
            row = mine.select(F.unix_micros(VALID_TO).alias("to_us")).first()
        else:
            later = self.table().where(self._key_condition(key) & (F.unix_micros(VALID_FROM) > t_us))
            row = later.agg(F.min(F.unix_micros(VALID_FROM)).alias("to_us")).first()
        if row is None or row["to_us"] is None:
            return PutResult(PutStatus.LATEST)
        return PutResult(PutStatus.HISTORY, from_micros(row["to_us"]))

    def delete(self, key: Any, t: datetime) -> VersionedRecord | None:
        """Put a tombstone at ``t``; return the version that was valid at ``t`` before it (inclusive).

        Returns None, writing nothing, when ``t < stream_time - R`` (even if a version exists).
        """
        self._check_writable()
        recorded = self._log.read()
        if self._is_expired(micros(t), _stream_time_of(recorded)):
            return None
        found = self.get(key, as_of=t)
        self._put(key, None, micros(t), recorded)
        return found

    @names_missing_files
    def put_all(
        self,
        df: DataFrame,
        batch_id: int | None = None,
        sequence_by: str | None = None,
        deletes: Column | str | None = None,
        timestamp: str = "timestamp",
    ) -> PutAllResult:
        """Apply a batch of puts as if one by one in processing order, in one Delta commit.

        Every read after the batch is what one-by-one puts give. The batch's versions go to the pending
        partition, however many segments they span; the seal moving them into their segments writes only
        those not expired by then (``valid_to > stream_time - R``) and the latest.

        When the batch leaves as many pending rows as the handle's ``seal_policy`` allows (relative to the
        live keys), the batch then seals the store (:meth:`seal`, its own commit; ``sealed_rows`` of the
        result): reads stay bounded whatever schedule runs the seals. A seal that loses a race with another
        writer is left to the next batch or the maintenance (the batch is committed either way).

        Processing order: within a source partition by ``offset``; across partitions the partition whose
        time is smallest goes first, ties to the lower partition (Kafka Streams' task order). A frame
        without ``partition``/``offset`` names a ``sequence_by`` column (then it is one ordered sequence).

        Args:
            df: Key and value columns of the store, ``timestamp``, and the order columns; other columns are
                ignored.
            batch_id: Makes the batch replay-safe: a batch id the table has recorded is not applied again.
            deletes: Boolean column or SQL expression marking tombstones; default: all value columns NULL.
            timestamp: The event-time (TIMESTAMP) column: each record's ``valid_from``.

        Raises:
            SchemaMismatchError: missing columns or wrong types (nothing is written).
            InvalidInputError: null keys, timestamps or order columns, or a batch id below the last
                committed one (nothing is written).
            ConcurrentWriteError: another writer committed after this batch read the store (nothing is
                written).
        """
        self._check_writable()
        self._check_frame(df, timestamp, sequence_by)
        recorded = self._log.read()
        tombstone = self._tombstone_condition(df, deletes)
        if batch_id is not None and not self._log.check_new(batch_id, recorded.last_batch_id):
            prepared = _plan.prepare_batch(
                df, self.settings.keys, self.settings.values, timestamp, tombstone, sequence_by
            )
            return self._replayed(batch_id, recorded, prepared)
        written = self._write(df, batch_id, sequence_by, tombstone, timestamp, recorded)
        if not self._seal_due(written.state):
            return written.result
        try:
            sealed = self.seal().rows_written
        except ConcurrentWriteError:
            return written.result
        return replace(written.result, sealed_rows=sealed)

    def _seal_due(self, state: Mapping[str, Any]) -> bool:
        """Whether the handle's seal policy seals a store of ``state`` (from its counters: no Spark job)."""
        if self.seal_policy is None or not has_pending(state):
            return False
        pending_rows = int(state.get(_PENDING_ROWS, 0)) - int(state.get(_SEALED_ROWS, 0))
        return self.seal_policy.due(pending_rows, int(state.get(_LIVE_KEYS, 0)))

    def _write(
        self,
        df: DataFrame,
        batch_id: int | None,
        sequence_by: str | None,
        tombstone: Column,
        timestamp: str,
        recorded: Recorded,
        known_stats: Mapping[str, Any] | None = None,
    ) -> _Written:
        """Plan the batch against the store as ``recorded`` and commit it in one Delta commit.

        The batch's versions go to the pending partition (:meth:`_write_pending`); when no record is
        accepted, an empty append records the batch id (nothing without a batch id). The commit fails,
        writing nothing, if another writer committed after ``recorded``. ``known_stats`` is the batch's
        summary (:func:`_plan.batch_stats`) when the caller knows it (one :meth:`put`): the job that
        computes it is then skipped, and when nothing is pending the one version goes straight into its
        segment (:meth:`_merge_sealed`: one key's versions, nothing to gain from a later seal).
        """
        keys, values = self.settings.keys, self.settings.values
        stream_time_us = _stream_time_of(recorded)
        prepared = _plan.prepare_batch(df, keys, values, timestamp, tombstone, sequence_by)
        marked = _plan.mark_dropped(prepared, stream_time_us, self.settings.retention_us)
        if known_stats is None:
            marked = marked.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = known_stats
            if stats is None:
                stats = _plan.batch_stats(marked, keys, values).first()
            if stats is None:
                raise LakehouseInternalError("an aggregate returned no row")
            _reject_nulls(stats)
            # Every record's time, dropped ones too: a year-0 record is bad input, not merely late.
            require_representable(stats["min_us"], "a record's timestamp")
            require_representable(stats["max_us"], "a record's timestamp")
            new_stream_time = _max_or_none(stream_time_us, stats["max_us"])
            state = dict(recorded.state)
            if new_stream_time is not None:
                state[_STREAM_TIME] = new_stream_time
            counts = {"records": stats["records"], "dropped": stats["dropped"]}
            if batch_id is not None:  # what a replay of the batch id is compared with
                counts[INPUT_FINGERPRINT] = str(stats[INPUT_FINGERPRINT])
            written, source = 0, None
            accepted = int(stats["records"]) - int(stats["dropped"])
            direct = known_stats is not None and not has_pending(recorded.state)
            if stats["min_accepted_us"] is not None and direct:
                incoming = _plan.accepted_records(marked, keys, values)
                first = segment_of(stats["min_accepted_us"], self.settings.interval_us)
                written, source = self._merge_sealed(
                    incoming, None, first, recorded.version, state, batch_id, counts, "put"
                )
            elif stats["min_accepted_us"] is not None:
                state[_PENDING_WRITES] = int(state.get(_PENDING_WRITES, 0)) + 1
                state[_PENDING_ROWS] = int(state.get(_PENDING_ROWS, 0)) + accepted
                times = (stats["min_accepted_us"], stats["max_us"])
                written = self._write_pending(marked, batch_id, recorded, state, counts, times)
            elif batch_id is not None:
                self._record_empty(batch_id, recorded.version, state, counts)
        finally:
            marked.unpersist()
        new_time = from_micros_or_none(new_stream_time)
        result = PutAllResult(batch_id, stats["records"], stats["dropped"], written, new_time)
        return _Written(result, source, state)

    def _record_empty(
        self, batch_id: int, read_version: int, state: Mapping[str, Any], counts: Mapping[str, int]
    ) -> None:
        """Commit a batch that changes no row (no record, or all dropped): an empty idempotent append."""
        options = self._log.writer_options(batch_id, state, read_version=read_version, **counts)
        empty = self.spark.createDataFrame([], self.schema)
        with self._log.committing(read_version, f"put_all batch {batch_id}"):
            append_to_table(empty, self.path, options)

    def _write_pending(
        self,
        marked: DataFrame,
        batch_id: int | None,
        recorded: Recorded,
        state: Mapping[str, Any],
        counts: Mapping[str, int],
        times_us: tuple[int, int],
    ) -> int:
        """Write the batch's versions into the pending partition in one commit; returns the rows written.

        The batch's versions (per ``(key, valid_from)`` its last record, :func:`_plan.batch_versions`) are
        written as they are: each one's ``valid_to`` is the next version of its key in the batch, a bound
        that reads shorten to the next version of its key in the store (:mod:`~lakehouse.versioned.pending`),
        so the versions pending before are neither read nor re-bounded. With nothing pending that is a
        plain append; else one MERGE confined to the pending partition, in which a version replaces the
        pending row at its ``(key, valid_from)`` (each stays pending at most once) and the others are
        inserted: only files holding a replaced row are rewritten, so the cost follows the batch, not the
        pending rows or the store. The MERGE also bounds the pending rows' ``valid_from`` by literals,
        ``times_us``: the batch's earliest accepted and latest record times (both inclusive, a superset of
        its versions' ``valid_from``), so Delta's file statistics skip the pending files of other times
        instead of the join reading every pending row. A version already expired when the batch commits is
        written too: the sealed version before it may end at its ``valid_from`` (a late version inside the
        sealed history), which only the seal sees, and resolves it then (the seal drops expired versions).
        """
        keys, values = self.settings.keys, self.settings.values
        incoming = _plan.accepted_records(marked, keys, values)
        versions = _plan.batch_versions(incoming, keys, values, self.settings.interval_us)
        versions = versions.withColumn(SEGMENT_COL, F.lit(PENDING_SEGMENT).cast("long"))
        extra = {**counts, LOWEST_SEGMENT: PENDING_SEGMENT}
        step = "put" if batch_id is None else f"put_all batch {batch_id}"
        if not has_pending(recorded.state):
            rows = versions.select(*self.schema.fieldNames())
            options = self._log.writer_options(batch_id, state, read_version=recorded.version, **extra)
            with self._log.committing(recorded.version, step):
                append_to_table(rows, self.path, options)
            metrics = commit_metrics(self.spark, self.path, recorded.version + 1)
            return int(metrics.get("numOutputRows", 0))
        low, high = (F.lit(from_micros(us)) for us in times_us)
        condition = F.expr(
            self._same_version_condition() + f" AND t.{SEGMENT_COL} = {PENDING_SEGMENT}"
        ) & F.col(f"t.{VALID_FROM}").between(low, high)
        return self._merge(
            versions, condition, batch_id, recorded.version, state, extra, step, drop_expired=False
        )[0]

    @names_missing_files
    def seal(self) -> SealResult:
        """Move the pending versions into their validTo segments, in one MERGE commit (none when nothing
        is pending). Reads before and after are the same.

        The pending versions are spliced into the sealed versions of their keys like a batch used to be
        (:func:`_plan.resolve_versions`): only the latest versions and the segments pending versions can
        change are read (from that of ``stream_time - R`` at the previous seal on), their bounds only,
        semi-joined with the pending keys; each pending row is deleted and its version inserted into its
        segment (or replaces the sealed version at its ``valid_from``), each sealed version whose
        ``valid_to`` moves is updated, and a version already expired now (``valid_to <= stream_time - R``)
        is not written (a stored one is deleted). The cost grows with the live keys, once per seal rather
        than once per batch. The seal also counts the live keys it read (the latest versions' rows), which
        the seal policy of ``put_all`` weighs the pending rows against. Fails with ``ConcurrentWriteError``,
        writing nothing, if another writer committed after the seal read the store.

        The MERGE replaces the latest versions it moves by deletion vectors; once those delete as many rows
        as the latest versions' files hold, the seal rewrites those files (a second commit, an OPTIMIZE of
        that partition: ``SealResult.purged``), so reads of the latest versions never scan more than twice
        the live keys.
        """
        self._check_writable(maintenance=True)
        recorded = self._log.read()
        if not has_pending(recorded.state):
            return SealResult(0)
        keys, values = self.settings.keys, self.settings.values
        pending = self._snapshot(recorded.version).where(F.col(SEGMENT_COL) == F.lit(PENDING_SEGMENT))
        incoming = pending.select(*keys, VALID_FROM, TOMBSTONE, *values, F.lit(0).alias(ORDER_COL))
        # One more source row per pending row: it matches that row only and deletes it.
        unpend = pending.select(*keys, VALID_FROM, F.lit(True).alias(_UNPEND))
        stream_time_us = _stream_time_of(recorded)
        assert stream_time_us is not None  # pending rows were accepted, so stream time is set
        state = {
            **recorded.state,
            _SEALED_WRITES: int(recorded.state.get(_PENDING_WRITES, 0)),
            _SEAL_STREAM_TIME: stream_time_us,
            _SEALED_ROWS: int(recorded.state.get(_PENDING_ROWS, 0)),
            _LIVE_KEYS: self._live_keys(recorded.version),
        }
        first = self._region_from(recorded.state)
        extra = {"operation": SEAL_OPERATION}
        rows, _ = self._merge_sealed(incoming, unpend, first, recorded.version, state, None, extra, "seal")
        return SealResult(rows, purged=self._purge_latest(recorded.version + 1))

    def _merge_sealed(
        self,
        incoming: DataFrame,
        unpend: DataFrame | None,
        first_segment: int | None,
        read_version: int,
        state: Mapping[str, Any],
        batch_id: int | None,
        extra: Mapping[str, Any],
        step: str,
    ) -> tuple[int, DataFrame]:
        """Splice ``incoming`` versions (:func:`_plan.accepted_records`) into the sealed versions of their
        keys with one MERGE (:meth:`_merge`); ``unpend``: pending rows to delete in the same commit.

        Only the latest versions and the segments from ``first_segment`` on (every one when None) are
        read: the caller knows no version ending before that can change. Returns the MERGE's rows and its
        checkpointed source.
        """
        keys, values = self.settings.keys, self.settings.values
        segment = F.col(SEGMENT_COL)
        sealed = segment.isNull() | (segment < F.lit(PENDING_SEGMENT))
        if first_segment is not None:
            sealed = sealed & (segment.isNull() | (segment >= F.lit(first_segment)))
        existing = (
            self._snapshot(read_version)
            .where(sealed)
            .select(*keys, VALID_FROM, VALID_TO)
            .join(incoming.select(*keys), on=list(keys), how="left_semi")
        )
        resolved = _plan.resolve_versions(existing, incoming, keys, values, self.settings.interval_us)
        source = resolved.withColumn(_UNPEND, F.lit(False))
        if unpend is not None:
            source = source.unionByName(unpend, allowMissingColumns=True)
        horizon_us = int(state[_STREAM_TIME]) - self.settings.retention_us
        # Every partition this commit writes is at or above it (see LOWEST_SEGMENT).
        lowest = segment_of(horizon_us, self.settings.interval_us)
        bound = ""
        if first_segment is not None:
            lowest = max(lowest, first_segment)
            bound = f" AND (t.{SEGMENT_COL} IS NULL OR t.{SEGMENT_COL} >= {first_segment})"
        condition = (
            self._same_version_condition()
            + bound
            + f" AND (CASE WHEN s.{_UNPEND} THEN t.{SEGMENT_COL} = {PENDING_SEGMENT}"
            + f" ELSE t.{SEGMENT_COL} IS NULL OR t.{SEGMENT_COL} < {PENDING_SEGMENT} END)"
        )
        extra = {**extra, LOWEST_SEGMENT: lowest}
        return self._merge(source, condition, batch_id, read_version, state, extra, step)

    def _same_version_condition(self) -> str:
        """MERGE condition: target and source rows are the same version (key and ``valid_from``)."""
        same = [f"t.`{k}` = s.`{k}`" for k in self.settings.keys]
        return " AND ".join([*same, f"t.{VALID_FROM} = s.{VALID_FROM}"])

    def _merge(
        self,
        source: DataFrame,
        condition: str | Column,
        batch_id: int | None,
        read_version: int,
        state: Mapping[str, Any],
        extra: Mapping[str, Any],
        step: str,
        drop_expired: bool = True,
    ) -> tuple[int, DataFrame]:
        """One MERGE of resolved versions (:func:`_plan.resolve_versions`) into the rows ``condition``
        matches; returns the rows it inserted, updated or deleted, and the checkpointed source.

        An incoming version updates the row it matches (every column) or is inserted; a stored version
        (not incoming) has its ``valid_to`` and ``segment`` updated; with ``drop_expired``, a version
        expired at the commit (``valid_to <= stream_time - R``, the committed stream time) is deleted or
        not inserted; a source row flagged ``_lh_unpend`` deletes the pending row it matches. The source
        is checkpointed once, so Delta's passes over it see one result and need not materialize it again;
        the MERGE runs in a session of its own carrying the commit's txn and metadata
        (:meth:`CommitLog.session`), and commits only on ``read_version`` (the fence).
        """
        keys, values = self.settings.keys, self.settings.values
        checkpointed = source.localCheckpoint(eager=True)
        horizon_us = int(state[_STREAM_TIME]) - self.settings.retention_us
        expired = f"s.{VALID_TO} IS NOT NULL AND unix_micros(s.{VALID_TO}) <= {horizon_us}"
        expired = expired if drop_expired else "FALSE"
        unpend = f"s.{_UNPEND}" if _UNPEND in checkpointed.columns else "FALSE"
        every_column = {f"`{c}`": f"s.`{c}`" for c in (*keys, *_plan.SYSTEM_COLUMNS, *values)}
        bounds_only = {VALID_TO: f"s.{VALID_TO}", SEGMENT_COL: f"s.{SEGMENT_COL}"}
        session = self._log.session(
            batch_id, state, {_MATERIALIZE_SOURCE: "none"}, read_version=read_version, **extra
        )
        with self._log.committing(read_version, step):
            merged = (
                DeltaTable.forPath(session, self.path)
                .alias("t")
                .merge(checkpointed.alias("s"), condition)
                .whenMatchedDelete(condition=f"{unpend} OR ({expired})")
                .whenMatchedUpdate(condition=f"s.{_plan.INCOMING_FLAG}", set=every_column)
                .whenMatchedUpdate(set=bounds_only)
                .whenNotMatchedInsert(condition=f"NOT {unpend} AND NOT ({expired})", values=every_column)
                .execute()
                .first()
            )
        return (0 if merged is None else int(merged["num_affected_rows"])), checkpointed

    def _snapshot(self, version: int) -> DataFrame:
        """The table's physical rows at ``version``."""
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.path)

    def _live_keys(self, version: int) -> int:
        """The live keys at ``version``: the rows of its latest versions (segment NULL), by the files'
        statistics (counted when a file has none)."""
        counted = partition_rows(self.spark, self.path, version, SEGMENT_COL)
        if counted is None:
            return self._snapshot(version).where(F.col(SEGMENT_COL).isNull()).count()
        return counted.rows

    def _purge_latest(self, version: int) -> bool:
        """Rewrite the files of the latest versions (segment NULL) at ``version`` once the rows their deletion
        vectors delete reach the rows they hold; returns whether it did.

        Each seal deletes, by deletion vector, the replaced latest version of every key it moves and
        writes the new one, so without a compaction the files every read of the latest versions scans grow
        by the keys each seal moves. This bounds them to twice the live keys, at one rewrite of them every
        so many seals (about ten under the default seal policy): one OPTIMIZE commit (no data change).
        Left for a later seal when it loses a race with another writer."""
        counted = partition_rows(self.spark, self.path, version, SEGMENT_COL)
        if counted is None or counted.deleted < max(counted.rows, 1) * _PURGE_DELETED_PER_LIVE_ROW:
            return False
        try:
            delta_ops.compact(self.spark, self.path, where=f"{SEGMENT_COL} IS NULL")
        except CONFLICTS:
            return False
        return True

    def _replayed(self, batch_id: int, recorded: Recorded, prepared: DataFrame) -> PutAllResult:
        """The result of a committed batch, from its commit (counts 0 once it left the retained log).

        The replayed input (``prepared``) is compared with the commit's fingerprint when it has one (one
        aggregate job): a difference is reported with a ``ReplayMismatchWarning``; nothing is written.
        """
        found = self._log.batch_commit(batch_id)
        meta = found[1] if found else {}
        if INPUT_FINGERPRINT in meta:
            replayed = _plan.input_summary(prepared, self.settings.keys, self.settings.values).first()
            assert replayed is not None  # a global aggregate has one row
            self._log.check_replay(batch_id, meta, replayed.asDict())
        stream_time = meta.get(_STREAM_TIME) if found else _stream_time_of(recorded)
        return PutAllResult(
            batch_id,
            int(meta.get("records", 0)),
            int(meta.get("dropped", 0)),
            0,
            from_micros_or_none(stream_time),
            replayed=True,
        )

    # ------------------------------------------------------------------ reads
    @names_missing_files
    def get(self, key: Any, as_of: datetime | None = None) -> VersionedRecord | None:
        """The latest version of ``key`` (``as_of`` None), or the version valid at ``as_of`` (inclusive).

        None when the key is absent or the version found is a tombstone. An expired read
        (``as_of < stream_time - R``) is answered only by the latest version, if it is not a tombstone and
        ``valid_from <= as_of``; otherwise None even if older versions still exist physically.
        ``valid_to`` is set only for versions that are not the latest.
        """
        if as_of is None:
            rows = self.table().where(self._key_condition(key) & F.col(VALID_TO).isNull())
        else:
            rows = self.as_of(as_of, include_tombstones=True).where(self._key_condition(key))
        found = rows.select(
            F.struct(*self.settings.values).alias("value"),
            TOMBSTONE,
            F.unix_micros(VALID_FROM).alias("from_us"),
            F.unix_micros(VALID_TO).alias("to_us"),
        ).first()
        if found is None or found[TOMBSTONE]:
            return None
        return VersionedRecord(
            found["value"].asDict(), from_micros(found["from_us"]), from_micros_or_none(found["to_us"])
        )

    def as_of(self, t: datetime, include_tombstones: bool = False) -> DataFrame:
        """Every key's version valid at ``t`` (``valid_from <= t < valid_to``), as a DataFrame.

        Reads only the segments that can hold ``valid_to > t`` plus the latest segment. An expired ``t``
        (``< stream_time - R``) is answered by latest versions only, as in :meth:`get`. Tombstones are
        left out unless ``include_tombstones``.
        """
        t_us = micros(t)
        at = timestamp_lit(t_us)
        valid = (F.col(VALID_FROM) <= at) & (F.col(VALID_TO).isNull() | (F.col(VALID_TO) > at))
        recorded = self._log.read()
        if self._is_expired(t_us, _stream_time_of(recorded)):
            valid = valid & F.col(VALID_TO).isNull()
        versions = self._versions(recorded.version, recorded.state)
        rows = versions.where(segments_from(t_us, self.settings.interval_us)).where(valid)
        return rows if include_tombstones else rows.where(~F.col(TOMBSTONE))

    def history(self, key: Any = None) -> DataFrame:
        """Stored versions (of ``key``, or all), tombstones included, ordered by key and ``valid_from``.

        Versions with ``valid_to`` at or before ``stream_time - R`` answer no read: those expired when
        a seal committed are not stored, and :meth:`expire` may remove the others.
        """
        rows = self.table() if key is None else self.table().where(self._key_condition(key))
        return rows.orderBy(*self.settings.keys, VALID_FROM)

    def versions_sql(self) -> str:
        """Spark SQL of the store's :meth:`versions` at each query, over its Delta path: the one portable
        definition (:func:`~lakehouse.versioned.pending.versions_sql`), its region bounded by the oldest
        pending ``valid_from``. ``lakehouse.read.store(path).sql()`` gives the same for other engines."""
        table = table_reference(self.path)
        interval_us = self.settings.interval_us
        region_from = oldest_pending_segment_sql(table, interval_us)
        return versions_sql(table, self.schema.fieldNames(), self.settings.keys, interval_us, region_from)

    def register(self, name: str, temporary: bool = True) -> None:
        """Make the store queryable by SQL: the table ``name`` and the table function ``<name>_as_of(t)``.

        ``name`` is the view of the store's :meth:`versions` (tombstones included) at each query, pending
        versions resolved: a temporary view, or with ``temporary=False`` a catalog view (not a table over
        the path, which would show pending rows unresolved).
        ``<name>_as_of(t TIMESTAMP)`` is a temporary SQL table function returning every key's version valid
        at ``t`` (``valid_from <= t < valid_to``, tombstones left out) with the expired-read rule of
        :meth:`as_of` for the stream time the store has when ``register`` is called: a ``t`` older than
        that stream time minus the history retention is answered by latest versions only. It reads only
        the segments that can hold ``valid_to > t``, like :meth:`as_of`.

        Raises:
            InvalidInputError: ``name`` is not an SQL identifier.
            StoreSettingsConflictError: a managed table already has the name.
        """
        delta_ops.register_view(self.spark, name, self.versions_sql(), temporary=temporary)
        columns = [*self.settings.keys, *self.settings.values]
        returns = ", ".join(
            f"`{f.name}` {f.dataType.simpleString()}" for f in self.schema.fields if f.name in columns
        )
        stream_time_us = self._stream_time_us()
        expired = (
            "FALSE"
            if stream_time_us is None
            else f"unix_micros(t) < {stream_time_us - self.settings.retention_us}"
        )
        function = f"{name}_as_of"
        self.spark.sql(
            f"CREATE OR REPLACE TEMPORARY FUNCTION {function}(t TIMESTAMP) "
            f"RETURNS TABLE ({returns}, {VALID_FROM} TIMESTAMP, {VALID_TO} TIMESTAMP) RETURN "
            f"SELECT {', '.join(f'`{c}`' for c in columns)}, {VALID_FROM}, {VALID_TO} FROM {name} "
            f"WHERE ({SEGMENT_COL} IS NULL OR {SEGMENT_COL} >= floor(unix_micros(t) / "
            f"{self.settings.interval_us})) AND {VALID_FROM} <= t AND ({VALID_TO} IS NULL OR {VALID_TO} > t) "
            f"AND NOT {TOMBSTONE} AND (NOT ({expired}) OR {VALID_TO} IS NULL)"
        )

    # ------------------------------------------------------------------ retention
    def expire(self) -> ExpireResult:
        """Drop every segment whose versions all have ``valid_to < stream_time - R``.

        A DELETE on the partition column alone: Delta removes whole files from its log without reading
        them (one commit, or none when nothing is expired). Reads inside retention are unchanged.
        """
        self._check_writable()
        recorded = self._log.read()
        stream_time_us = _stream_time_of(recorded)
        if stream_time_us is None:
            return ExpireResult(None, 0, 0)
        first_live = first_live_segment(stream_time_us, self.settings.retention_us, self.settings.interval_us)
        metrics = delta_ops.drop_partitions_below(self._log, SEGMENT_COL, first_live, recorded.state)
        return ExpireResult(
            first_live, int(metrics.get("numRemovedFiles", 0)), int(metrics.get("numDeletedRows", 0))
        )

    def vacuum(self) -> int:
        """VACUUM the table with its own ``delta.deletedFileRetentionDuration``; returns files deleted.

        Files that a registered replica (``lakehouse.Replica``) within its ``max_lag`` still needs to catch
        up are kept; see :func:`lakehouse.replica.vacuum_source`. Delta's VACUUM commits record the store's
        state like every other commit of the store.
        """
        self._check_writable(maintenance=True)
        # Imported here: the replica package reads the stores' settings and app ids.
        from lakehouse.replica.registry import vacuum_source

        session = self._log.session(None, self._log.read().state, operation=VACUUM_OPERATION)
        return vacuum_source(session, self.path).files_deleted

    def maintaining_replica(self) -> VersionedStore:
        """This handle, allowed to :meth:`seal` and :meth:`vacuum` its table even if it is a replica's: a
        shard replica (``lakehouse.Replica``) lays out its source's versions itself and maintains them on its
        own schedule (neither changes a read). ``put``, ``put_all`` and ``expire`` stay refused on a replica
        (``ReadOnlyReplicaError``): only the replica's sync changes what it holds."""
        self._maintains_replica = True
        return self

    def _check_writable(self, maintenance: bool = False) -> None:
        """Raise ``ReadOnlyReplicaError`` on a replica's table (checked once per store object), unless
        ``maintenance`` (a seal, a VACUUM) through a handle :meth:`maintaining_replica`."""
        if maintenance and self._maintains_replica:
            return
        if not self._writable:
            delta_ops.refuse_replica_writes(self.spark, self.path)
            self._writable = True

    # ------------------------------------------------------------------ helpers
    def _key_dict(self, key: Any) -> dict[str, Any]:
        keys = self.settings.keys
        if isinstance(key, Mapping):
            if set(key) != set(keys):
                raise InvalidInputError(f"key must name the columns {list(keys)}, got {sorted(key)}")
            found = dict(key)
        elif len(keys) == 1:
            found = {keys[0]: key}
        elif isinstance(key, tuple) and len(key) == len(keys):
            found = dict(zip(keys, key, strict=True))
        else:
            raise InvalidInputError(f"key must be a tuple or dict of {list(keys)}, got {key!r}")
        if any(v is None for v in found.values()):
            raise InvalidInputError(f"null key {found}")
        return found

    def _value_dict(self, value: Any) -> dict[str, Any]:
        values = self.settings.values
        if value is None:
            return dict.fromkeys(values)
        if isinstance(value, Mapping):
            unknown = set(value) - set(values)
            if unknown:
                raise InvalidInputError(
                    f"unknown value columns {sorted(unknown)}; the store has {list(values)}"
                )
            return {v: value.get(v) for v in values}
        if len(values) == 1:
            return {values[0]: value}
        raise InvalidInputError(f"value must be a dict of {list(values)}, got {value!r}")

    def _key_condition(self, key: Any) -> Column:
        condition = F.lit(True)
        for column, value in self._key_dict(key).items():
            condition = condition & (F.col(column) == F.lit(value))
        return condition

    def _one_record_frame(self, record: dict[str, Any], t_us: int) -> DataFrame:
        fields = [self.schema[c] for c in (*self.settings.keys, *self.settings.values)]
        frame_schema = T.StructType([*fields, T.StructField(_SINGLE_PUT_SEQUENCE, T.LongType())])
        row = (*tuple(record[f.name] for f in fields), t_us)
        frame = self.spark.createDataFrame([row], frame_schema)
        return frame.withColumn("timestamp", F.timestamp_micros(_SINGLE_PUT_SEQUENCE))

    def _tombstone_condition(self, df: DataFrame, deletes: Column | str | None) -> Column:
        """True for the records of ``df`` that are tombstones (default: every value column NULL).

        Raises:
            InvalidInputError: ``deletes`` does not resolve over ``df`` as a BOOLEAN (one line).
        """
        if deletes is None:
            condition = F.lit(True)
            for value in self.settings.values:
                condition = condition & F.col(value).isNull()
            return condition
        try:
            condition = F.expr(deletes) if isinstance(deletes, str) else deletes
            data_type = df.select(condition.alias("deletes")).schema["deletes"].dataType
        except AnalysisException as error:  # a parse error is one too
            reason = f"is not a condition over the batch: {first_line(error)}"
            raise InvalidInputError(f"deletes={deletes!r} {reason}") from None
        if not isinstance(data_type, T.BooleanType):
            reason = f"is {data_type.simpleString()}, not a boolean condition"
            raise InvalidInputError(f"deletes={deletes!r} {reason}")
        return F.coalesce(condition, F.lit(False))

    def _check_frame(self, df: DataFrame, timestamp: str, sequence_by: str | None) -> None:
        expected = T.StructType(
            [self.schema[c] for c in (*self.settings.keys, *self.settings.values)]
            + [T.StructField(timestamp, T.TimestampType())]
        )
        require_columns(df.schema, expected, "put_all batch")
        require_order_columns(df, sequence_by)


def _require_safe_file_retention(spark: SparkSession, file_retention: timedelta) -> None:
    """Refuse what Delta's VACUUM refuses: a retention under its threshold without the session's opt-out."""
    if file_retention < timedelta(0):
        raise InvalidInputError(f"file_retention must be >= 0, got {file_retention}")
    if file_retention >= _DELTA_SAFE_FILE_RETENTION:
        return
    if spark.conf.get(_RETENTION_CHECK, "true").strip().lower() == "false":
        return
    raise InvalidInputError(
        f"file_retention {file_retention} is under Delta's safety threshold ({_DELTA_SAFE_FILE_RETENTION}): "
        "VACUUM could delete files a running reader or writer still needs; set "
        f"{_RETENTION_CHECK}=false to allow it"
    )


@dataclass(frozen=True)
class _Written:
    """A committed batch: its result, the MERGE source when it went straight into its segments, and the
    state its commit recorded."""

    result: PutAllResult
    source: DataFrame | None
    state: Mapping[str, Any]


def _reject_nulls(stats: Any) -> None:
    for column, what in (
        ("null_keys", "key"),
        ("null_timestamps", "timestamp"),
        ("null_order", "order column"),
    ):
        if stats[column]:
            raise InvalidInputError(f"{stats[column]} record(s) with a null {what}: nothing was written")


def pending_tier_appended(state: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`PENDING_TIER_FIELDS` of a commit that appends pending rows to a store whose pending tier
    is ``state``'s (one more commit with pending rows)."""
    tier = {field: state.get(field) for field in PENDING_TIER_FIELDS}
    tier[_PENDING_WRITES] = max(int(state.get(_PENDING_WRITES) or 0), int(state.get(_SEALED_WRITES) or 0)) + 1
    return tier


def pending_tier_sealed(state: Mapping[str, Any], stream_time_us: int | None) -> dict[str, Any]:
    """The :data:`PENDING_TIER_FIELDS` of a store whose pending tier was ``state``'s and that now holds
    nothing pending, sealed at ``stream_time_us`` (every later put is at or after it minus the retention).
    The counters only grow, and so does the seal's stream time."""
    writes = max(int(state.get(_PENDING_WRITES) or 0), int(state.get(_SEALED_WRITES) or 0))
    sealed_at = [int(v) for v in (state.get(_SEAL_STREAM_TIME), stream_time_us) if v is not None]
    return {
        _PENDING_WRITES: writes,
        _SEALED_WRITES: writes,
        _SEAL_STREAM_TIME: max(sealed_at) if sealed_at else None,
    }


def has_pending(state: Mapping[str, Any]) -> bool:
    """Whether the pending partition may hold rows: a commit appended some after the newest seal."""
    return _pending_commits(state) > 0


def _pending_commits(state: Mapping[str, Any]) -> int:
    """The commits that appended pending rows after the newest seal (the state's counters)."""
    return max(0, int(state.get(_PENDING_WRITES, 0)) - int(state.get(_SEALED_WRITES, 0)))


def _stream_time_of(recorded: Recorded) -> int | None:
    found = recorded.state.get(_STREAM_TIME)
    return None if found is None else int(found)


def _max_or_none(current: int | None, candidate: int | None) -> int | None:
    values = [v for v in (current, candidate) if v is not None]
    return max(values) if values else None
