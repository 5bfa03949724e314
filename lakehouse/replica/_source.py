"""What a replica needs to know about its source: the kind of table, a row's identity, the shard of a row.

A source is a lakehouse state table that records its changes (Delta's Change Data Feed): a versioned
store or a dedup seen-ID index. Its ``lakehouse.*`` table properties say which, and with what settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.dedup.deduplicator import APP_ID as DEDUP_APP_ID
from lakehouse.dedup.settings import BUCKET_COL, ENTRY_TS_COL, TASK_COL, DedupSettings
from lakehouse.dedup.settings import KIND as DEDUP_KIND
from lakehouse.errors import InvalidInputError
from lakehouse.versioned._plan import VALID_FROM
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.segments import SEGMENT_COL
from lakehouse.versioned.settings import KIND as STORE_KIND
from lakehouse.versioned.settings import StoreSettings
from lakehouse.versioned.store import APP_ID as STORE_APP_ID

KIND_PROPERTY = f"{delta_ops.PROPERTY_PREFIX}kind"


@dataclass(frozen=True)
class Shard:
    """Task ``partition`` of ``partitions``: the rows whose key hashes to it (Kafka's partitioning).

    Kafka's default partitioner takes murmur2 of the key bytes modulo the partition count; a replica
    takes Spark's Murmur3 ``hash`` of the key columns, ``pmod`` the partition count (same role:
    deterministic and uniform, not the same numbers). For a dedup index with one task per source
    partition the rows carry their task (= source partition) already: ``task pmod partitions``.
    The shards ``0 .. partitions - 1`` together hold every row exactly once.
    """

    partition: int
    partitions: int

    def __post_init__(self) -> None:
        if not (isinstance(self.partitions, int) and self.partitions >= 1):
            raise InvalidInputError(f"a shard needs partitions >= 1, got {self.partitions!r}")
        if not (isinstance(self.partition, int) and 0 <= self.partition < self.partitions):
            raise InvalidInputError(
                f"shard partition must be in [0, {self.partitions}), got {self.partition!r}"
            )

    def __str__(self) -> str:
        return f"{self.partition}/{self.partitions}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """The shard written as ``"<partition>/<partitions>"``."""
        partition, _, partitions = text.partition("/")
        return cls(int(partition), int(partitions))

    def task(self, subtopology: int = 0) -> str:
        """The assignor's id of this shard's task: ``"<subtopology>_<partition>"``."""
        return f"{subtopology}_{self.partition}"


@dataclass(frozen=True)
class SourceKind:
    """How to replicate one kind of lakehouse table.

    Attributes:
        kind: The table's ``lakehouse.kind``.
        app_id: The app id of the table's commit metadata (its stream time and batch ids live there).
        identity: Columns identifying a row (one row per value at any version).
        partition_column: The table's partition column (dropped whole by expiry / purge).
        shard_columns: Columns a shard is computed from; ``hashed`` False: an integer task column.
        hashed: Whether the shard is ``pmod(hash(columns))`` or ``pmod(column)``.
        bound_columns: Identity columns whose literal range in a change set prunes the replica's files.
        pending_partition: The partition value of a versioned store's pending rows: a pending row and a
            sealed row of one version are two rows (None: no such partition).
    """

    kind: str
    app_id: str
    identity: tuple[str, ...]
    partition_column: str
    shard_columns: tuple[str, ...]
    hashed: bool
    bound_columns: tuple[str, ...]
    pending_partition: int | None = None

    def identity_of(self, alias: str | None = None) -> list[Column]:
        """The expressions identifying a row (of the frame ``alias``): :attr:`identity`, and whether the
        row is pending."""
        prefix = "" if alias is None else f"{alias}."
        found = [F.col(f"{prefix}`{c}`") for c in self.identity]
        if self.pending_partition is not None:
            found.append(F.col(f"{prefix}{self.partition_column}").eqNullSafe(F.lit(self.pending_partition)))
        return found

    def in_shard(self, shard: Shard | None, schema: T.StructType) -> Column:
        """The rows of ``shard`` (all rows for None) in a frame of ``schema``.

        A frame lacking a shard column (a dedup index before its first batch) holds no row at all.
        """
        if shard is None:
            return F.lit(True)
        if any(c not in schema.fieldNames() for c in self.shard_columns):
            return F.lit(False)
        # One SQL expression (one JVM call): F.hash / F.pmod / F.lit cost a few round trips each.
        columns = ", ".join(_quoted(c) for c in self.shard_columns)
        value = f"hash({columns})" if self.hashed else columns
        return F.expr(f"pmod({value}, {shard.partitions}) = {shard.partition}")


def _quoted(column: str) -> str:
    """``column`` as a SQL identifier (backquoted)."""
    return "`" + column.replace("`", "``") + "`"


def source_kind(path: str, properties: dict[str, str]) -> SourceKind:
    """The :class:`SourceKind` of the table at ``path`` from its ``lakehouse.*`` properties.

    Raises:
        InvalidInputError: the table is neither a versioned store nor a dedup index.
    """
    kind = properties.get(KIND_PROPERTY)
    if kind == STORE_KIND:
        store = StoreSettings.from_properties(path, properties)
        return SourceKind(
            kind,
            STORE_APP_ID,
            (*store.keys, VALID_FROM),
            SEGMENT_COL,
            store.keys,
            True,
            (VALID_FROM,),
            PENDING_SEGMENT,
        )
    if kind == DEDUP_KIND:
        dedup = DedupSettings.from_properties(path, properties)
        shard_columns = (TASK_COL,) if dedup.per_partition else dedup.by
        return SourceKind(
            kind,
            DEDUP_APP_ID,
            (TASK_COL, *dedup.by, ENTRY_TS_COL),
            BUCKET_COL,
            shard_columns,
            not dedup.per_partition,
            (ENTRY_TS_COL,),
        )
    raise InvalidInputError(
        f"the table at {path} is a {kind or 'plain Delta'} table: replicas follow versioned stores "
        f"({STORE_KIND}) and dedup indexes ({DEDUP_KIND})"
    )
