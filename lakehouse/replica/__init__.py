"""Standby replicas of state tables, restored from the source's Delta changelog (seed 003, KIP-441 lags)."""

from __future__ import annotations

from lakehouse.replica._source import Shard
from lakehouse.replica.errors import ChangeDataFeedDisabledError, NotAReplicaError, ReplicaError
from lakehouse.replica.records import ReplicaLag, SyncResult, VacuumReport
from lakehouse.replica.registry import ReplicaBeyondRetentionWarning, vacuum_source
from lakehouse.replica.replica import Replica, ReplicaReinitializedWarning

__all__ = [
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
    "vacuum_source",
]
