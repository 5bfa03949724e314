"""KIP-655 deduplication with an interval and offset-aware replay, against a Delta seen-ID index."""

from __future__ import annotations

from lakehouse.dedup.deduplicator import Deduplicator
from lakehouse.dedup.records import DedupStats, PurgeResult

__all__ = ["DedupStats", "Deduplicator", "PurgeResult"]
