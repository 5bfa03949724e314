"""lakehouse: Kafka Streams' state semantics (KIP-889, KIP-655, KIP-441/708) on Delta Lake."""

from __future__ import annotations

__version__ = "0.1.0"

from lakehouse.config import Settings, load_settings
from lakehouse.demo import DemoSize, run_demo
from lakehouse.errors import (
    InvalidConfigError,
    InvalidInputError,
    JarResolutionError,
    LakehouseError,
    LakehouseInternalError,
    SchemaMismatchError,
    StoreSettingsConflictError,
)
from lakehouse.session import get_spark

__all__ = [
    "AsOfJoinResult",
    "AsOfJoinStats",
    "AssignmentConfig",
    "AssignmentInputError",
    "AssignmentResult",
    "AssignmentStore",
    "ClientState",
    "ColumnClashError",
    "DedupStats",
    "Deduplicator",
    "DemoSize",
    "ExpireResult",
    "GraceRunResult",
    "InvalidAssignmentError",
    "InvalidConfigError",
    "InvalidInputError",
    "JarResolutionError",
    "LakehouseError",
    "LakehouseInternalError",
    "NoSubscriptionsError",
    "PurgeResult",
    "PutAllResult",
    "PutResult",
    "PutStatus",
    "SchemaMismatchError",
    "Settings",
    "StoreSettingsConflictError",
    "Subscription",
    "VersionedRecord",
    "VersionedStore",
    "__version__",
    "asof_join",
    "asof_join_with_grace",
    "asof_join_with_stats",
    "assign",
    "default_segment_interval",
    "get_spark",
    "load_settings",
    "run_assignment",
    "run_demo",
    "validate_assignment",
]
