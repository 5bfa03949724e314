"""As-of joins that wait for late table data (KIP-923's grace period), exactly once across runs.

A stream record with ``t > table stream_time - grace`` is not joined yet: the table may still receive the
version valid at ``t``. It waits in a *pending* Delta table and is joined by a later run, once the store's
stream time has passed ``t + grace``. Records at or before the cutoff (and records with a NULL time, which
can never match) are joined now. Unlike Kafka, where the buffer is evicted by *stream* time, the cutoff
here is the *table's* stream time: a batch job can look at how far the table has got.

Exactly once: a run is one batch (``batch_id``, increasing). It makes two commits, each recording the
batch id with Delta's idempotent-write ``txnAppId``/``txnVersion`` (the app id names the pipeline by its
pending table, so pipelines sharing a sink never skip each other's batches): (1) append the joined
records to the sink, recording the cutoff used; (2) overwrite the pending table with the records still
waiting. A re-run of a batch whose pending commit exists does nothing; a re-run after a crash between
the two commits finds the sink commit, reuses its cutoff (so it splits the records as the crashed run
did), skips the append and writes the pending table. Every stream record is therefore emitted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.asof._source import source_of
from lakehouse.asof.join import JoinOptions, join_source
from lakehouse.commit_log import CommitLog
from lakehouse.errors import InvalidInputError, SchemaMismatchError
from lakehouse.paths import resolve_path
from lakehouse.schemas import require_columns
from lakehouse.times import from_micros, micros, timestamp_lit
from lakehouse.versioned.store import VersionedStore

APP_ID = "lakehouse.asof_grace"
_CUTOFF = "cutoff_us"


@dataclass(frozen=True)
class GraceRunResult:
    """One run: rows appended to the sink, records left pending, the cutoff used, whether a replay."""

    batch_id: int
    emitted: int
    pending: int
    cutoff: datetime | None
    replayed: bool = False


def asof_join_with_grace(
    stream_df: DataFrame,
    store: VersionedStore,
    *,
    grace: timedelta,
    pending_path: str,
    sink_path: str,
    batch_id: int,
    timestamp: str = "timestamp",
    how: str = "left",
    prefix: str = "",
    suffix: str = "",
) -> GraceRunResult:
    """Join the records of this batch and the pending ones whose time the table has passed by ``grace``.

    Args:
        stream_df: This batch's new stream records (same columns in every batch).
        store: The versioned store (a grace period needs the table's stream time).
        grace: How long behind the table's stream time a record must be to be joined; <= the store's
            history retention.
        pending_path: Delta table of the waiting records.
        sink_path: Delta table of the join output.
        batch_id: Increasing run number; a batch already committed is not applied again.

    Raises:
        InvalidInputError: a negative grace, a grace above the history retention, a bad batch id.
    """
    _check_grace(store, grace)
    if timestamp not in stream_df.columns:
        raise SchemaMismatchError("as-of join with grace: stream side", [timestamp])
    pending_path, sink_path = resolve_path(pending_path), resolve_path(sink_path)
    options = JoinOptions(timestamp, how, prefix, suffix)
    spark = stream_df.sparkSession
    source = source_of(store, None)  # rows and stream time of one Delta version of the store
    if DeltaTable.isDeltaTable(spark, sink_path):  # checked before anything is written
        require_columns(
            spark.read.format("delta").load(sink_path).schema,
            join_source(stream_df, source, options).frame.schema,
            f"the grace sink {sink_path} cannot take the join's rows (nothing was written)",
        )
    if not DeltaTable.isDeltaTable(spark, pending_path):
        CommitLog(spark, pending_path, APP_ID).check_new(batch_id, None)  # a bad batch id creates nothing
        stream_df.limit(0).write.format("delta").save(pending_path)
    writer = f"{APP_ID}:{delta_ops.table_metadata(spark, pending_path).id}"
    pending, sink = CommitLog(spark, pending_path, writer), CommitLog(spark, sink_path, writer)
    recorded = pending.read()
    if not pending.check_new(batch_id, recorded.last_batch_id):
        return GraceRunResult(
            batch_id, 0, _count(spark, pending_path), _recorded_cutoff(spark, sink, batch_id), True
        )
    cutoff_us = _cutoff_us(spark, source.stream_time_us, grace, sink, batch_id)
    # The pending table pinned to the version read (it is overwritten later in the same run).
    waiting = spark.read.format("delta").option("versionAsOf", recorded.version).load(pending_path)
    combined = stream_df.unionByName(waiting)
    t = F.col(timestamp)
    ready_now = t.isNull() if cutoff_us is None else t.isNull() | (t <= timestamp_lit(cutoff_us))
    joined = join_source(combined.where(ready_now), source, options).frame
    # Order matters for crash safety: the sink commit records the cutoff a re-run must reuse.
    _append_to_sink(joined, sink, batch_id, cutoff_us)
    emitted = _rows_written(sink, batch_id)
    _write_pending(combined.where(~ready_now), pending, batch_id)
    cutoff = None if cutoff_us is None else from_micros(cutoff_us)
    return GraceRunResult(batch_id, emitted, _count(spark, pending_path), cutoff)


def _append_to_sink(joined: DataFrame, sink: CommitLog, batch_id: int, cutoff_us: int | None) -> None:
    """Commit 1: the joined records, with the cutoff; skipped by Delta if the batch is already there."""
    sink.append(joined, batch_id, {}, **{_CUTOFF: cutoff_us})


def _write_pending(waiting: DataFrame, pending: CommitLog, batch_id: int) -> None:
    """Commit 2: the records still waiting replace the pending table (skipped if the batch is there)."""
    options = pending.writer_options(batch_id, {})
    waiting.write.format("delta").mode("overwrite").options(**options).save(pending.path)


def _check_grace(store: VersionedStore, grace: timedelta) -> None:
    if not isinstance(store, VersionedStore):
        raise InvalidInputError("a grace period needs a VersionedStore (its stream time drives the cutoff)")
    if grace < timedelta(0):
        raise InvalidInputError(f"grace must be >= 0, got {grace}")
    if grace > store.settings.history_retention:
        raise InvalidInputError(
            f"history retention ({store.settings.history_retention}) must be at least "
            f"the grace period ({grace})"
        )


def _cutoff_us(
    spark: SparkSession, stream_time_us: int | None, grace: timedelta, sink: CommitLog, batch_id: int
) -> int | None:
    """The cutoff a crashed run of this batch recorded, else ``table stream time - grace``."""
    if DeltaTable.isDeltaTable(spark, sink.path):
        found = sink.batch_commit(batch_id)
        if found is not None:
            recorded = found[1].get(_CUTOFF)
            return None if recorded is None else int(recorded)
    return None if stream_time_us is None else stream_time_us - micros(grace)


def _recorded_cutoff(spark: SparkSession, sink: CommitLog, batch_id: int) -> datetime | None:
    found = sink.batch_commit(batch_id) if DeltaTable.isDeltaTable(spark, sink.path) else None
    recorded = None if found is None else found[1].get(_CUTOFF)
    return None if recorded is None else from_micros(int(recorded))


def _rows_written(sink: CommitLog, batch_id: int) -> int:
    found = sink.batch_metrics(batch_id)
    return 0 if found is None else int(found[1].get("numOutputRows", 0))


def _count(spark: SparkSession, path: str) -> int:
    return spark.read.format("delta").load(path).count()
