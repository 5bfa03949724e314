"""Versioned key-value stores (KIP-889) as Delta tables partitioned by validTo segment."""

from lakehouse.versioned.policy import SealPolicy
from lakehouse.versioned.records import (
    ExpireResult,
    PutAllResult,
    PutResult,
    PutStatus,
    SealResult,
    VersionedRecord,
)
from lakehouse.versioned.segments import default_segment_interval
from lakehouse.versioned.store import VersionedStore

__all__ = [
    "ExpireResult",
    "PutAllResult",
    "PutResult",
    "PutStatus",
    "SealPolicy",
    "SealResult",
    "VersionedRecord",
    "VersionedStore",
    "default_segment_interval",
]
