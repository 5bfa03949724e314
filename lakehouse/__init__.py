"""lakehouse: Kafka Streams' state semantics (KIP-889, KIP-655, KIP-441/708) on Delta Lake.

The public API is what ``__all__`` lists: the state stores, the as-of join, the assignor, their results,
the session and configuration entry points, and the errors; and ``lakehouse.read``, the JVM-free reads
through delta-rs (``lakehouse.read.store(path).get(key)``). Everything else is internal.

Names are imported on first use (PEP 562), so ``import lakehouse.config`` or the ``lakehouse`` command's
start does not import Spark, Delta and Great Expectations before they are needed.
"""

from __future__ import annotations

from lakehouse._lazy import lazy_names

__version__ = "0.1.0"

#: Module -> the public names it provides.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "lakehouse.asof": (
        "AsOfJoinResult",
        "AsOfJoinStats",
        "ColumnClashError",
        "GraceRunResult",
        "asof_join",
        "asof_join_with_grace",
        "asof_join_with_stats",
    ),
    "lakehouse.assignment": (
        "AssignmentConfig",
        "AssignmentInputError",
        "AssignmentResult",
        "AssignmentStore",
        "ClientState",
        "InvalidAssignmentError",
        "NoSubscriptionsError",
        "Subscription",
        "assign",
        "validate_assignment",
    ),
    "lakehouse.assignment.job": ("run_assignment",),
    "lakehouse.config": (
        "Settings",
        "load_settings",
    ),
    "lakehouse.dedup": (
        "Deduplicator",
        "DedupStats",
        "PurgeResult",
    ),
    "lakehouse.errors": (
        "ConcurrentWriteError",
        "DamagedTableError",
        "EngineUnsupportedError",
        "InvalidConfigError",
        "InvalidInputError",
        "JarResolutionError",
        "LakehouseError",
        "LakehouseInternalError",
        "NotALakehouseTableError",
        "ReadOnlyReplicaError",
        "ReplayMismatchWarning",
        "SchemaMismatchError",
        "SparkSetupError",
        "StoreSettingsConflictError",
        "UnarbitratedWritersWarning",
    ),
    "lakehouse.pipeline": (
        "BatchMetrics",
        "PipelineSpec",
        "load_pipeline",
        "run_pipeline",
        "spec_from_values",
    ),
    "lakehouse.quality": (
        "QualityReport",
        "TableVerdict",
        "mark_enriched",
        "run_quality",
    ),
    "lakehouse.replica": (
        "ChangeDataFeedDisabledError",
        "NotAReplicaError",
        "Replica",
        "ReplicaBeyondRetentionWarning",
        "ReplicaError",
        "ReplicaLag",
        "ReplicaReinitializedWarning",
        "Shard",
        "SyncResult",
        "VacuumReport",
    ),
    "lakehouse.replica.failover": (
        "DrillReport",
        "catch_up",
        "task_lags",
    ),
    "lakehouse.session": ("get_spark",),
    "lakehouse.versioned": (
        "ExpireResult",
        "PutAllResult",
        "PutResult",
        "PutStatus",
        "SealResult",
        "VersionedRecord",
        "VersionedStore",
        "default_segment_interval",
    ),
}
_names, __getattr__, __dir__ = lazy_names(__name__, globals(), _EXPORTS)
__all__ = ["__version__", *_names]
