"""lakehouse: Kafka Streams' state semantics (KIP-889, KIP-655, KIP-441/708) on Delta Lake.

The public API is what ``__all__`` lists: the state stores, the as-of join, the assignor, their results,
the session and configuration entry points, and the errors; and ``lakehouse.read``, the JVM-free reads
through delta-rs (``lakehouse.read.store(path).get(key)``). Everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from lakehouse.asof import (
    AsOfJoinResult,
    AsOfJoinStats,
    ColumnClashError,
    GraceRunResult,
    asof_join,
    asof_join_with_grace,
    asof_join_with_stats,
)
from lakehouse.assignment import (
    AssignmentConfig,
    AssignmentInputError,
    AssignmentResult,
    AssignmentStore,
    ClientState,
    InvalidAssignmentError,
    NoSubscriptionsError,
    Subscription,
    assign,
    validate_assignment,
)
from lakehouse.assignment.job import run_assignment
from lakehouse.config import Settings, load_settings
from lakehouse.dedup import Deduplicator, DedupStats, PurgeResult
from lakehouse.errors import (
    ConcurrentWriteError,
    EngineUnsupportedError,
    InvalidConfigError,
    InvalidInputError,
    JarResolutionError,
    LakehouseError,
    LakehouseInternalError,
    NotALakehouseTableError,
    ReadOnlyReplicaError,
    ReplayMismatchWarning,
    SchemaMismatchError,
    SparkSetupError,
    StoreSettingsConflictError,
)
from lakehouse.pipeline import BatchMetrics, PipelineSpec, load_pipeline, run_pipeline, spec_from_values
from lakehouse.quality import QualityReport, TableVerdict, mark_enriched, run_quality
from lakehouse.replica import (
    ChangeDataFeedDisabledError,
    NotAReplicaError,
    Replica,
    ReplicaBeyondRetentionWarning,
    ReplicaError,
    ReplicaLag,
    ReplicaReinitializedWarning,
    Shard,
    SyncResult,
    VacuumReport,
)
from lakehouse.replica.failover import DrillReport, catch_up, task_lags
from lakehouse.session import get_spark
from lakehouse.versioned import (
    ExpireResult,
    PutAllResult,
    PutResult,
    PutStatus,
    SealResult,
    VersionedRecord,
    VersionedStore,
    default_segment_interval,
)

__all__ = [
    "AsOfJoinResult",
    "AsOfJoinStats",
    "AssignmentConfig",
    "AssignmentInputError",
    "AssignmentResult",
    "AssignmentStore",
    "BatchMetrics",
    "ChangeDataFeedDisabledError",
    "ClientState",
    "ColumnClashError",
    "ConcurrentWriteError",
    "DedupStats",
    "Deduplicator",
    "DrillReport",
    "EngineUnsupportedError",
    "ExpireResult",
    "GraceRunResult",
    "InvalidAssignmentError",
    "InvalidConfigError",
    "InvalidInputError",
    "JarResolutionError",
    "LakehouseError",
    "LakehouseInternalError",
    "NoSubscriptionsError",
    "NotALakehouseTableError",
    "NotAReplicaError",
    "PipelineSpec",
    "PurgeResult",
    "PutAllResult",
    "PutResult",
    "PutStatus",
    "QualityReport",
    "ReadOnlyReplicaError",
    "ReplayMismatchWarning",
    "Replica",
    "ReplicaBeyondRetentionWarning",
    "ReplicaError",
    "ReplicaLag",
    "ReplicaReinitializedWarning",
    "SchemaMismatchError",
    "SealResult",
    "Settings",
    "Shard",
    "SparkSetupError",
    "StoreSettingsConflictError",
    "Subscription",
    "SyncResult",
    "TableVerdict",
    "VacuumReport",
    "VersionedRecord",
    "VersionedStore",
    "__version__",
    "asof_join",
    "asof_join_with_grace",
    "asof_join_with_stats",
    "assign",
    "catch_up",
    "default_segment_interval",
    "get_spark",
    "load_pipeline",
    "load_settings",
    "mark_enriched",
    "run_assignment",
    "run_pipeline",
    "run_quality",
    "spec_from_values",
    "task_lags",
    "validate_assignment",
]
