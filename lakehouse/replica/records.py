"""Value types returned by a replica."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SyncResult:
    """What one :meth:`Replica.sync` (or :meth:`Replica.restore`) did.

    Attributes:
        checkpoint_before: The last applied source version before the call (None: the replica held nothing).
        checkpoint: The last applied source version after it (the replica equals the source's shard at it).
        versions: Source versions applied (``checkpoint - checkpoint_before``, or all for a restore).
        rows: Change rows applied (inserts, updates and deletes of the shard); rows copied for a restore.
            A whole-table replica, which replays file actions, counts the live rows of the files it added
            and removed (from their statistics: a file whose deletion vector changed counts both ways).
        partition_drops: Source partition drops (expiry, purge) applied as partition drops.
        commits: Commits written to the replica (one per sync, plus one per partition drop in the range).
        restored: The replica was built from nothing (no checkpoint yet, or re-initialized).
        reinitialized_because: Why the replica was wiped and rebuilt (its checkpoint was no longer covered
            by the source, or the replica was written by someone else); None otherwise.
        seconds: Wall-clock time of the call.
    """

    checkpoint_before: int | None
    checkpoint: int
    versions: int
    rows: int
    partition_drops: int
    commits: int
    restored: bool
    reinitialized_because: str | None
    seconds: float


@dataclass(frozen=True)
class ReplicaLag:
    """How far a replica is behind its source (KIP-535's ``LagInfo`` in Delta versions).

    Attributes:
        checkpoint: The last applied source version (None: nothing held).
        source_version: The source's latest version.
        versions: Source versions not applied yet (``source_version - checkpoint``; all versions + 1 when
            nothing is held). A caught-up replica has 0 (Kafka's offsets show 1 here: they count the next
            offset).
        rows: Change rows of the shard not applied yet; for a replica that must restore (nothing held, or
            a checkpoint the source no longer covers), the rows of the shard to copy.
        covered: Whether the source still has every change after the checkpoint (False: the next sync
            re-initializes).
    """

    checkpoint: int | None
    source_version: int
    versions: int
    rows: int
    covered: bool


@dataclass(frozen=True)
class VacuumReport:
    """What a replica-aware VACUUM of a source did.

    Attributes:
        files_deleted: Files VACUUM deleted (0 when it was held back).
        retention_hours: The table's own retention (``delta.deletedFileRetentionDuration``), in hours.
        protected: Replica paths whose changes were kept (behind, but within their ``max_lag``).
        beyond_retention: Replica paths further behind than their ``max_lag``: their changes may be gone,
            and their next sync re-initializes them.
        held_back_by: Protected replicas that need files older than the retention: while there is any,
            nothing is vacuumed.
    """

    files_deleted: int
    retention_hours: float
    protected: tuple[str, ...]
    beyond_retention: tuple[str, ...]
    held_back_by: tuple[str, ...]
