"""The commit log of one writer on one Delta table: which batches it committed and what it recorded.

A *writer* is an app id: a stateful table's own id (``lakehouse.versioned_store``), or, on a table several
writers may share (a sink, a quarantine), the writing pipeline's id plus the table it owns, so writers
never skip each other's batches. A named writer (a pipeline writing a store or an index other pipelines
write too) counts its batch ids apart from the others; the table's state (stream times) is shared by all
writers of the app id: it is the table's, not the writer's.

A *fenced* log (a table whose batches read it before they write it: a versioned store, a seen-ID index)
commits a batch only on the version it was planned from, whatever the timing of other writers:

- Each batch commit carries Delta's ``SetTransaction`` of one app id shared by the table's writers, the
  *fence* (``<app id>#fence``), with ``txnVersion`` = the planned-from version + 1. Delta skips a write
  whose ``txnVersion`` it has recorded already, so a batch planned from version ``v`` writes nothing if
  another batch planned from ``v`` committed first, however shortly before; and a transaction that read the
  fence fails (``ConcurrentTransactionException``) if another one sets it after it started. Together with
  the version check before the commit, no commit lands on a version its batch did not read. A skipped
  commit is detected (its ``commit_token`` is not in the log) and reported as ``ConcurrentWriteError``.
- Each writer's last batch id is then state (``batch_ids``, writer -> id, "" for the unnamed writer),
  carried by every commit like the stream times, so it too survives log cleanup.

What survives Delta's checkpoints and log cleanup, and why:

- **The last batch id** is Delta's own ``SetTransaction`` (``txnAppId`` -> ``txnVersion``), committed
  atomically with the batch's data (writer options for appends, the txn confs of a scoped session for
  DML). Checkpoints keep the newest version of every app id (``delta.setTransactionRetentionDuration`` is
  never set), and Delta skips a commit whose version it has recorded already. On a fenced log the
  ``SetTransaction`` is the fence, and each writer's last batch id is state (next point).
- **The state the semantics carry from batch to batch** (stream times) is in the ``userMetadata`` of
  *every* commit lakehouse makes on the table: batch commits and maintenance commits (expire, purge,
  VACUUM) alike record the full current state, and an empty batch still commits. Delta's log cleanup only
  removes commit files older than the newest checkpoint at or before the retention cutoff, so the newest
  commit's file always survives; the state is read from the newest commits that carry it.
- **Per-batch details** (which version a batch produced, what a replayed batch reported, the batch's input
  fingerprint, a grace cutoff) are read from the retained history; a batch older than
  ``delta.logRetentionDuration`` is gone from it (as is time travel to it), and a replay of such a batch is
  refused with a clear error.

Every setting that makes a commit idempotent lives in a cloned session (its own SQL conf, the same
SparkContext and caches), so other threads' writes never pick them up.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from delta.exceptions import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
)
from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.util import inheritable_thread_target

from lakehouse.damage import checked_snapshot
from lakehouse.errors import (
    ConcurrentWriteError,
    DamagedTableError,
    InvalidInputError,
    LakehouseInternalError,
    ReplayMismatchWarning,
)
from lakehouse.jvm import jvm_class, list_items
from lakehouse.log_store import warn_unless_arbitrated

METADATA_KEY = "lakehouse"
#: Commit metadata field: the batch's :func:`input_fingerprint`, compared when the batch id is replayed.
INPUT_FINGERPRINT = "input_fingerprint"
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_RECENT_COMMITS = 20
#: A prepared append's commit (:func:`prepare_append`): makes it, or does nothing if there is none to make.
Commit = Callable[[], None]
#: At most this many commit infos are read file by file on the driver (see :func:`commit_infos`): as many as
#: the maintain stage's look at a table's newest commits (:data:`lakehouse.history.DEPTH`).
_DRIVER_READS = 100
#: Threads reading commit files on the driver (each read one round trip to the log's file system).
_DRIVER_READ_THREADS = 8
#: State field of a fenced log: the last batch id of each writer ("" for the unnamed one).
BATCH_IDS = "batch_ids"
#: Commit metadata field of a fenced commit: a random token, looked up to tell a commit that Delta skipped.
_COMMIT_TOKEN = "commit_token"
#: The ``SetTransaction`` app id a sole writer's first commit to a table sets and reads (see
#: :func:`prepare_append`): of two first commits at the same moment, the second fails and then sees the first.
FIRST_COMMITS = "lakehouse#first-commits"
#: Builds the error refusing a sole writer's commit to a table another writer (named) commits to.
Refusal = Callable[[str], Exception]
#: Delta's exceptions for a commit that lost a race with another writer's.
CONFLICTS = (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    MetadataChangedException,
)


def hashable_columns(schema: T.StructType) -> list[Column]:
    """The columns of ``schema`` as :func:`input_fingerprint` can hash them: a column holding a MAP (Spark
    cannot hash one) as its JSON text."""
    return [
        F.to_json(F.col(f.name)) if "map<" in f.dataType.simpleString() else F.col(f.name)
        for f in schema.fields
    ]


def input_fingerprint(columns: Sequence[str | Column]) -> Column:
    """Aggregate: an order-independent fingerprint of a batch's rows over ``columns``.

    The sum of each row's ``xxhash64`` as a DECIMAL(38,0): exact (no overflow below 10^19 rows), the same
    for the same rows in any order or partitioning, and different for changed rows except by hash
    collision. NULL for an empty batch.
    """
    return F.sum(F.xxhash64(*columns).cast("decimal(38,0)"))


@dataclass(frozen=True)
class Recorded:
    """What the table says at one version: the version, the writer's last batch id, its current state.

    ``state`` holds the writer's state fields (e.g. ``stream_time_us``) as of ``version`` (see
    :meth:`CommitLog.state_at`); empty before the first commit that records them.
    """

    version: int
    last_batch_id: int | None
    state: dict[str, Any] = field(default_factory=dict)


class CommitLog:
    """The commits of writer ``app_id`` (named ``writer``, if given) on the Delta table at ``path``.

    ``state_fields`` name the metadata fields that make up the table's state (see :meth:`state_at`): read
    from the commits of every writer of ``app_id``. Batch ids (``SetTransaction``, :meth:`commits`) are this
    writer's own: ``txn_app_id`` is ``app_id``, or ``<app_id>/<writer>`` for a named writer. A ``fenced``
    log commits batches through the fence (module doc): pass the version a batch was planned from as
    ``read_version`` to :meth:`writer_options` / :meth:`session`, and commit in :meth:`committing`.

    Raises:
        InvalidInputError: ``writer`` is empty, not a string, or contains ``/``.
    """

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        app_id: str,
        state_fields: tuple[str, ...] = (),
        writer: str | None = None,
        fenced: bool = False,
    ) -> None:
        self.spark = spark
        self.path = path
        self.app_id = app_id
        self.writer = require_writer_name(writer)
        self.txn_app_id = app_id if writer is None else f"{app_id}/{writer}"
        self.fenced = fenced
        self.state_fields = (*state_fields, BATCH_IDS) if fenced else state_fields
        #: Per thread (a handle may be shared by threads): ``batch_ids``, every writer's last batch id as of
        #: the thread's last :meth:`read` (a fenced log's commits carry them), and ``token``, the commit token
        #: of the fenced commit it prepared last (see :meth:`require_landed`).
        self._local = threading.local()
        #: The state of the last version :meth:`state_at` read: (table id, version, state).
        self._state_cache: tuple[str, int, dict[str, Any]] | None = None

    # ------------------------------------------------------------------ reading
    def read(self) -> Recorded:
        """The table's current version, the last batch id (its ``SetTransaction``) and the current state.

        Version and batch id come from one snapshot; the state from the newest commits at or below it (a
        log without state fields has none: no commit is read).
        """
        snapshot, version = self._newest()
        last = recorded_txn(self.spark, snapshot, self.txn_app_id)
        state = self._state_of(snapshot, version)
        if self.fenced:
            self._local.batch_ids = {k: int(v) for k, v in state.get(BATCH_IDS, {}).items()}
            last = _largest(last, self._local.batch_ids.get(self.writer or ""))
            warn_unless_arbitrated(snapshot, self.path, self._named_writers)
        return Recorded(version, last, state)

    def state(self) -> dict[str, Any]:
        """The state as of the table's current version: :meth:`read`'s, without the batch id it looks up."""
        return self._state_of(*self._newest())

    def _newest(self) -> tuple[Any, int]:
        """The table's newest snapshot and its version.

        Raises:
            DamagedTableError: the table's log holds no commit.
        """
        snapshot = latest_snapshot(self.spark, self.path)
        version = int(snapshot.version())
        if version < 0:
            raise DamagedTableError(
                self.path, "its _delta_log holds no commit (the table or its log was deleted)"
            )
        return snapshot, version

    def _state_of(self, snapshot: Any, version: int) -> dict[str, Any]:
        """The state at ``version``, ``snapshot``'s ({} for a log without state fields: no commit read)."""
        if not self.state_fields:
            return {}
        table_id = str(snapshot.metadata().id())
        if self._state_cache is not None and self._state_cache[0] != table_id:
            self._state_cache = None  # another table at the path (deleted and created again)
        return self._state_at(version, snapshot, table_id)

    def _named_writers(self) -> set[str]:
        """The named writers whose batches a fenced log's commits record (as of the last :meth:`read`), this
        one included: the jobs that write the table as its own, each under its name (the unnamed writer,
        one job per table, and maintenance are not counted: they run where the table's job runs)."""
        return {name for name in (self.writer, *getattr(self._local, "batch_ids", {})) if name}

    def last_batch_id(self) -> int | None:
        """The largest batch id this writer committed to the table (kept in Delta checkpoints), or None."""
        return self.read().last_batch_id

    def state_at(self, version: int) -> dict[str, Any]:
        """The state recorded by the commits of ``app_id`` (any writer) at or below ``version`` ({} if none).

        State fields only grow (stream times), so each field is the largest value any of the newest
        commits carrying state recorded: a maintenance commit that read the state just before a batch
        committed cannot move it backwards. Reads the most recent commits first; the whole retained history
        only if none of them carries state.
        """
        cached = self._state_cache
        return self._state_at(version, None, None if cached is None else cached[0])

    def _state_at(self, version: int, snapshot: Any, table_id: str | None) -> dict[str, Any]:
        """:meth:`state_at`, the commits read from ``snapshot`` (None: the newest), remembered for the last
        version asked of the table ``table_id`` (that of the last :meth:`read`): the commits at or below a
        version never change, so neither does its state."""
        cached = self._state_cache
        if cached is not None and cached[:2] == (table_id, version):
            return copy.deepcopy(cached[2])
        state: dict[str, Any] = {}
        for limit in (_RECENT_COMMITS, None):
            rows = commit_infos(self.spark, self.path, limit, snapshot=snapshot)
            state = recorded_state(rows, self.app_id, self.state_fields, version)
            if state or len(rows) < _RECENT_COMMITS:
                break
        if table_id is not None:
            self._state_cache = (table_id, version, copy.deepcopy(state))
        return state

    def commits(self) -> DataFrame:
        """The retained commits of this writer: version, batch_id (NULL for maintenance), metadata (JSON).

        A named writer's own batches only; maintenance commits (no writer, no batch) are the unnamed writer's.
        """
        meta_schema = "struct<app_id:string, writer:string, batch_id:long>"
        history = DeltaTable.forPath(self.spark, self.path).history().select("version", "userMetadata")
        parsed = history.withColumn(
            "meta", F.from_json(F.get_json_object("userMetadata", f"$.{METADATA_KEY}"), meta_schema)
        )
        mine = (F.col("meta.app_id") == self.app_id) & F.col("meta.writer").eqNullSafe(F.lit(self.writer))
        return parsed.where(mine).select(
            "version", F.col("meta.batch_id").alias("batch_id"), F.col("userMetadata").alias("metadata")
        )

    def batch_commit(self, batch_id: int) -> tuple[int, dict[str, Any]] | None:
        """The version whose commit recorded batch ``batch_id`` and that commit's metadata, if retained."""
        row = self.commits().where(F.col("batch_id") == batch_id).orderBy(F.col("version").asc()).first()
        if row is None:
            return None
        meta = parse_metadata(row["metadata"])
        return int(row["version"]), meta or {}

    def batch_metrics(self, batch_id: int) -> tuple[int, dict[str, str]] | None:
        """The version whose commit recorded batch ``batch_id`` and its ``operationMetrics`` (None if gone).

        The newest commit is looked at first (the usual case: the batch just written or skipped).
        """
        newest = next(iter(commit_infos(self.spark, self.path, 1)), None)
        meta = (None if newest is None else parse_metadata(newest.get("userMetadata"))) or {}
        mine = (meta.get("app_id"), meta.get("writer"), meta.get("batch_id"))
        if newest is not None and mine == (self.app_id, self.writer, batch_id):
            return int(newest["version"]), dict(newest.get("operationMetrics") or {})
        found = self.batch_commit(batch_id)
        if found is None:
            return None
        table = DeltaTable.forPath(self.spark, self.path)
        row = table.history().where(F.col("version") == found[0]).select("operationMetrics").first()
        return found[0], {} if row is None else dict(row["operationMetrics"] or {})

    def check_replay(self, batch_id: int, committed: Mapping[str, Any], replayed: Mapping[str, Any]) -> None:
        """Warn (:class:`ReplayMismatchWarning`) when a replayed batch's input differs from the committed one.

        ``committed`` is the metadata of the batch's commit, ``replayed`` the replayed input's
        ``records`` and :data:`INPUT_FINGERPRINT`; a commit that recorded no fingerprint is not checked.
        """
        recorded = committed.get(INPUT_FINGERPRINT)
        if recorded is None or str(replayed[INPUT_FINGERPRINT]) == str(recorded):
            return
        warnings.warn(
            f"batch {batch_id} of {self.txn_app_id} on {self.path} was committed with "
            f"{committed.get('records', '?')} record(s) and is replayed with {replayed['records']} "
            f"whose content differs (input fingerprint {replayed[INPUT_FINGERPRINT]} vs {recorded}): "
            "the committed result stands, nothing was written",
            ReplayMismatchWarning,
            stacklevel=3,
        )

    def check_new(self, batch_id: int, last: int | None, noun: str = "batch id") -> bool:
        """True if ``batch_id`` is new, False if it is a replay of a committed batch.

        ``last`` is :attr:`Recorded.last_batch_id` of a :meth:`read`; ``noun`` names batch ids in errors.

        Raises:
            InvalidInputError: ``batch_id`` is not an integer, is negative, or is below ``last`` without a
                retained commit of its own (never committed, or committed longer ago than the table's log
                retention).
        """
        if isinstance(batch_id, bool) or not isinstance(batch_id, int):
            raise InvalidInputError(f"{noun} must be an integer, got {batch_id!r}")
        if batch_id < 0:
            raise InvalidInputError(f"{noun} must be >= 0, got {batch_id}")
        if last is None or batch_id > last:
            return True
        if batch_id == last or self.batch_commit(batch_id) is not None:
            return False
        raise InvalidInputError(
            f"{noun} {batch_id} is below the last {noun} {last} committed to {self.path} and has no commit "
            f"there (never committed, or older than the table's log retention): {noun}s must increase"
        )

    # ------------------------------------------------------------------ writing
    def metadata(self, batch_id: int | None, state: Mapping[str, Any], **extra: Any) -> str:
        """The ``userMetadata`` JSON of a commit: this writer, the batch (None: maintenance), the state.

        ``{"lakehouse": {"app_id": ..., "writer": ..., "batch_id": ..., <state fields>, <extra fields>}}``
        (``writer`` only on a named writer's batches: maintenance commits are the table's, whoever runs them).
        """
        named = {} if self.writer is None or batch_id is None else {"writer": self.writer}
        body = {"app_id": self.app_id, **named, "batch_id": batch_id, **state, **extra}
        if self.fenced:
            mine = {} if batch_id is None else {self.writer or "": batch_id}
            body[BATCH_IDS] = {**getattr(self._local, "batch_ids", {}), **mine}
        return json.dumps({METADATA_KEY: body}, sort_keys=True)

    def writer_options(
        self,
        batch_id: int | None,
        state: Mapping[str, Any],
        *,
        read_version: int | None = None,
        **extra: Any,
    ) -> dict[str, str]:
        """DataFrameWriter options of an idempotent append (Delta skips it if ``batch_id`` is recorded), or
        of a fenced log's commit planned from ``read_version`` (Delta skips it if that version is taken)."""
        txn = self._txn(batch_id, read_version, extra)
        options = {"userMetadata": self.metadata(batch_id, state, **extra)}
        if txn is not None:
            options.update(txnAppId=txn[0], txnVersion=str(txn[1]))
        return options

    def _txn(
        self, batch_id: int | None, read_version: int | None, extra: dict[str, Any]
    ) -> tuple[str, int] | None:
        """The ``SetTransaction`` of a commit (adding a fenced commit's token to ``extra``)."""
        if not self.fenced:
            return None if batch_id is None else (self.txn_app_id, batch_id)
        if read_version is None:
            if batch_id is not None:
                raise LakehouseInternalError(f"a fenced batch commit on {self.path} needs its read version")
            return None
        self._local.token = uuid.uuid4().hex
        extra[_COMMIT_TOKEN] = self._local.token
        return f"{self.app_id}#fence", read_version + 1

    def require_landed(self, read_version: int, step: str) -> None:
        """Raise :class:`ConcurrentWriteError` if the fenced commit just made was skipped by Delta: another
        batch planned from ``read_version`` committed first (module doc)."""
        token, self._local.token = getattr(self._local, "token", None), None
        if token is None:
            raise LakehouseInternalError(f"no fenced commit was prepared on {self.path}")
        snapshot = latest_snapshot(self.spark, self.path)
        current = int(snapshot.version())
        for info in commit_infos(self.spark, self.path, max(1, current - read_version), snapshot=snapshot):
            if (parse_metadata(info.get("userMetadata")) or {}).get(_COMMIT_TOKEN) == token:
                return
        raise ConcurrentWriteError(self.path, step, read_version, self._describe(read_version + 1))

    def append(
        self,
        frame: DataFrame,
        batch_id: int | None,
        state: Mapping[str, Any],
        **extra: Any,
    ) -> None:
        """Append ``frame`` as this writer's batch ``batch_id`` (:meth:`writer_options`, with
        :func:`append_to_table`), creating the table if it does not exist. Writers that create the table at
        the same moment race for its first commit; the loser's append is retried once (it is idempotent:
        Delta skips it if the batch is there)."""
        self.planned_append(frame, batch_id, state, **extra)()()

    def planned_append(
        self,
        frame: DataFrame,
        batch_id: int | None,
        state: Mapping[str, Any],
        *,
        read_version: int | None = None,
        step: str = "",
        sole: Refusal | None = None,
        **extra: Any,
    ) -> Callable[[], Commit]:
        """:meth:`append` in two steps: its options are fixed now (in this thread), the returned function
        writes ``frame``'s files (:func:`prepare_append`, in any thread) and returns the commit, which makes
        the append (retried as :meth:`append` retries it).

        With ``read_version`` the append is a fenced log's batch planned from that version: the commit runs
        in :meth:`committing` (``step`` names it in errors), lands only on that version and is not retried.
        With ``sole`` this writer must be the table's only writer (:func:`prepare_append`).

        An unfenced append that loses a race (another writer created the table first, changed its metadata
        at the same moment, or made a first commit at the same moment as this writer's first) is appended
        again, once: Delta skips it if the batch is there, and a sole writer's is then refused if the race
        was lost to another writer's first commit.
        """
        options = self.writer_options(batch_id, state, read_version=read_version, **extra)

        def write() -> Commit:
            commit = prepare_append(frame, self.path, options, sole)

            def commit_retrying() -> None:
                try:
                    commit()
                except (ProtocolChangedException, *CONFLICTS):
                    append_to_table(frame, self.path, options, sole)

            def commit_fenced() -> None:
                assert read_version is not None
                with self.committing(read_version, step):
                    commit()

            return commit_retrying if read_version is None else commit_fenced

        return write

    def session(
        self,
        batch_id: int | None,
        state: Mapping[str, Any],
        confs: Mapping[str, str] | None = None,
        *,
        read_version: int | None = None,
        **extra: Any,
    ) -> SparkSession:
        """A session whose Delta commits (MERGE, DELETE, VACUUM) record this writer's batch and state.

        A clone of the caller's session (same SparkContext, caches and settings, its own SQL conf) with the
        txn and ``userMetadata`` confs set, plus ``confs``: nothing leaks into the caller's session or into
        other threads' writes. Run the statement on tables opened with the returned session.
        """
        clone = SparkSession(self.spark.sparkContext, self.spark._jsparkSession.cloneSession())
        txn = self._txn(batch_id, read_version, extra)
        settings = {**commit_confs(self.metadata(batch_id, state, **extra), txn), **(confs or {})}
        for key, value in settings.items():
            clone.conf.set(key, value)
        return clone

    def require_unchanged(self, read_version: int, step: str) -> None:
        """Raise :class:`ConcurrentWriteError` if a commit landed after ``read_version`` (what ``step`` read).

        :meth:`committing` calls it right before a commit; call it alone to stop early, before costly work.
        """
        current = int(latest_snapshot(self.spark, self.path).version())
        if current != read_version:
            raise ConcurrentWriteError(self.path, step, read_version, self._describe(read_version + 1))

    @contextmanager
    def committing(self, read_version: int, step: str) -> Iterator[None]:
        """Run the block's commit, planned from ``read_version``, only on that version.

        Checks the version first (:meth:`require_unchanged`), turns Delta's conflict exceptions of the commit
        into one :class:`ConcurrentWriteError` line, and on a fenced log checks after the block that the
        commit was not skipped (:meth:`require_landed`).
        """
        self.require_unchanged(read_version, step)
        try:
            yield
        except CONFLICTS as error:
            other = self._describe(read_version + 1)
            raise ConcurrentWriteError(self.path, step, read_version, other) from error
        if self.fenced:
            self.require_landed(read_version, step)

    # ------------------------------------------------------------------ internals
    def _describe(self, version: int) -> str:
        """``version N (OPERATION, batch B of APP)`` of a commit, as far as the history tells."""
        row = (
            DeltaTable.forPath(self.spark, self.path)
            .history()
            .where(F.col("version") == version)
            .select("operation", "userMetadata")
            .first()
        )
        if row is None:
            return f"version {version}"
        meta = parse_metadata(row["userMetadata"]) or {}
        writer = "" if meta.get("writer") is None else f"/{meta['writer']}"
        by = f", batch {meta.get('batch_id')} of {meta.get('app_id')}{writer}" if meta else ""
        return f"version {version} ({row['operation']}{by})"


def latest_snapshot(spark: SparkSession, path: str) -> Any:
    """The JVM ``Snapshot`` of the Delta table at ``path`` as of its newest commit.

    Delta caches a table's log per session: this reads only the commits after the cached snapshot (none
    when this process wrote the last one), and its version, metadata and protocol need no Spark job. It
    still lists the table's log (a LIST request on object storage), except inside :func:`one_log_listing`.
    """
    delta_log = jvm_class(spark, "org.apache.spark.sql.delta.DeltaLog")
    listed = getattr(_LISTED, "paths", None)
    if listed is not None and path in listed:
        return delta_log.forTable(spark._jsparkSession, path).unsafeVolatileSnapshot()
    none = jvm_class(spark, "scala.Option").empty()
    # forTable reads the log too (a damaged one raises there): inside the check
    snapshot = checked_snapshot(
        spark, path, lambda: delta_log.forTable(spark._jsparkSession, path).update(False, none, none)
    )
    if listed is not None:
        listed.add(path)
    return snapshot


#: Per thread, inside :func:`one_log_listing`: the tables whose log was listed there.
_LISTED = threading.local()


@contextmanager
def one_log_listing() -> Iterator[None]:
    """Within, :func:`latest_snapshot` lists a table's log once: later calls for the table take Delta's
    cached snapshot of it, which this process's own commits advance (Delta updates it as it commits) but
    other processes' commits do not.

    For a step that reads a table's newest version once and then works on what it read: a replica's sync
    (it alone writes the replica; it applies the source up to a version it chose first). A commit inside
    still lists the log and fails on a conflict as always (Delta's transaction reads the newest version).
    """
    outer = getattr(_LISTED, "paths", None)
    if outer is not None:
        yield
        return
    _LISTED.paths = set()
    try:
        yield
    finally:
        _LISTED.paths = None


def checked_transaction(spark: SparkSession, path: str) -> Any:
    """A Delta ``OptimisticTransaction`` on the table at ``path``, started on its newest snapshot, which is
    checked as :func:`latest_snapshot` checks it: a damaged log is refused (``DamagedTableError``), never
    committed on top of. One look at the log (the transaction's own snapshot is the one checked)."""
    log = jvm_class(spark, "org.apache.spark.sql.delta.DeltaLog").forTable(spark._jsparkSession, path)
    started: list[Any] = []

    def start() -> Any:
        started.append(log.startTransaction())
        return started[-1].snapshot()

    checked_snapshot(spark, path, start)
    return started[-1]


def snapshot_files(spark: SparkSession, path: str, version: int | None = None) -> list[Any]:
    """The ``AddFile`` actions of the table at ``path`` (as of ``version``; default the latest), from its
    log (Delta's state reconstruction, no data file read)."""
    return list_items(_snapshot_at(spark, path, version).allFiles().collectAsList())


@dataclass(frozen=True)
class PartitionRows:
    """Rows of a table's files in one partition, by the files' statistics: ``rows`` read (the files'
    ``numRecords`` less what their deletion vectors delete) and ``deleted`` (what they delete)."""

    rows: int
    deleted: int


def partition_rows(spark: SparkSession, path: str, version: int, partition: str) -> PartitionRows | None:
    """The rows of the table at ``path`` (as of ``version``) in the files whose ``partition`` value is
    NULL, from its log (one small aggregate over the table's state, no data file read). None when a file
    has no statistics (the rows must then be counted)."""
    files = DataFrame(_snapshot_at(spark, path, version).allFiles().toDF(), spark)
    records = F.get_json_object("stats", "$.numRecords").cast("long")
    deleted = F.coalesce(F.col("deletionVector.cardinality"), F.lit(0))
    row = (
        files.where(F.col("partitionValues")[partition].isNull())
        .agg(
            F.sum(records).alias("physical"),
            F.sum(deleted).alias("deleted"),
            F.count_if(records.isNull()).alias("unknown"),
        )
        .first()
    )
    if row is None or row["unknown"]:
        return None
    return PartitionRows(int(row["physical"] or 0) - int(row["deleted"] or 0), int(row["deleted"] or 0))


def _snapshot_at(spark: SparkSession, path: str, version: int | None) -> Any:
    """The JVM snapshot of the table at ``path`` as of ``version`` (None: the latest)."""
    snapshot = latest_snapshot(spark, path)
    if version is not None and int(snapshot.version()) != version:
        log = snapshot.deltaLog()
        defaults = [getattr(log, f"getSnapshotAt$default${i}")() for i in (2, 3, 4)]
        snapshot = log.getSnapshotAt(version, *defaults)
    return snapshot


def snapshot_schema(snapshot: Any) -> T.StructType:
    """The table schema of a JVM ``Snapshot`` (from its metadata: no Spark job, no DataFrame)."""
    return T.StructType.fromJson(json.loads(snapshot.schema().json()))


def recorded_txn(spark: SparkSession, snapshot: Any, txn_app_id: str) -> int | None:
    """The ``txnVersion`` of Delta's ``SetTransaction`` for ``txn_app_id`` in ``snapshot`` (None: none).

    Read from the snapshot's checksum when it lists the transactions (the ``.crc`` file Delta writes with
    each commit, carried forward in memory after this process's own commits): no Spark job. Otherwise (a
    commit written without a checksum) from the snapshot's reconstructed state, Spark jobs over the log.
    Delta lists no transactions in the checksum of a table that sets
    ``delta.setTransactionRetentionDuration``, so the expired ones the reconstruction drops are dropped here
    too (tested).
    ``Snapshot.setTransactionsIfKnown`` is not used: it reconstructs the state even when the checksum has it.
    """
    listed = _checksum_txns(spark, snapshot)
    if listed is None:
        txn = snapshot.transactions().get(txn_app_id)
        return int(txn.get()) if txn.isDefined() else None
    return listed.get(txn_app_id)


def txn_app_ids(spark: SparkSession, snapshot: Any) -> set[str]:
    """Every ``txnAppId`` with a ``SetTransaction`` in ``snapshot`` (from its checksum when it lists them,
    as :func:`recorded_txn`; otherwise from the reconstructed state)."""
    listed = _checksum_txns(spark, snapshot)
    if listed is None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return set(jvm.scala.jdk.javaapi.CollectionConverters.asJava(snapshot.transactions()).keySet())
    return set(listed)


def _checksum_txns(spark: SparkSession, snapshot: Any) -> dict[str, int] | None:
    """``txnAppId`` -> ``txnVersion`` of the ``SetTransaction`` actions ``snapshot``'s checksum lists, or
    None when it lists none (no checksum, or one without them). One JVM call for them all (as JSON): one
    per action would cost a round trip each."""
    checksum = snapshot.checksumOpt()
    listed = checksum.get().setTransactions() if checksum.isDefined() else None
    if listed is None or not listed.isDefined():
        return None
    actions = json.loads(delta_json(spark, listed.get()))
    return {action["appId"]: int(action["version"]) for action in actions}


def delta_json(spark: SparkSession, value: Any) -> str:
    """``value`` (a JVM object: Delta's actions, commit infos, a Scala collection of them) as JSON, by
    Delta's own object mapper (its field names, Scala collections as arrays): one JVM call for them all,
    where reading them field by field costs a Py4J round trip a field."""
    mapper = jvm_class(spark, "org.apache.spark.sql.delta.util.JsonUtils").mapper()
    return str(mapper.writeValueAsString(value))


def append_to_table(
    frame: DataFrame, path: str, options: Mapping[str, str], sole: Refusal | None = None
) -> None:
    """Append ``frame`` to the Delta table at ``path`` as ``frame.write.format("delta").mode("append")
    .options(**options).save(path)`` does, without the snapshot state rebuild Delta's writer pays for a
    ``txnAppId``: one Spark job (the write) instead of four.

    Delta's writer looks a ``txnAppId``'s last version up in ``Snapshot.transactions``, which in Delta 4.4
    reconstructs the snapshot's whole state (three Spark jobs over the log) for every new snapshot, i.e.
    after every commit. Here the lookup is :func:`recorded_txn` on the transaction's own snapshot (the
    checksum, no job), and the rest is what the writer does: skip the commit if that version is recorded
    already; else write the files in the transaction and commit them with the ``SetTransaction``, the
    operation ``WRITE`` (mode Append) and the ``userMetadata``, having registered the app id as read, so a
    concurrent commit of the same app id fails this one with ``ConcurrentTransactionException`` as it
    would the writer's. The commit info (operation, parameters, metrics, user metadata) is the writer's.

    Falls back to the writer itself, which creates tables and enforces or evolves schemas, when the table
    does not exist yet or ``frame``'s columns are not exactly the table's (names and types).

    ``sole``: see :func:`prepare_append`.
    """
    prepare_append(frame, path, options, sole)()


def prepare_append(
    frame: DataFrame, path: str, options: Mapping[str, str], sole: Refusal | None = None
) -> Commit:
    """:func:`append_to_table` up to its commit: writes ``frame``'s files into the table's folder (a Spark
    job; nothing is committed) and returns the commit to make. When the writer itself must append (no
    table yet, other columns) nothing is written now and the commit is the writer's whole append; when the
    ``txnVersion`` is recorded already nothing is written and the commit does nothing (as the writer
    skips it). Files of a commit never made are not part of the table (VACUUM removes them).

    ``sole``: the writer (``options``' ``txnAppId``) must be the table's only one. Its first commit to an
    existing table raises ``sole(<the other's app id>)``, writing nothing, if another writer's
    ``SetTransaction`` is there; that first commit sets and reads :data:`FIRST_COMMITS`, so that of two
    first commits at the same moment the second fails (``ConcurrentTransactionException``) and, appended
    again, is refused. A sole writer that found no table creates it at its commit, unless another writer
    did so meanwhile (it then appends as a first commit); two writers creating it at the same moment race
    for its version 0, and the loser (``ProtocolChangedException``), appended again, is refused."""
    commit = _prepare_append(frame, path, options, sole, None)
    assert commit is not None  # only a refused check returns None
    return commit


#: What :func:`append_if` checks: the statistics of each file a write produced (Delta's ``stats`` of its
#: ``AddFile``, parsed: ``numRecords``, ``minValues``, ``maxValues``, ``nullCount``; {} for a file without).
FileStats = list[dict[str, Any]]


def append_if(
    frame: DataFrame, path: str, options: Mapping[str, str], accept: Callable[[FileStats], bool]
) -> bool:
    """:func:`append_to_table`, committed only if ``accept`` holds for the statistics of the files its write
    produced (they describe the rows written); returns whether the append is in the table (also True when
    its ``txnVersion`` is recorded already: the append was made before).

    The check costs no Spark job: the files are written first (the append's one job), then checked. When
    ``accept`` refuses them nothing is committed (the files written are no part of the table; VACUUM
    removes them), and also, without writing, when the table does not exist or ``frame``'s columns are not
    exactly the table's (the writer's own append, whose files cannot be checked first).
    """
    commit = _prepare_append(frame, path, options, None, accept)
    if commit is None:
        return False
    commit()
    return True


def _prepare_append(
    frame: DataFrame,
    path: str,
    options: Mapping[str, str],
    sole: Refusal | None,
    accept: Callable[[FileStats], bool] | None,
) -> Commit | None:
    """:func:`prepare_append`; with ``accept``, None (nothing committed) unless the statistics of the files
    written satisfy it (see :func:`append_if`)."""
    spark = frame.sparkSession
    scala = jvm_class(spark, "scala.jdk.javaapi.CollectionConverters")
    txn = checked_transaction(spark, path)
    snapshot = txn.snapshot()
    table_schema = snapshot_schema(snapshot)
    if int(snapshot.version()) < 0 and sole is not None:
        return lambda: _create_or_append(frame, path, options, sole)
    if int(snapshot.version()) < 0 or not _same_columns(frame.schema, table_schema):
        if accept is not None:
            return None
        return lambda: frame.write.format("delta").mode("append").options(**options).save(path)
    actions = _fenced_txn_actions(spark, txn, options, snapshot)
    if actions is None:
        return lambda: None  # Delta's writer skips it too: the batch is there
    if sole is not None:
        _fence_first_commit(spark, txn, options["txnAppId"], actions, sole)
    passed = {k: v for k, v in options.items() if k not in ("txnAppId", "txnVersion", "userMetadata")}
    conf = spark._jsparkSession.sessionState().conf()
    scala_map = jvm_class(spark, "org.apache.spark.api.python.PythonUtils").toScalaMap(passed)
    writer = jvm_class(spark, "org.apache.spark.sql.delta.DeltaOptions")(scala_map, conf)
    ordered = frame.selectExpr(
        *[f"`{name}`" for name in table_schema.fieldNames()]
    )  # 1 JVM call, not 1 a column
    written = scala.asJava(txn.writeFiles(ordered._jdf, jvm_class(spark, "scala.Some")(writer)))
    if accept is not None and not accept(_added_stats(spark, written)):
        return None
    actions.addAll(written)
    operation = _write_operation(spark, "Append", options.get("userMetadata"))
    return lambda: txn.commit(scala.asScala(actions).toList(), operation)


def _added_stats(spark: SparkSession, actions: Any) -> FileStats:
    """The parsed statistics of the ``AddFile`` actions among ``actions`` (a Java list of Delta's file
    actions), serialized in one JVM call: one per action would cost round trips per file. An ``AddFile`` is
    told apart by its fields (``modificationTime``, no ``deletionTimestamp``: not a ``RemoveFile``, not an
    ``AddCDCFile``)."""
    serialized = json.loads(delta_json(spark, actions))
    return [
        json.loads(action["stats"]) if action.get("stats") else {}
        for action in serialized
        if "modificationTime" in action and "deletionTimestamp" not in action
    ]


def commit_confs(metadata: str, txn: tuple[str, int] | None) -> dict[str, str]:
    """The session confs under which Delta's DML commits (MERGE, DELETE, VACUUM) carry ``metadata`` as
    ``userMetadata`` and, if given, ``(txnAppId, txnVersion)``."""
    confs = {_USER_METADATA: metadata}
    if txn is not None:
        confs.update({_TXN_APP_ID: txn[0], _TXN_VERSION: str(txn[1])})
    return confs


def prepare_concurrently(spark: SparkSession, prepares: Sequence[Callable[[], Commit]]) -> list[Commit]:
    """Run ``prepares`` (each writes files and returns its commit, as :func:`prepare_append` does) at the
    same time, one thread each, so that their Spark write jobs share the cores; returns the commits in the
    order of ``prepares``, for the caller to make in its own order. Each thread inherits the calling
    thread's Spark local properties (job group, scheduler pool) and ``spark``'s tags.

    Waits for every one of them. Raises the first failure, in that order (nothing is committed: the files
    already written are no part of any table).
    """
    if len(prepares) <= 1:
        return [prepare() for prepare in prepares]
    with ThreadPoolExecutor(max_workers=len(prepares), thread_name_prefix="lakehouse-append") as pool:
        inherit = inheritable_thread_target(spark)
        futures = [pool.submit(inherit(prepare)) for prepare in prepares]
        wait(futures)
    return [future.result() for future in futures]


def commit_file_actions(
    spark: SparkSession, path: str, actions: Sequence[Any], options: Mapping[str, str], mode: str
) -> bool:
    """Commit Delta file actions (``AddFile``/``RemoveFile`` objects, their files in place) to the table at
    ``path`` as one ``WRITE`` commit in save ``mode`` (``Append`` or ``Overwrite``), with ``options``'
    ``txnAppId``/``txnVersion`` (fenced as :func:`append_to_table` fences them) and ``userMetadata``.

    Returns False, committing nothing, when that txn version is recorded already. Delta validates nothing
    of the actions (a file removed must be the table's): the caller guarantees it.
    """
    scala = jvm_class(spark, "scala.jdk.javaapi.CollectionConverters")
    txn = checked_transaction(spark, path)
    committed = _fenced_txn_actions(spark, txn, options)
    if committed is None:
        return False
    for action in actions:
        committed.add(action)
    txn.commit(scala.asScala(committed).toList(), _write_operation(spark, mode, options.get("userMetadata")))
    return True


def _fenced_txn_actions(
    spark: SparkSession, txn: Any, options: Mapping[str, str], snapshot: Any = None
) -> Any:
    """The actions a commit of ``txn`` starts with: the ``SetTransaction`` of ``options``' ``txnAppId`` and
    ``txnVersion`` (the app id registered as read, so a concurrent commit of it fails this one), or none
    without them; None when that version is recorded already (the commit must be skipped). ``snapshot``:
    ``txn``'s, when the caller has it."""
    actions = jvm_class(spark, "java.util.ArrayList")()
    app_id, version = options.get("txnAppId"), options.get("txnVersion")
    if app_id is None or version is None:
        return actions
    recorded = recorded_txn(spark, txn.snapshot() if snapshot is None else snapshot, app_id)
    if recorded is not None and recorded >= int(version):
        return None
    txn.readTxn().addOne(app_id)
    actions.add(_set_transaction(spark, app_id, int(version), _now_millis()))
    return actions


def _now_millis() -> int:
    """The time now in epoch milliseconds, as Delta's ``SetTransaction.lastUpdated`` has it."""
    return int(time.time() * 1000)


def _set_transaction(spark: SparkSession, app_id: str, version: int, now: int) -> Any:
    """Delta's ``SetTransaction`` action of ``app_id`` at ``version``, last updated at ``now`` (epoch ms)."""
    long_now = jvm_class(spark, "java.lang.Long")(now)
    return jvm_class(spark, "org.apache.spark.sql.delta.actions.SetTransaction")(
        app_id, version, jvm_class(spark, "scala.Some")(long_now)
    )


def _create_or_append(frame: DataFrame, path: str, options: Mapping[str, str], sole: Refusal) -> None:
    """Create the table at ``path`` with ``frame``'s rows (Delta's writer), or, if it exists by now (another
    writer created it), append to it as the sole writer ``sole`` refuses otherwise."""
    if DeltaTable.isDeltaTable(frame.sparkSession, path):
        append_to_table(frame, path, options, sole)
    else:
        frame.write.format("delta").mode("append").options(**options).save(path)


def other_writers(spark: SparkSession, snapshot: Any, txn_app_id: str) -> list[str] | None:
    """None if ``txn_app_id`` has committed to ``snapshot``'s table (its ``SetTransaction`` is there), else
    the ``txnAppId`` of every other writer that has, sorted (no Spark job when the checksum lists them)."""
    if recorded_txn(spark, snapshot, txn_app_id) is not None:
        return None
    return sorted(a for a in txn_app_ids(spark, snapshot) if a not in (txn_app_id, FIRST_COMMITS))


def _fence_first_commit(spark: SparkSession, txn: Any, txn_app_id: str, actions: Any, sole: Refusal) -> None:
    """A sole writer's first commit (see :func:`prepare_append`): raise ``sole(other)`` if another writer
    committed to ``txn``'s snapshot; else add the :data:`FIRST_COMMITS` fence to ``actions``."""
    others = other_writers(spark, txn.snapshot(), txn_app_id)
    if others is None:
        return
    if others:
        raise sole(others[0])
    txn.readTxn().addOne(FIRST_COMMITS)
    version = int(txn.snapshot().version()) + 1
    actions.add(_set_transaction(spark, FIRST_COMMITS, version, _now_millis()))


def _write_operation(spark: SparkSession, mode: str, user_metadata: str | None) -> Any:
    """Delta's ``WRITE`` operation in save ``mode``, no ``partitionBy`` given, with ``user_metadata``."""
    none, some = jvm_class(spark, "scala.Option").empty(), jvm_class(spark, "scala.Some")
    no_columns = getattr(jvm_class(spark, "scala.collection.immutable.Nil$"), "MODULE$")  # List()
    return jvm_class(spark, "org.apache.spark.sql.delta.DeltaOperations$Write")(
        getattr(jvm_class(spark, "org.apache.spark.sql.SaveMode"), mode),
        some(no_columns),
        none,
        none if user_metadata is None else some(user_metadata),
        none,
        none,
        none,
        none,
        none,
    )


def _same_columns(schema: T.StructType, table: T.StructType) -> bool:
    """Whether ``schema`` has exactly the ``table``'s columns (names and types, in any order)."""
    mine = {field.name: field.dataType for field in schema.fields}
    return len(schema.fields) == len(table.fields) and mine == {f.name: f.dataType for f in table.fields}


def commit_infos(
    spark: SparkSession,
    path: str,
    limit: int | None = None,
    *,
    after: int | None = None,
    snapshot: Any = None,
) -> list[dict[str, Any]]:
    """The commit infos of the table's newest ``limit`` commits (every retained one if None), newest first.

    ``after``: only the retained commits with a version above it (``limit`` is then ignored). Each as
    ``DESCRIBE HISTORY`` has it (``version``, ``timestamp`` in epoch milliseconds, ``operation``,
    ``operationParameters``, ``operationMetrics``, ``userMetadata``, ...; absent fields missing), without
    building a DataFrame. Up to :data:`_DRIVER_READS` commits are read file by file on the driver (no Spark
    job); more by Delta's history reader (one Spark job reading the commit files in parallel).
    ``snapshot``: the table's snapshot to read them from, just taken by the caller (default: the newest,
    looked up).
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    snapshot = latest_snapshot(spark, path) if snapshot is None else snapshot
    latest = int(snapshot.version())
    first = 0 if limit is None else max(0, latest - limit + 1)
    first = first if after is None else max(0, after + 1)
    if latest - first + 1 <= _DRIVER_READS:
        return _read_commit_infos(spark, snapshot, first, latest)
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    history = log.history().getHistory(first, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    infos: list[dict[str, Any]] = json.loads(delta_json(spark, history))
    return infos


def _read_commit_infos(spark: SparkSession, snapshot: Any, first: int, last: int) -> list[dict[str, Any]]:
    """The commit infos of versions ``last`` down to ``first`` still in the log, read on the driver by
    :data:`_DRIVER_READ_THREADS` threads (on an object store each read is a request: they overlap).

    Delta's log cleanup removes the oldest commit files first: the infos stop at the newest version whose
    file is missing. The timestamp is the commit's in-commit timestamp if it has one, else its file's
    modification time (what ``DESCRIBE HISTORY`` reports).
    """
    if first > last:
        return []
    log = snapshot.deltaLog()
    conf = log.newDeltaHadoopConf()
    files = jvm_class(spark, "org.apache.spark.sql.delta.util.DeltaCommitFileProvider").apply(snapshot)
    store = log.store()
    file_system = files.deltaFile(last).getFileSystem(conf)

    def read(version: int) -> dict[str, Any] | None:
        try:
            status = file_system.getFileStatus(files.deltaFile(version))
        except Py4JJavaError as error:
            if error.java_exception.getClass().getName() != "java.io.FileNotFoundException":
                raise
            return None
        info = _commit_info(store.readAsIterator(status, conf))
        info["version"] = version
        if "inCommitTimestamp" in info:
            info["timestamp"] = info["inCommitTimestamp"]
        else:
            info["timestamp"] = status.getModificationTime()
        return info

    versions = range(last, first - 1, -1)
    with ThreadPoolExecutor(min(_DRIVER_READ_THREADS, len(versions))) as pool:
        read_infos = list(pool.map(read, versions))
    infos = []
    for info in read_infos:
        if info is None:
            break
        infos.append(info)
    return infos


def _commit_info(lines: Any) -> dict[str, Any]:
    """The ``commitInfo`` action among a commit file's ``lines`` (a JVM iterator, closed here); {} if none.

    Delta writes it first, so usually one line is read.
    """
    try:
        while lines.hasNext():
            action = json.loads(lines.next())
            if "commitInfo" in action:
                info: dict[str, Any] = action["commitInfo"]
                return info
        return {}
    finally:
        lines.close()


def commit_metrics(spark: SparkSession, path: str, version: int) -> dict[str, str]:
    """The ``operationMetrics`` of the table's commit ``version`` ({} if it is not retained)."""
    for info in commit_infos(spark, path, after=version - 1):
        if int(info["version"]) == version:
            return dict(info.get("operationMetrics") or {})
    return {}


def require_writer_name(writer: str | None) -> str | None:
    """``writer`` if it can name a writer (None: the unnamed one); else :class:`InvalidInputError`."""
    if writer is not None and (not isinstance(writer, str) or not writer or "/" in writer):
        raise InvalidInputError(f"writer must be a non-empty string without '/', got {writer!r}")
    return writer


def recorded_state(
    commits: Sequence[Mapping[str, Any]], app_id: str, fields: Sequence[str], version: int
) -> dict[str, Any]:
    """The state (``fields``) that ``commits`` (commit infos with ``version`` and ``userMetadata``, any
    engine's) of ``app_id`` at or below ``version`` recorded: per field the largest value ({} if none)."""
    state: dict[str, Any] = {}
    for row in commits:
        meta = parse_metadata(row.get("userMetadata"))
        if int(row["version"]) > version or meta is None or meta.get("app_id") != app_id:
            continue
        state = _largest(state, {f: meta[f] for f in fields if meta.get(f) is not None})
    return state


def parse_metadata(text: str | None) -> dict[str, Any] | None:
    """The lakehouse part of a commit's ``userMetadata``, or None (none, not JSON, not lakehouse's)."""
    if not text:
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return None
    meta = parsed.get(METADATA_KEY) if isinstance(parsed, dict) else None
    return meta if isinstance(meta, dict) else None


def _largest(a: Any, b: Any) -> Any:
    """The larger of two recorded state values: per field for dicts, None counting as absent."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _largest(a.get(k), b.get(k)) for k in a.keys() | b.keys()}
    if a is None or b is None:
        return b if a is None else a
    return max(a, b)
