"""The pipeline's stages, each a function of one :class:`~lakehouse.pipeline.stream.Run`.

``ingest``      records source -> Deduplicator.run (seen-ID index, quarantine) -> ``deduped`` sink
``materialize`` changelog source -> VersionedStore.put_all -> ``store``
``enrich``      ``deduped`` (a Delta stream) -> as-of join with ``store`` (optional grace) -> ``enriched``
``maintain``    seal, expire + VACUUM the store, purge the index, OPTIMIZE tables of many new files: when due
``assign``      assign the latest subscriptions of the assignment store (when the spec names one)

The streaming stages write only through batch-id-keyed commits (see :mod:`lakehouse.pipeline.stream`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from delta.tables import DeltaTable
from pyspark.sql import DataFrame

from lakehouse import delta_ops
from lakehouse.asof.grace import asof_join_with_grace
from lakehouse.asof.join import asof_join_with_stats
from lakehouse.assignment.job import assign_generation
from lakehouse.assignment.store import AssignmentStore
from lakehouse.commit_log import CommitLog
from lakehouse.dedup.deduplicator import Deduplicator
from lakehouse.errors import InvalidConfigError
from lakehouse.history import NewestCommits
from lakehouse.pipeline.due import Due, expire_due, optimize_due, purge_due, seal_due, vacuum_due
from lakehouse.pipeline.metrics import BatchMetrics, current_version, rows_committed
from lakehouse.pipeline.sources import read_source, read_stream
from lakehouse.pipeline.spec import PipelineSpec
from lakehouse.pipeline.stream import Run, StageFailedError, run_stream
from lakehouse.replica.registry import file_retention_hours
from lakehouse.replica.replica import maintain_replicas
from lakehouse.versioned.policy import SealPolicy
from lakehouse.versioned.records import PutAllResult
from lakehouse.versioned.store import VersionedStore

ENRICH_APP_ID = "lakehouse.pipeline.enrich"
#: Parts of Spark's one-line stop (:class:`StageFailedError`) when a source's offsets went backwards: a
#: Kafka partition's offsets (a topic re-created), a Delta source re-created (another table id).
_RESET_SIGNS = ("offset was changed from", "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE")


def ingest(run: Run) -> list[BatchMetrics]:
    """Deduplicate new records into the ``deduped`` sink, exactly once per record."""
    spec, tables = run.spec, run.spec.tables
    source = read_source(run.spark, spec, "records")
    dedup = Deduplicator.create(
        run.spark,
        tables.dedup_index,
        by=spec.dedup_by,
        interval=spec.dedup_interval,
        quarantine_path=tables.quarantine if spec.quarantine else None,
        writer=spec.name,
        incarnation=spec.records_incarnation,
    )

    def handle(batch: DataFrame, batch_id: int) -> BatchMetrics:
        stats = dedup.run(batch, batch_id, sink=tables.deduped)
        version = stats.sink_version  # the version of the batch's sink commit
        if stats.sink_rows and not stats.replay and version is not None:
            run.freshness.ingested(batch, batch_id, spec.records_format, tables.checkpoint("ingest"), version)
        return BatchMetrics(
            spec.name,
            "ingest",
            batch_id,
            records_in=stats.input,
            records_out=stats.sink_rows or 0,
            duplicates=stats.duplicates,
            late=stats.late,
            replay=stats.replay,
            table=tables.deduped,
            version=version,
            details={
                "redelivered": stats.forwarded - (stats.sink_rows or 0),
                # KIP-655 replays, per record: a replayed batch id forwards each record again.
                "replayed": stats.forwarded if stats.replay else stats.replayed,
            },
        )

    try:
        return run_stream(run, "ingest", source, handle)
    except StageFailedError as error:
        if not any(sign in str(error) for sign in _RESET_SIGNS):
            raise
        raise StageFailedError(
            f"{error} If the source {spec.records} was re-created or its offsets started again, acknowledge "
            f"the reset with records_incarnation={spec.records_incarnation + 1} (see docs/recovery.md)"
        ) from None


def materialize(run: Run) -> list[BatchMetrics]:
    """Put new changelog records into the versioned store, one commit per micro-batch."""
    spec, tables = run.spec, run.spec.tables
    source = read_source(run.spark, spec, "changelog")
    if not spec.store_key:
        raise InvalidConfigError("store_key", "materialize needs store_key and store_values")
    store = changelog_store(spec, tables.store, source)

    def handle(batch: DataFrame, batch_id: int) -> BatchMetrics:
        result = put_changelog(spec, store, batch, batch_id)
        return BatchMetrics(
            spec.name,
            "materialize",
            batch_id,
            records_in=result.records,
            records_out=result.rows_written,
            late=result.dropped,
            replay=result.replayed,
            table=tables.store,
            version=current_version(run.spark, tables.store),
            details={"stream_time": str(result.stream_time)}
            | ({} if result.sealed_rows is None else {"sealed_rows": result.sealed_rows}),
        )

    return run_stream(run, "materialize", source, handle)


def changelog_store(spec: PipelineSpec, path: str, changelog: DataFrame) -> VersionedStore:
    """The versioned store at ``path`` of ``spec``'s ``changelog`` (created with the spec's settings, or
    opened if it exists with them), written by the pipeline (its batch ids are the pipeline's own) and
    sealed by its batches as ``seal_pending_percent`` says."""
    schema = changelog.select(*spec.store_key, *spec.store_values).schema
    percent = spec.seal_pending_percent
    return VersionedStore.create(
        changelog.sparkSession,
        path,
        spec.store_key,
        schema,
        spec.history_retention,
        writer=spec.name,
        seal_policy=SealPolicy(pending_per_live_key=percent / 100) if percent else None,
    )


def put_changelog(spec: PipelineSpec, store: VersionedStore, batch: DataFrame, batch_id: int) -> PutAllResult:
    """Put a batch of ``spec``'s changelog into ``store`` as ``materialize`` puts each micro-batch."""
    return store.put_all(
        batch,
        batch_id=batch_id,
        sequence_by=spec.changelog_sequence_by or None,
        deletes=spec.changelog_deletes or None,
        timestamp=spec.changelog_timestamp,
    )


def enrich(run: Run) -> list[BatchMetrics]:
    """Join new deduplicated records with the store as of their time into ``enriched``, exactly once."""
    spec, tables = run.spec, run.spec.tables
    if not DeltaTable.isDeltaTable(run.spark, tables.store):
        raise InvalidConfigError("changelog", f"no versioned store at {tables.store}: run materialize first")
    if not DeltaTable.isDeltaTable(run.spark, tables.deduped):
        return []  # ingest has deduplicated nothing yet: nothing new to join
    source = read_stream(run.spark, "deduped", tables.deduped, "delta", "", spec.max_files_per_trigger)
    store = VersionedStore.open(run.spark, tables.store)
    handle = _join_with_grace(run, store) if spec.grace is not None else _join_now(run, store)
    return run_stream(run, "enrich", source, handle)


def _join_now(run: Run, store: VersionedStore) -> Callable[[DataFrame, int], BatchMetrics]:
    spec, tables = run.spec, run.spec.tables

    def handle(batch: DataFrame, batch_id: int) -> BatchMetrics:
        joined = asof_join_with_stats(batch, store, timestamp=spec.join_timestamp, prefix=spec.join_prefix)
        before = current_version(run.spark, tables.enriched)
        CommitLog(run.spark, tables.enriched, ENRICH_APP_ID, writer=spec.name).append(
            joined.frame, batch_id, {}
        )
        version, rows = rows_committed(run.spark, tables.enriched, ENRICH_APP_ID, batch_id, writer=spec.name)
        lag = run.freshness.enriched(run.spark, tables.checkpoint("enrich"), batch_id, time.time())
        return BatchMetrics(
            spec.name,
            "enrich",
            batch_id,
            records_in=joined.stats.records,
            records_out=rows,
            expired_lookups=joined.stats.expired_lookups,
            replay=version is not None and before is not None and version <= before,
            table=tables.enriched,
            version=version,
            details={} if lag is None else {"freshness_s": lag.details()},
            said="" if lag is None else lag.said(),
        )

    return handle


def _join_with_grace(run: Run, store: VersionedStore) -> Callable[[DataFrame, int], BatchMetrics]:
    spec, tables = run.spec, run.spec.tables
    assert spec.grace is not None

    def handle(batch: DataFrame, batch_id: int) -> BatchMetrics:
        result = asof_join_with_grace(
            batch,
            store,
            grace=spec.grace,
            pending_path=tables.pending,
            sink_path=tables.enriched,
            batch_id=batch_id,
            timestamp=spec.join_timestamp,
            prefix=spec.join_prefix,
        )
        return BatchMetrics(
            spec.name,
            "enrich",
            batch_id,
            records_in=batch.count(),
            records_out=result.emitted,
            replay=result.replayed,
            table=tables.enriched,
            version=current_version(run.spark, tables.enriched),
            details={"pending": result.pending, "cutoff": str(result.cutoff)},
        )

    return handle


def maintain(run: Run) -> list[BatchMetrics]:
    """Seal the store's pending versions, expire and VACUUM it, purge the dedup index, compact tables of
    many small files: each task only when it is due (:mod:`lakehouse.pipeline.due`);
    ``details["skipped"]`` says why the others were not.
    """
    spark, spec, tables = run.spark, run.spec, run.spec.tables
    start = time.monotonic()
    details: dict[str, object] = {}
    skipped: dict[str, str] = {}
    said: list[str] = []

    def when(task: str, due: Due) -> bool:
        if not due:
            skipped[task] = due.reason
            said.append(f"{task}: skipped, {due.said}")
        return due.due

    commits = NewestCommits(spark)
    if DeltaTable.isDeltaTable(spark, tables.store):
        store = VersionedStore.open(spark, tables.store)
        if when("seal", seal_due(store.pending_commits(), commits.of(tables.store), spec.seal_min_rows)):
            details["sealed_rows"] = store.seal().rows_written
        if when("expire", expire_due(store, commits.of(tables.store))):
            details["expired_versions"] = store.expire().removed_rows
        retention = timedelta(hours=file_retention_hours(spark, tables.store))
        due = vacuum_due(commits.of(tables.store), retention, spec.vacuum_interval, datetime.now(UTC))
        if when("vacuum", due):
            details["vacuumed_files"] = store.vacuum()
        _maintain_replicas(run, details)
    if DeltaTable.isDeltaTable(spark, tables.dedup_index):
        dedup = Deduplicator.open(spark, tables.dedup_index)
        if when("purge", purge_due(dedup, commits.of(tables.dedup_index))):
            details["purged_entries"] = dedup.purge().rows_removed
    compacted = []
    for path in (tables.deduped, tables.enriched, tables.store, tables.dedup_index, tables.quarantine):
        name = path.rsplit("/", 1)[-1]
        newest = commits.of(path) if DeltaTable.isDeltaTable(spark, path) else None
        by_batch = path == tables.quarantine
        if newest is not None and when(
            f"optimize {name}", optimize_due(newest, spec.optimize_min_files, batch_partitions=by_batch)
        ):
            delta_ops.compact(spark, path)
            compacted.append(name)
    details["optimized"] = ",".join(compacted) or "none"
    if skipped:
        details["skipped"] = skipped
    done = [f"{key.replace('_', ' ')} {value}" for key, value in details.items() if key != "skipped"]
    metrics = BatchMetrics(
        spec.name,
        "maintain",
        None,
        seconds=time.monotonic() - start,
        details=details,
        said="; ".join(done + said),
    )
    run.emit(metrics)
    return [metrics]


def _maintain_replicas(run: Run, details: dict[str, object]) -> None:
    """The store's registered replicas seal, compact, vacuum and checkpoint themselves on the store's due
    rules."""
    spec = run.spec
    replicas = maintain_replicas(
        run.spark, spec.tables.store, spec.seal_min_rows, spec.optimize_min_files, spec.vacuum_interval
    )
    if replicas:
        details["replicas"] = "; ".join(
            f"{path.rsplit('/', 1)[-1]}: " + ", ".join(f"{task} {what}" for task, what in done.items())
            for path, done in replicas.items()
        )


def assign(run: Run) -> list[BatchMetrics]:
    """Assign the latest subscriptions of the spec's assignment store (nothing until it has some)."""
    spec = run.spec
    if not spec.assignment_root or not DeltaTable.isDeltaTable(
        run.spark, f"{spec.assignment_root}/subscriptions"
    ):
        return []
    start = time.monotonic()
    store = AssignmentStore.open(run.spark, spec.assignment_root)
    outcome = assign_generation(store)
    metrics = BatchMetrics(
        spec.name,
        "assign",
        None,
        records_in=len(outcome.subscription.clients),
        records_out=len(outcome.result.moves),
        replay=not outcome.written,
        table=store.assignment_path,
        version=current_version(run.spark, store.assignment_path),
        seconds=time.monotonic() - start,
        details={"generation": outcome.subscription.generation, "warmups": len(outcome.warmups)},
    )
    run.emit(metrics)
    return [metrics]
