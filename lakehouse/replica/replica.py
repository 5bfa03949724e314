"""``Replica``: a standby copy of one task's share of a state table, kept current from its Delta changelog.

Semantics (Kafka Streams' standby tasks, seed 003; offsets are Delta versions):

- The **changelog** of a source table (a versioned store or a dedup seen-ID index) is its Delta log: each
  commit version is an offset, and the Change Data Feed gives the commit's rows. A replica holds the rows
  of one :class:`Shard` (a task's share by key hash), or all rows, at another path.
- The **checkpoint** is the last applied source version. It is the ``txnVersion`` of the replica's own
  commit (``txnAppId = lakehouse.replica:<source table id>``), so it is stored atomically with the rows it
  describes, survives log cleanup, and a commit of an already applied version is skipped by Delta.
- ``sync(limit)`` applies versions ``checkpoint + 1 .. min(limit, latest)`` (both inclusive; ``limit``
  is seed 003's offset limit, default the latest): one commit for the range, plus one per source partition
  drop in it (versioned-store expiry, dedup purge: a metadata-only partition drop at its own version), so
  every replica commit stands for the source at one version.
- A replica of one shard of a **versioned store** follows its **logical changelog**
  (:mod:`lakehouse.replica._logical`): the versions each batch wrote go into the replica's own pending
  partition (an append, or a MERGE confined to it); seals, ``OPTIMIZE`` and ``VACUUM`` change no read and
  are skipped (the checkpoint moves on, no row is copied); the replica seals, compacts and vacuums itself
  (:meth:`Replica.seal`, :meth:`Replica.maintain`). Its contract is **read equality**: opened as a store
  (``VersionedStore.open``) it reads, at the checkpoint, what the source read then (its versions of the
  shard, its stream time and last batch ids), however differently the two store them.
- A replica of one shard of a **dedup index** applies per row its last change in the range (one MERGE; a
  plain append when the range only inserts): its rows equal ``source VERSION AS OF checkpoint`` in the
  shard. A replica of the whole table (``shard=None``) holds copies of the source's data files instead,
  and replays the range's file actions (:mod:`lakehouse.replica._files`): its cost follows the files the
  range touched, not the rows of the partitions it rewrote, and its rows equal the source's.
- Every replica commit records the source's stream time and last batch ids at its version: opening the
  replica as a store (``VersionedStore.open``/``Deduplicator.open``) reads as the source did then.
- A checkpoint the source no longer covers (log cleaned up, files vacuumed, Change Data Feed off), a
  source replaced by another table, or a replica written by someone else: the replica is **wiped and
  re-initialized** from the source's latest snapshot, with a :class:`ReplicaReinitializedWarning`
  (Kafka's ``InvalidOffsetException`` / ``TaskCorruptedException``). Never silently wrong.
- A replica is **read-only**: the stores refuse writes to it (``ReadOnlyReplicaError``).
- A killed or failed sync leaves the last commit as it was; running it again yields the same replica.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.commit_log import (
    CommitLog,
    append_if,
    append_to_table,
    commit_file_actions,
    commit_infos,
    latest_snapshot,
    one_log_listing,
    parse_metadata,
    recorded_txn,
    snapshot_files,
    snapshot_schema,
)
from lakehouse.errors import InvalidInputError, first_line
from lakehouse.jvm import jvm_class
from lakehouse.paths import resolve_path
from lakehouse.replica import _changes, _files, _history, _logical
from lakehouse.replica._source import Shard, SourceKind, source_kind
from lakehouse.replica.errors import ChangeDataFeedDisabledError, NotAReplicaError
from lakehouse.replica.records import ReplicaLag, SyncResult
from lakehouse.replica.registry import file_retention_hours, register, registered, unregister
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.records import SealResult
from lakehouse.versioned.store import (
    LOWEST_SEGMENT,
    PENDING_TIER_FIELDS,
    READ_NEUTRAL_OPERATIONS,
    VersionedStore,
    has_pending,
    pending_tier_appended,
    pending_tier_sealed,
)
from lakehouse.versioned.store import STATE_FIELDS as STORE_STATE_FIELDS

APP_ID = "lakehouse.replica"
SOURCE_ID_PROPERTY = f"{delta_ops.PROPERTY_PREFIX}replica.source_id"
SHARD_PROPERTY = f"{delta_ops.PROPERTY_PREFIX}replica.shard"
CDF_PROPERTY = "delta.enableChangeDataFeed"
# Features whose data files only the table's own metadata reads right: column mapping (physical column
# names) and type widening (files written before a column's type was widened).
COLUMN_MAPPING_PROPERTY = "delta.columnMapping.mode"
TYPE_WIDENING_PROPERTY = "delta.enableTypeWidening"
DEFAULT_MAX_LAG = timedelta(days=7)
# Operations on a replica that change no rows; any other commit must be the replica's own.
_MAINTENANCE = {"VACUUM START", "VACUUM END", "OPTIMIZE", "ADD COLUMNS", "SET TBLPROPERTIES", "CREATE TABLE"}
# Errors of a read whose changes are gone (vacuumed files, cleaned-up log, CDF off for a version).
_MISSING_CHANGES = (
    "FAILED_READ_FILE.FILE_NOT_EXIST",
    "DELTA_MISSING_CHANGE_DATA",
    "DELTA_VERSION_NOT_FOUND",
    "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
    "DELTA_LOG_FILE_NOT_FOUND",
    "DELTA_FILE_NOT_FOUND",
    "java.io.FileNotFoundException",  # a source file a file-level replica copies
)
_IGNORE_MISSING_FILES = "spark.sql.files.ignoreMissingFiles"
_CONCURRENT_WRITERS = "spark.sql.maxConcurrentOutputFileWriters"
_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
_DELTA_SNAPSHOT_PARTITIONS = 50  # Delta's default of the conf above
# Files of the replica per partition of its Delta state reconstruction (see Replica._state_partitions).
_FILES_PER_STATE_PARTITION = 50_000
# The replica's newest commits read first when looking for its last own commit (the newest one first, then
# these, then all of them if needed).
_RECENT_COMMITS = 20
# A replica's delta.checkpointInterval: its syncs seldom pay a checkpoint (a Spark job writing the whole
# file list); its maintain writes one every CHECKPOINT_EVERY commits (lakehouse.pipeline.due).
_SYNC_CHECKPOINT_INTERVAL = 100
_STREAM_TIME = STORE_STATE_FIELDS[0]


class ReplicaReinitializedWarning(UserWarning):
    """A replica was wiped and rebuilt because its checkpoint could no longer be caught up from."""


class Replica:
    """A read-only copy of one shard of a versioned store or dedup index; see :meth:`create`, :meth:`open`."""

    def __init__(
        self, spark: SparkSession, source_path: str, path: str, shard: Shard | None, source_id: str
    ) -> None:
        self.spark = spark
        self.source_path = source_path
        self.path = path
        self.shard = shard
        self.source_id = source_id
        #: Called with a step name after each replica commit of ``sync``; crash-injection tests raise here.
        self._after_commit: Any = lambda step: None
        #: The source's newest metadata as last read: its JSON, the metadata and the kind it makes.
        self._source: tuple[str, delta_ops.TableMetadata, SourceKind] | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        spark: SparkSession,
        source_path: str,
        replica_path: str,
        shard: Shard | tuple[int, int] | None = None,
        *,
        max_lag: timedelta = DEFAULT_MAX_LAG,
        enable_change_data_feed: bool = False,
    ) -> Replica:
        """Create an empty replica of ``shard`` of the table at ``source_path`` (or open the existing one).

        The replica holds nothing until its first :meth:`sync` (which restores it). It is registered with
        the source, so the source's replica-aware VACUUM keeps the changes it needs while it is at most
        ``max_lag`` behind.

        Args:
            shard: ``Shard(partition, partitions)`` or ``(partition, partitions)``; None: the whole table.
            max_lag: How far behind (in source commit time) the source keeps this replica's changes.
            enable_change_data_feed: Turn the source's Change Data Feed on if it is off (one source commit;
                only later changes are recorded). Otherwise a source without it is refused.

        Raises:
            ChangeDataFeedDisabledError: the source does not record its changes.
            InvalidInputError: the source is not a versioned store or dedup index; a bad shard.
            NotAReplicaError: ``replica_path`` holds another table (not a replica of this shard).
        """
        shard = Shard(*shard) if isinstance(shard, tuple) else shard
        source_path, replica_path = resolve_path(source_path), resolve_path(replica_path)
        if max_lag < timedelta(0):
            raise InvalidInputError(f"max_lag must be >= 0, got {max_lag}")
        metadata = delta_ops.table_metadata(spark, source_path)
        properties = dict(metadata.properties)
        kind = source_kind(source_path, properties)
        if shard is None:
            _require_file_level(source_path, properties)
        if properties.get(CDF_PROPERTY) != "true":
            if not enable_change_data_feed:
                raise ChangeDataFeedDisabledError(source_path)
            spark.sql(f"ALTER TABLE delta.`{source_path}` SET TBLPROPERTIES ({CDF_PROPERTY} = true)")
        if DeltaTable.isDeltaTable(spark, replica_path):
            replica = cls.open(spark, replica_path)
            if replica.source_path != source_path or replica.shard != shard:
                raise NotAReplicaError(
                    replica_path, f"it replicates {replica.source_path} shard {replica.shard}, not {shard}"
                )
        else:
            replica = cls(spark, source_path, replica_path, shard, metadata.id)
            replica._create_table(kind, properties, metadata.partition_columns)
        register(spark, source_path, replica_path, str(shard) if shard else "all", max_lag)
        return replica

    @classmethod
    def open(cls, spark: SparkSession, replica_path: str) -> Replica:
        """Open an existing replica; its source and shard are read back from its table properties.

        Raises:
            NotAReplicaError: no Delta table at ``replica_path``, or not a replica.
        """
        replica_path = resolve_path(replica_path)
        if not DeltaTable.isDeltaTable(spark, replica_path):
            raise NotAReplicaError(replica_path, "there is no Delta table there")
        properties = delta_ops.table_properties(spark, replica_path)
        source = properties.get(delta_ops.REPLICA_SOURCE_PROPERTY)
        if source is None:
            raise NotAReplicaError(
                replica_path, "the table is not a replica (no lakehouse.replica.* properties)"
            )
        shard_text = properties[SHARD_PROPERTY]
        shard = None if shard_text == "all" else Shard.parse(shard_text)
        return cls(spark, source, replica_path, shard, properties[SOURCE_ID_PROPERTY])

    def _create_table(
        self, kind: SourceKind, properties: dict[str, str], partitions: tuple[str, ...]
    ) -> None:
        own = {k: v for k, v in properties.items() if k.startswith(delta_ops.PROPERTY_PREFIX)}
        own.update(
            {
                delta_ops.REPLICA_SOURCE_PROPERTY: self.source_path,
                SOURCE_ID_PROPERTY: self.source_id,
                SHARD_PROPERTY: str(self.shard) if self.shard else "all",
                "delta.enableDeletionVectors": "true",
            }
        )
        schema = self.spark.read.format("delta").load(self.source_path).schema
        checkpoints = {"delta.checkpointInterval": str(_SYNC_CHECKPOINT_INTERVAL)}
        delta_ops.ensure_table(
            self.spark, self.path, schema, partition_by=partitions, properties=own, created_with=checkpoints
        )

    def unregister(self) -> None:
        """Stop the source's VACUUM from keeping changes for this replica (the replica stays as it is)."""
        unregister(self.spark, self.source_path, self.path)

    # ------------------------------------------------------------------ state
    def table(self) -> DataFrame:
        """The replica's rows as they are now (the source's shard at :meth:`checkpoint`)."""
        return self.spark.read.format("delta").load(self.path)

    def checkpoint(self) -> int | None:
        """The last applied source version (None: nothing applied yet), from the replica's Delta state.

        The ``SetTransaction`` of the replica's newest snapshot, read from its checksum (no Spark job, see
        :func:`lakehouse.commit_log.recorded_txn`).
        """
        return recorded_txn(self.spark, latest_snapshot(self.spark, self.path), self._txn_app())

    def _txn_app(self, source_id: str | None = None) -> str:
        return f"{APP_ID}:{source_id or self.source_id}"

    def versions_behind(self) -> int | None:
        """Source versions not applied yet; None when the replica holds nothing it can catch up from.

        None: no checkpoint, a replaced source, or a checkpoint the source no longer covers (the next sync
        restores). Reads commit metadata only (no table rows): the lag the assignor needs.
        """
        latest = self._source_latest()
        checkpoint = self.checkpoint() if self._current_source_id() == self.source_id else None
        if checkpoint is None or checkpoint >= latest:
            return None if checkpoint is None else 0
        commits = _history.source_commits(self.spark, self.source_path, after=checkpoint)
        if self._catch_up_problem(commits, checkpoint, latest) is not None:
            return None
        return latest - checkpoint

    def lag(self) -> ReplicaLag:
        """Versions and rows the replica is behind its source's latest version.

        Rows are counted from the Change Data Feed of the missing versions (a Spark job over the changes,
        not the table): for a shard of a versioned store, the versions its batches wrote that change a read
        (:func:`_logical.written_versions`; seals and drops copy no row); when the replica must restore,
        the shard's rows at the latest version.
        """
        latest = self._source_latest()
        checkpoint = self.checkpoint() if self._current_source_id() == self.source_id else None
        if checkpoint is None:
            return ReplicaLag(None, latest, latest + 1, self._snapshot(latest).count(), False)
        if checkpoint >= latest:
            return ReplicaLag(checkpoint, latest, 0, 0, True)
        commits = _history.source_commits(self.spark, self.source_path, after=checkpoint)
        if self._catch_up_problem(commits, checkpoint, latest) is not None:
            return ReplicaLag(checkpoint, latest, latest - checkpoint, self._snapshot(latest).count(), False)
        if self._logical():
            writes = self._writes(commits, checkpoint, latest)
            rows = 0
            if writes:
                inserts_only = _history.each_inserts_only(commits, writes)
                changes = self._changes_of(writes)
                rows = _logical.written_versions(changes, self._kind().identity, inserts_only).count()
        else:
            changes = self._changes(checkpoint + 1, latest)
            rows = changes.where(F.col(_changes.CHANGE_TYPE) != _changes.PREIMAGE).count()
        return ReplicaLag(checkpoint, latest, latest - checkpoint, rows, True)

    # ------------------------------------------------------------------ sync
    def sync(self, limit: int | None = None) -> SyncResult:
        """Apply the source's versions after the checkpoint up to ``limit`` (inclusive; default: latest).

        One replica commit (plus one per source partition drop in the range). A replica without a
        checkpoint is restored; one whose checkpoint the source no longer covers is re-initialized with a
        :class:`ReplicaReinitializedWarning`. ``limit`` beyond the latest version means the latest; a
        ``limit`` at or below the checkpoint applies nothing.

        Raises:
            InvalidInputError: a negative ``limit``; or the replica must be rebuilt at ``limit`` and the
                source's data files of that version were vacuumed (nothing is written then).
        """
        with one_log_listing():  # the source's and the replica's logs listed once each (the sync's start)
            return self._sync(limit)

    def _sync(self, limit: int | None) -> SyncResult:
        started = time.monotonic()
        target = self._target(limit)
        before = self.checkpoint()
        problem = self._replica_problem(before)
        if before is None or problem is not None:
            # A checkpoint never goes back, unless the source was replaced (its versions restart).
            same_source = self._current_source_id() == self.source_id
            at = max(target, before) if same_source and before is not None else target
            return self._rebuild(at, before, problem, started)
        if before >= target:
            return SyncResult(before, before, 0, 0, 0, 0, False, None, time.monotonic() - started)
        commits = _history.source_commits(self.spark, self.source_path, after=before)
        problem = self._catch_up_problem(commits, before, target)
        if problem is not None:
            return self._rebuild(target, before, problem, started)
        try:
            rows, drops, commits_written = self._apply(commits, before, target)
        except Exception as error:
            if not _missing_changes(error):
                raise
            reason = f"the source's changes after version {before} are gone ({first_line(error)})"
            return self._rebuild(target, self.checkpoint(), reason, started)
        return SyncResult(
            before,
            target,
            target - before,
            rows,
            drops,
            commits_written,
            False,
            None,
            time.monotonic() - started,
        )

    def restore(self, limit: int | None = None) -> SyncResult:
        """Build the replica from nothing: the source's shard at ``limit`` (default: latest), in one commit.

        A replica with a checkpoint is rebuilt at ``max(limit, checkpoint)`` (a checkpoint never goes back).
        """
        started = time.monotonic()
        before = self.checkpoint()
        target = self._target(limit)
        return self._rebuild(max(target, before or 0), before, None, started, warn=False)

    # ------------------------------------------------------------------ its own maintenance
    def seal(self) -> SealResult:
        """Seal the replica's own pending versions (:meth:`VersionedStore.seal` on the replica): reads are
        the same before and after. Only a shard replica of a versioned store has a pending tier of its own.

        Raises:
            InvalidInputError: the replica mirrors its source's rows or files (it has nothing of its own
                to seal).
        """
        return self._own_store().seal()

    def maintain(
        self, seal_min_rows: int, optimize_min_files: int, vacuum_interval: timedelta
    ) -> dict[str, str]:
        """Seal, compact (``OPTIMIZE``), VACUUM and checkpoint the replica on the source's due rules
        (:mod:`lakehouse.pipeline.due`, from the replica's own commits); returns each task run or skipped
        with why. A replica that mirrors its source (a whole table's files, a dedup index's rows) does not
        seal: what it holds is already as compact as the source made it. Its syncs leave Delta checkpoints
        to this, as they leave it sealing (a replica is created with a ``delta.checkpointInterval`` of
        :data:`_SYNC_CHECKPOINT_INTERVAL`).
        """
        # Imported here: the pipeline package imports the replica package.
        from lakehouse.history import NewestCommits
        from lakehouse.pipeline.due import checkpoint_due, optimize_due, seal_due, vacuum_due

        done: dict[str, str] = {}
        commits = NewestCommits(self.spark)
        if self._logical():
            store = self._own_store()
            due = seal_due(store.pending_commits(), commits.of(self.path), seal_min_rows)
            done["seal"] = f"{store.seal().rows_written} rows" if due else f"skipped, {due.said}"
        due = optimize_due(commits.of(self.path), optimize_min_files)
        if due:
            delta_ops.compact(self.spark, self.path)
        done["optimize"] = "done" if due else f"skipped, {due.said}"
        retention = timedelta(hours=file_retention_hours(self.spark, self.path))
        due = vacuum_due(commits.of(self.path), retention, vacuum_interval, datetime.now(UTC))
        if due:
            self._vacuum(retention)
        done["vacuum"] = "done" if due else f"skipped, {due.said}"
        snapshot = latest_snapshot(self.spark, self.path)
        checkpointed = int(snapshot.logSegment().checkpointProvider().version())
        due = checkpoint_due(int(snapshot.version()), checkpointed)
        if due:
            snapshot.deltaLog().checkpoint(snapshot, jvm_class(self.spark, "scala.Option").empty())
        done["checkpoint"] = "done" if due else f"skipped, {due.said}"
        return done

    def _own_store(self) -> VersionedStore:
        """The replica as a store that its own maintenance may write (every other write is refused)."""
        if not self._logical():
            raise InvalidInputError(
                f"replica {self.path} mirrors its source's rows or files: only a shard replica of a "
                "versioned store seals itself"
            )
        return VersionedStore.open(self.spark, self.path).maintaining_replica()

    def _vacuum(self, retention: timedelta) -> None:
        """VACUUM the replica with its own retention (a logical replica's VACUUM records its state)."""
        if self._logical():
            self._own_store().vacuum()
        else:
            delta_ops.vacuum(self.spark, self.path, retention.total_seconds() / 3600)

    # ------------------------------------------------------------------ internals
    def _target(self, limit: int | None) -> int:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInputError(f"limit must be a source version >= 0, got {limit!r}")
        latest = self._source_latest()
        return latest if limit is None else min(limit, latest)

    def _source_latest(self) -> int:
        """The source's newest version (its log, no Spark job)."""
        version = int(latest_snapshot(self.spark, self.source_path).version())
        if version < 0:
            raise InvalidInputError(f"the replica's source {self.source_path} is not a Delta table")
        return version

    def _current_source_id(self) -> str:
        """The source table's id now (its newest metadata, which also refreshes what :meth:`_kind` knows)."""
        text = str(latest_snapshot(self.spark, self.source_path).metadata().json())
        if self._source is None or text != self._source[0]:
            metadata = delta_ops.metadata_of(text)
            self._source = (text, metadata, source_kind(self.source_path, dict(metadata.properties)))
        return self._source[1].id

    def _source_metadata(self) -> delta_ops.TableMetadata:
        """The source's metadata as :meth:`_current_source_id` last read it (reading it if never)."""
        if self._source is None:
            self._current_source_id()
        assert self._source is not None
        return self._source[1]

    def _kind(self) -> SourceKind:
        self._source_metadata()
        assert self._source is not None
        return self._source[2]

    def _logical(self) -> bool:
        """Whether the replica follows the source's logical changelog (:mod:`lakehouse.replica._logical`):
        a shard of a versioned store. A dedup index's shard mirrors its rows (its changes are inserts and
        drops, which that is), a whole-table replica its files."""
        return self.shard is not None and self._kind().pending_partition is not None

    def _catch_up_problem(self, commits: list[_history.Commit], checkpoint: int, target: int) -> str | None:
        """Why the versions ``checkpoint + 1 .. target`` cannot be applied (None: they can): the source no
        longer has them (:func:`_history.coverage_problem`), or, for a logical replica, one of them changed
        rows by another writer than the store (its meaning for reads is unknown)."""
        problem = _history.coverage_problem(commits, checkpoint, target)
        if problem is not None or not self._logical():
            return problem
        for commit in commits:
            in_range = checkpoint < commit.version <= target
            if in_range and _history.logical_role(commit, self._kind().app_id) is None:
                return (
                    f"source version {commit.version} ({commit.operation}) is neither a batch, a drop nor a "
                    "read-neutral commit of the store: its effect on reads is unknown"
                )
        return None

    def _writes(self, commits: list[_history.Commit], after: int, last: int) -> list[int]:
        """The source's batch commits (:data:`_history.WRITE`) in ``after + 1 .. last``."""
        app_id = self._kind().app_id
        return [
            c.version
            for c in commits
            if after < c.version <= last and _history.logical_role(c, app_id) == _history.WRITE
        ]

    def _inserted(self, commits: list[_history.Commit], versions: list[int]) -> DataFrame | None:
        """The shard's rows that the source's insert-only commits ``versions`` added
        (:func:`_changes.inserted_rows`, read with the metadata of the source's snapshot at the sync's
        start), or None when a commit after them may have changed the schema (then the Change Data Feed
        reads them with their own version's)."""
        snapshot = latest_snapshot(self.spark, self.source_path)
        if not _history.keeps_schema(commits, max(versions) + 1, int(snapshot.version())):
            return None
        rows = _changes.inserted_rows(self.spark, snapshot, versions)
        return rows.where(self._kind().in_shard(self.shard, rows.schema))

    def _changes_of(self, versions: list[int]) -> DataFrame:
        """The shard's Change Data Feed of the source ``versions`` (one read per run of consecutive ones)."""
        frames = [self._changes(first, last) for first, last in _logical.runs(versions)]
        found = frames[0]
        for frame in frames[1:]:
            found = found.unionByName(frame)
        return found

    def _own_state(self, kind: SourceKind) -> dict[str, Any]:
        """A logical replica's own pending-tier counters and last seal (:data:`PENDING_TIER_FIELDS`), as its
        commits recorded them (0 and None before any), and the source's stream time at its checkpoint."""
        fields = (*PENDING_TIER_FIELDS, _STREAM_TIME)
        state = CommitLog(self.spark, self.path, kind.app_id, fields).state()
        return {field: state.get(field) for field in fields}

    def _replica_problem(self, checkpoint: int | None) -> str | None:
        """Why the replica's rows cannot be trusted (source replaced, foreign write), or None."""
        current = self._current_source_id()
        if current != self.source_id:
            return (
                f"the source at {self.source_path} is another table now (id {current}, was {self.source_id})"
            )
        if checkpoint is None:
            return None
        for limit in (1, _RECENT_COMMITS, None):
            infos = commit_infos(self.spark, self.path, limit)
            for info in infos:
                if info["operation"] in _MAINTENANCE:
                    continue
                meta = parse_metadata(info.get("userMetadata")) or {}
                own = meta.get("replica")
                if own is not None and self.shard is None and not own.get("files"):
                    return "it was built row by row, not from copies of the source's files"
                if own is not None and self._logical() and not own.get("logical"):
                    return "it mirrors the source's physical rows (an older replica), not its versions"
                if own is not None:
                    return None
                own_maintenance = meta.get("operation") in READ_NEUTRAL_OPERATIONS
                if meta.get("app_id") == self._kind().app_id and self._logical() and own_maintenance:
                    continue  # its own seal: the stores refuse every other write to a replica
                version, operation = info["version"], info["operation"]
                return f"version {version} of the replica ({operation}) was not written by its sync"
            if limit is not None and len(infos) < limit:
                return None  # the log holds no more commits
        return None

    def _snapshot(self, version: int) -> DataFrame:
        source = self.spark.read.format("delta").option("versionAsOf", version).load(self.source_path)
        return source.where(self._kind().in_shard(self.shard, source.schema))

    def _versions(self, version: int) -> DataFrame:
        """The source store's versions at ``version`` (:meth:`VersionedStore.versions`: pending ones
        resolved) in the shard, as sealed rows of the replica's columns: what a logical replica restores."""
        versions = VersionedStore.open(self.spark, self.source_path).versions(version)
        return versions.where(self._kind().in_shard(self.shard, versions.schema))

    def _restored_state(
        self, commits: list[_history.Commit], kind: SourceKind, target: int
    ) -> dict[str, Any]:
        """A logical replica's own state after a restore at ``target``: nothing pending (its counters equal,
        and at least what it recorded before: state only grows), sealed at the source's stream time then
        (every version a later batch writes was accepted at or after it minus the retention)."""
        stream_time = _history.recorded_at(commits, kind.app_id, target).get(_STREAM_TIME)
        return pending_tier_sealed(self._own_state(kind), stream_time)

    def _changes(self, first: int, last: int) -> DataFrame:
        changes = _changes.read_changes(self.spark, self.source_path, first, last)
        return changes.where(self._kind().in_shard(self.shard, changes.schema))

    def _rebuild(
        self, target: int, before: int | None, reason: str | None, started: float, warn: bool = True
    ) -> SyncResult:
        """Overwrite the replica with the source's shard at ``target`` (checkpoint ``target``)."""
        if reason is not None and warn:
            warnings.warn(
                f"replica {self.path} of {self.source_path} re-initialized at version {target}: {reason}",
                ReplicaReinitializedWarning,
                stacklevel=3,
            )
        source_id = self._current_source_id()
        commits = _history.source_commits(self.spark, self.source_path, after=-1)
        kind = self._kind()
        logical = self._logical()
        rows = self._versions(target) if logical else self._snapshot(target)
        own = self._restored_state(commits, kind, target) if logical else None
        # A checkpoint is recorded only if it moves forward (Delta skips a txnVersion it has recorded).
        moves = source_id != self.source_id or before is None or target > before
        options = delta_ops.commit_options(
            *self._commit(commits, kind, target, "restore", source_id if moves else None, own=own)
        )
        partitions = self._source_metadata().partition_columns
        try:
            with self._no_missing_files():
                if self.shard is None:
                    copied = self._restore_files(rows, partitions, target, options)
                else:
                    (
                        rows.write.format("delta")
                        .mode("overwrite")
                        .option("overwriteSchema", "true")
                        .partitionBy(*partitions)
                        .options(**options)
                        .save(self.path)
                    )
        except Exception as error:
            if not _missing_changes(error):
                raise
            raise InvalidInputError(
                f"replica {self.path} cannot be built at version {target} of {self.source_path}: that "
                "version's data files are gone (vacuumed); sync with a later limit or none"
            ) from None
        if source_id != self.source_id:
            self.spark.sql(
                f"ALTER TABLE delta.`{self.path}` SET TBLPROPERTIES ('{SOURCE_ID_PROPERTY}' = '{source_id}')"
            )
            self.source_id = source_id
        self._after_commit("restore")
        if self.shard is not None:
            copied = self.table().count()
        versions = target + 1 if before is None or reason else target - before
        return SyncResult(before, target, versions, copied, 0, 1, True, reason, time.monotonic() - started)

    def _apply(self, commits: list[_history.Commit], before: int, target: int) -> tuple[int, int, int]:
        """Apply ``before + 1 .. target``, partition drops on their own; returns (rows, drops, commits)."""
        kind = self._kind()
        if self._logical():
            return self._apply_logical(commits, kind, before, target)
        rows = drops = written = 0
        first = before + 1
        for commit in commits:
            if commit.version > target:
                break
            bound = _history.drop_bound(commit, kind.app_id)
            if bound is None:
                continue
            if commit.version > first:
                rows += self._apply_changes(commits, kind, first, commit.version - 1)
                written += 1
            self._apply_drop(commits, kind, commit.version, bound)
            drops += 1
            written += 1
            first = commit.version + 1
        if first <= target:
            rows += self._apply_changes(commits, kind, first, target)
            written += 1
        return rows, drops, written

    def _apply_logical(
        self, commits: list[_history.Commit], kind: SourceKind, before: int, target: int
    ) -> tuple[int, int, int]:
        """Apply ``before + 1 .. target`` of a versioned store logically; returns (rows, drops, commits).

        The batches between two drops are one commit (their written versions appended to the replica's
        pending partition); each drop is a metadata-only drop at its version; seals, OPTIMIZE and VACUUM
        are skipped. A run of versions without batches before a drop needs no commit (the drop records
        the later checkpoint); the last run always commits (an empty commit when it has no batch), so the
        checkpoint reaches ``target``.
        """
        rows = drops = written = 0
        after = before
        for commit in commits:
            bound = _history.drop_bound(commit, kind.app_id)
            if not before < commit.version <= target or bound is None:
                continue
            writes = self._writes(commits, after, commit.version - 1)
            if writes:
                rows += self._apply_writes(commits, kind, writes, commit.version - 1)
                written += 1
            self._apply_drop(commits, kind, commit.version, bound)
            drops += 1
            written += 1
            after = commit.version
        if after < target:
            rows += self._apply_writes(commits, kind, self._writes(commits, after, target), target)
            written += 1
        return rows, drops, written

    def _apply_writes(
        self, commits: list[_history.Commit], kind: SourceKind, versions: list[int], last: int
    ) -> int:
        """One replica commit at source version ``last`` writing the versions that the batch commits
        ``versions`` wrote into the replica's pending partition; returns the rows it wrote.

        The rows are :func:`_logical.written_versions` (one batch's as they are; several batches' netted to
        the newest row of each version). An append when none of them can be pending in the replica already,
        else a MERGE confined to the pending partition (a version pending already is replaced). No batch, or
        none that wrote a row: an empty commit records the checkpoint.

        Every version pending in the replica came from a source batch at or before its checkpoint, so it
        starts at or before the source's stream time then, which the replica records: the append's files,
        once written, are committed if their statistics say each of their rows starts after that time
        (:func:`_logical.start_after`; then none of them is pending in the replica already, and appending
        them is what the MERGE would do), else left uncommitted for the MERGE. No Spark job but the write,
        and an append's rows are its files' statistics (no commit read back; :class:`_logical.CountingCheck`).
        """
        before = self._own_state(kind)
        wrote = any(_history.wrote_rows(c) for c in commits if c.version in versions)
        own, extra = before, dict[str, Any]()
        if wrote:
            own, extra = pending_tier_appended(before), {LOWEST_SEGMENT: PENDING_SEGMENT}
        commit = self._commit(commits, kind, last, "sync", own=own, **extra)
        rows = 0
        if wrote:
            rows = self._write_versions(commits, kind, versions, before, commit, last)
        else:
            self._commit_if_skipped(last, commit)
        self._after_commit("sync")
        return rows

    def _write_versions(
        self,
        commits: list[_history.Commit],
        kind: SourceKind,
        versions: list[int],
        before: dict[str, Any],
        commit: tuple[str, tuple[str, int] | None],
        last: int,
    ) -> int:
        """:meth:`_apply_writes`' commit of the versions written by the batch commits ``versions``, with the
        replica's own state ``before`` it; returns the rows it wrote."""
        snapshot = latest_snapshot(self.spark, self.path)
        inserts_only = _history.each_inserts_only(commits, versions)
        written = self._inserted(commits, versions) if inserts_only else None
        if written is None:
            written = _logical.written_versions(self._changes_of(versions), kind.identity, inserts_only)
        columns = snapshot_schema(snapshot).fieldNames()
        pending = _logical.as_pending(written, kind.identity, columns, net=len(versions) > 1)
        options = delta_ops.commit_options(*commit)
        if has_pending(before):
            check = _logical.CountingCheck(partial(_logical.start_after, stream_time_us=before[_STREAM_TIME]))
        else:
            check = _logical.CountingCheck(lambda _files: True)
        with self._state_partitions(snapshot), self._no_missing_files(), self._one_partition_write():
            appended = append_if(pending, self.path, options, check)
            if not appended and not has_pending(before):  # the table's columns changed meanwhile
                append_to_table(pending, self.path, options)
            elif not appended:
                self._merge_pending(pending, kind, commit)
        if appended and check.rows is not None:  # committed here, with the rows its files hold
            return check.rows
        rows = self._rows_written(last, "sync")
        self._commit_if_skipped(last, commit)
        return rows

    def _merge_pending(
        self, pending: DataFrame, kind: SourceKind, commit: tuple[str, tuple[str, int] | None]
    ) -> None:
        """MERGE ``pending`` rows into the replica's pending partition: a version pending already is
        replaced, any other inserted (Delta prunes the MERGE to that partition by its literal)."""
        keys = kind.identity[:-1]
        with delta_ops.dml_commit(self.spark, *commit):
            (
                DeltaTable.forPath(self.spark, self.path)
                .alias("t")
                .merge(pending.alias("s"), _logical.pending_match(keys))
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )

    def _rows_written(self, last: int, operation: str) -> int:
        """The rows the replica's newest commit wrote if it is its sync of source version ``last`` (else 0:
        Delta skipped the commit, its checkpoint was recorded already)."""
        newest = commit_infos(self.spark, self.path, 1)[0]
        mine = (parse_metadata(newest.get("userMetadata")) or {}).get("replica") or {}
        if (mine.get("source_version"), mine.get("operation")) != (last, operation):
            return 0
        metrics = newest.get("operationMetrics") or {}
        if newest["operation"] == "MERGE":
            return int(metrics.get("numTargetRowsInserted", 0)) + int(metrics.get("numTargetRowsUpdated", 0))
        return int(metrics.get("numOutputRows", 0))

    def _apply_changes(self, commits: list[_history.Commit], kind: SourceKind, first: int, last: int) -> int:
        """One replica commit applying source versions ``first .. last``; returns the change rows applied.

        A range whose commit infos say it only inserted rows (:func:`_history.inserts_only`, the versioned
        store's appended versions) is appended as it is, without looking at its rows first; any other range
        is aggregated (:func:`_changes.change_stats`, one Spark job) and appended if that finds inserts only,
        else MERGEd.
        """
        if self.shard is None:
            return self._replay(commits, kind, first, last, "sync")
        changes = self._changes(first, last)
        self._add_new_columns(changes.schema)
        columns = [c for c in changes.columns if c not in _changes.CDF_COLUMNS]
        commit = self._commit(commits, kind, last, "sync")
        if _history.inserts_only(commits, first, last):
            with self._state_partitions():
                rows = self._append(changes.select(*columns), commit, last)
        else:
            with self._no_missing_files():
                stats = _changes.change_stats(changes, kind.partition_column, kind.bound_columns)
            with self._state_partitions():
                if stats.insert_only:
                    self._append(changes.select(*columns), commit, last)
                else:
                    self._merge(changes, kind, columns, stats, commit)
            rows = stats.inserts + stats.updates + stats.deletes
        self._commit_if_skipped(last, commit)
        self._after_commit("sync")
        return rows

    def _append(self, rows: DataFrame, commit: tuple[str, tuple[str, int] | None], last: int) -> int:
        """Append ``rows`` as the sync commit of source version ``last``; returns the rows it wrote.

        The count is the commit's ``numOutputRows`` (0 when Delta skipped the commit: its checkpoint was
        recorded already).
        """
        with self._no_missing_files():
            append_to_table(rows, self.path, delta_ops.commit_options(*commit))
        return self._rows_written(last, "sync")

    def _merge(
        self,
        changes: DataFrame,
        kind: SourceKind,
        columns: list[str],
        stats: _changes.ChangeStats,
        commit: tuple[str, tuple[str, int] | None],
    ) -> None:
        net = _changes.net_changes(changes, kind.identity_of())
        condition = _changes.target_pruning(stats, kind.partition_column)
        for target, source in zip(kind.identity_of("t"), kind.identity_of("s"), strict=True):
            condition = condition & (target == source)
        every = {f"`{c}`": F.col(f"s.`{c}`") for c in columns}
        removal = F.col(f"s.{_changes.CHANGE_TYPE}") == F.lit(_changes.DELETE)
        with delta_ops.dml_commit(self.spark, *commit), self._no_missing_files():
            (
                DeltaTable.forPath(self.spark, self.path)
                .alias("t")
                .merge(net.alias("s"), condition)
                .whenMatchedDelete(condition=removal)
                .whenMatchedUpdate(set=every)
                .whenNotMatchedInsert(condition=~removal, values=every)
                .execute()
            )

    def _apply_drop(self, commits: list[_history.Commit], kind: SourceKind, version: int, bound: str) -> None:
        """Mirror the source's partition drop at ``version``: a metadata-only DELETE of partitions < bound
        (a whole-table replica replays the drop's file removals)."""
        if self.shard is None:
            self._replay(commits, kind, version, version, "drop_partitions")
            return
        own = self._own_state(kind) if self._logical() else None
        commit = self._commit(commits, kind, version, "drop_partitions", own=own)
        column = kind.partition_column
        with self._state_partitions(), delta_ops.dml_commit(self.spark, *commit):
            DeltaTable.forPath(self.spark, self.path).delete(F.col(column) < F.lit(int(bound)))
        self._commit_if_skipped(version, commit)
        self._after_commit("drop_partitions")

    def _replay(
        self, commits: list[_history.Commit], kind: SourceKind, first: int, last: int, operation: str
    ) -> int:
        """One replica commit replaying the file actions of source versions ``first .. last`` (a whole-table
        replica: its files are the source's); returns the rows of the files added and removed."""
        _require_file_level(self.source_path, self._source_metadata().properties)
        found = _files.changes(self.spark, self.source_path, first, last)
        self._add_new_columns(snapshot_schema(latest_snapshot(self.spark, self.source_path)))
        _files.copy_files(self.spark, self.source_path, self.path, found.actions, found.held)
        options = delta_ops.commit_options(*self._commit(commits, kind, last, operation))
        mode = "Overwrite" if any(_files.is_removal(a) for a in found.actions) else "Append"
        commit_file_actions(self.spark, self.path, found.actions, options, mode)
        self._after_commit(operation)
        return found.rows

    def _restore_files(
        self, rows: DataFrame, partitions: tuple[str, ...], target: int, options: dict[str, str]
    ) -> int:
        """Replace a whole-table replica's files with copies of the source's at ``target`` in one commit;
        returns the rows copied (from the files' statistics).

        A replica whose partitioning is not the source's (the source was replaced by another table) is
        first emptied with the source's schema and partitioning, in a commit of its own that records no
        checkpoint and is not a sync's (so a crash before the copy commits leads to a rebuild)."""
        _require_file_level(self.source_path, self._source_metadata().properties)
        if delta_ops.table_metadata(self.spark, self.path).partition_columns != partitions:
            empty = rows.limit(0).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
            empty.partitionBy(*partitions).save(self.path)
        self._add_new_columns(rows.schema)
        files = snapshot_files(self.spark, self.source_path, target)
        held = snapshot_files(self.spark, self.path)
        added, removed = _files.difference(files, held), _files.difference(held, files)
        _files.copy_files(self.spark, self.source_path, self.path, added, {f.path() for f in held})
        actions = [*_files.removals(self.spark, removed), *added]
        commit_file_actions(self.spark, self.path, actions, options, "Overwrite")
        return _files.live_rows(files)

    def _commit_if_skipped(self, version: int, commit: tuple[str, tuple[str, int] | None]) -> None:
        """Record checkpoint ``version`` with an empty commit when the change wrote none (nothing matched, or
        only commits that change no read): its ``SetTransaction`` and metadata alone, no Spark job."""
        found = self.checkpoint()
        if found is None or found < version:
            commit_file_actions(self.spark, self.path, [], delta_ops.commit_options(*commit), "Append")

    def _add_new_columns(self, schema: T.StructType) -> None:
        """Add columns the source gained (a dedup index's id columns) to the replica (a schema commit)."""
        existing = set(snapshot_schema(latest_snapshot(self.spark, self.path)).fieldNames())
        missing = [f for f in schema.fields if f.name not in existing and f.name not in _changes.CDF_COLUMNS]
        if missing:
            columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
            self.spark.sql(f"ALTER TABLE delta.`{self.path}` ADD COLUMNS ({columns})")

    def _commit(
        self,
        commits: list[_history.Commit],
        kind: SourceKind,
        version: int,
        operation: str,
        source_id: str | None = "",
        own: dict[str, Any] | None = None,
        **fields: Any,
    ) -> tuple[str, tuple[str, int] | None]:
        """Metadata and txn of a replica commit at source ``version``: the source's state and the checkpoint.

        The metadata is the store's own (``app_id``, stream time, last batch ids as of ``version``), so the
        replica opens as the store read then, plus a ``replica`` entry and ``fields``. ``own``: a logical
        replica's own state (:meth:`_own_state`), whose pending-tier fields
        (:data:`lakehouse.versioned.store.PENDING_TIER_FIELDS`) are recorded instead of the source's (its
        pending tier is its own). ``source_id`` None: no checkpoint is
        recorded (a rebuild at the checkpoint it has already); "" the replica's own source id.
        """
        recorded = _history.recorded_at(commits, kind.app_id, version)
        replica: dict[str, Any] = {"source_version": version, "operation": operation}
        if self.shard is None:
            replica["files"] = True  # the replica's files are copies of the source's
        if own is not None:
            replica["logical"] = True  # its rows are its own layout of the source's versions
            recorded = {f: v for f, v in recorded.items() if f not in PENDING_TIER_FIELDS}
            recorded.update({f: v for f, v in own.items() if f in PENDING_TIER_FIELDS and v is not None})
        extra: dict[str, Any] = {"replica": replica, **fields}
        extra.update({f: v for f, v in recorded.items() if f != "batch_id"})
        log = CommitLog(self.spark, self.path, kind.app_id)
        metadata = log.metadata(recorded.get("batch_id"), {}, **extra)
        txn = None if source_id is None else (self._txn_app(source_id or None), version)
        return metadata, txn

    @contextmanager
    def _state_partitions(self, snapshot: Any = None) -> Iterator[None]:
        """Delta reconstructs the replica's state (Spark jobs over its log) for each commit carrying a
        checkpoint (``SetTransaction``: Delta looks up the recorded one first); in this block it uses one
        partition per :data:`_FILES_PER_STATE_PARTITION` files of the replica, not the session's number
        (a replica is one task's share: a few files, where every partition is a task to schedule).

        Only the parallelism of that reconstruction changes (the conf is the session's: other threads'
        reconstructions in the block use it too); without a checksum telling the file count, nothing does.
        ``snapshot``: the replica's newest, when the caller has just read it.
        """
        snapshot = snapshot if snapshot is not None else latest_snapshot(self.spark, self.path)
        checksum = snapshot.checksumOpt()
        if not checksum.isDefined():
            yield
            return
        wanted = max(1, -(-int(checksum.get().numFiles()) // _FILES_PER_STATE_PARTITION))
        current = int(self.spark.conf.get(_SNAPSHOT_PARTITIONS, str(_DELTA_SNAPSHOT_PARTITIONS)))
        with delta_ops.session_confs(self.spark, {_SNAPSHOT_PARTITIONS: str(min(wanted, current))}):
            yield

    @contextmanager
    def _one_partition_write(self) -> Iterator[None]:
        """In this block the replica's pending rows (all in one partition) are written unsorted.

        Spark sorts the rows of a partitioned write by partition before writing them, unless it may keep
        several files open (``spark.sql.maxConcurrentOutputFileWriters`` > 0, 0 by default); with one
        partition, one open file gets every row either way: the same file, without sorting every row
        first. A session allowing concurrent writers keeps its setting. The conf is the session's: other
        threads' writes in the block may keep one file open per task too (and sort past it, as Spark
        does): their files, not their rows, may differ.
        """
        if int(self.spark.conf.get(_CONCURRENT_WRITERS, "0") or 0) > 0:
            yield
            return
        with delta_ops.session_confs(self.spark, {_CONCURRENT_WRITERS: "1"}):
            yield

    @contextmanager
    def _no_missing_files(self) -> Iterator[None]:
        """A missing file must fail the read, never be skipped silently."""
        with delta_ops.session_confs(self.spark, {_IGNORE_MISSING_FILES: "false"}):
            yield


def _require_file_level(source_path: str, properties: dict[str, str]) -> None:
    """Refuse (``InvalidInputError``) a whole-table replica of a source whose data files it cannot copy:
    one with column mapping (its files name columns by physical names only its own metadata maps) or type
    widening (files of a column's older type, read as the new one only by the source's metadata)."""
    mode = properties.get(COLUMN_MAPPING_PROPERTY, "none")
    found = f"column mapping ({COLUMN_MAPPING_PROPERTY} = {mode})" if mode != "none" else None
    if found is None and properties.get(TYPE_WIDENING_PROPERTY) == "true":
        found = f"type widening ({TYPE_WIDENING_PROPERTY} = true)"
    if found is not None:
        raise InvalidInputError(
            f"{source_path} uses {found}: a replica of the whole table copies its data files and cannot; "
            "replicate it by rows with shard=Shard(0, 1) (or by task)"
        )


def _missing_changes(error: Exception) -> bool:
    text = str(error)
    return any(marker in text for marker in _MISSING_CHANGES)


def maintain_replicas(
    spark: SparkSession,
    source_path: str,
    seal_min_rows: int,
    optimize_min_files: int,
    vacuum_interval: timedelta,
) -> dict[str, dict[str, str]]:
    """:meth:`Replica.maintain` of every replica registered with the source at ``source_path`` (that
    exists); returns what each did, by replica path."""
    done = {}
    for path in sorted(registered(spark, resolve_path(source_path))):
        if DeltaTable.isDeltaTable(spark, path):
            replica = Replica.open(spark, path)
            done[path] = replica.maintain(seal_min_rows, optimize_min_files, vacuum_interval)
    return done
