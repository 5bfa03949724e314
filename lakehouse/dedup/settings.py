"""A deduplicator's settings, their round trip through Delta table properties, and the index layout."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.errors import InvalidInputError, StoreSettingsConflictError
from lakehouse.schemas import load_schema
from lakehouse.times import micros, require_span

KIND = "dedup_index"
TASK_COL = "task"
ENTRY_TS_COL = "entry_ts"
ENTRY_PARTITION_COL = "entry_partition"
ENTRY_OFFSET_COL = "entry_offset"
BATCH_COL = "batch_id"
BUCKET_COL = "bucket"
KEY_COL = "key"
MIN_BUCKET_WIDTH = timedelta(minutes=1)


def default_bucket_width(interval: timedelta) -> timedelta:
    """One bucket per interval (at least a minute): about two buckets are live at any time."""
    return max(interval, MIN_BUCKET_WIDTH)


@dataclass(frozen=True)
class DedupSettings:
    """What a deduplicator was created with; stored on its index so ``open(path)`` needs nothing else."""

    by: tuple[str, ...]
    interval: timedelta
    bucket_width: timedelta
    quarantine_path: str | None = None

    def __post_init__(self) -> None:
        if not self.by:
            raise InvalidInputError("by must name at least one column")
        if len(set(self.by)) != len(self.by):
            raise InvalidInputError(f"by names a column twice: {list(self.by)}")
        reserved = sorted(set(self.by) & reserved_names())
        if reserved:
            raise InvalidInputError(f"by may not use the index's system column names {reserved}")
        if self.interval < timedelta(0):
            raise InvalidInputError(f"interval must be >= 0, got {self.interval}")
        if self.bucket_width < timedelta(milliseconds=1):
            raise InvalidInputError(f"bucket_width must be >= 1 ms, got {self.bucket_width}")
        require_span(self.interval, "interval")
        require_span(self.bucket_width, "bucket_width")
        nested = [c for c in self.by if "." in c or "`" in c]
        if nested:
            raise InvalidInputError(
                f"by names top-level columns; {nested} name nested fields: select them into columns first"
            )

    @property
    def per_partition(self) -> bool:
        """True when each source partition is a task (``key`` is part of ``by``), as in Kafka Streams."""
        return KEY_COL in self.by

    @property
    def interval_us(self) -> int:
        return micros(self.interval)

    @property
    def bucket_us(self) -> int:
        return micros(self.bucket_width)

    def properties(self) -> dict[str, str]:
        """The ``lakehouse.*`` table properties recording these settings."""
        settings = {
            "dedup.by": json.dumps(list(self.by)),
            "dedup.interval_us": str(self.interval_us),
            "dedup.bucket_width_us": str(self.bucket_us),
        }
        if self.quarantine_path is not None:
            settings["dedup.quarantine_path"] = self.quarantine_path
        return delta_ops.settings_properties(KIND, settings)

    def check_same(self, path: str, existing: DedupSettings) -> None:
        """Raise :class:`StoreSettingsConflictError` naming the first setting that differs."""
        mine, theirs = self.properties(), existing.properties()
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                raise StoreSettingsConflictError(path, key, str(theirs.get(key)), str(mine.get(key)))

    @classmethod
    def from_properties(cls, path: str, properties: dict[str, str]) -> DedupSettings:
        """Read the settings back from a table's properties.

        Raises:
            StoreSettingsConflictError: the table is not a lakehouse dedup index.
        """
        found = delta_ops.settings_from_properties(path, properties, KIND)
        return cls(
            by=tuple(json.loads(found["dedup.by"])),
            interval=timedelta(microseconds=int(found["dedup.interval_us"])),
            bucket_width=timedelta(microseconds=int(found["dedup.bucket_width_us"])),
            quarantine_path=found.get("dedup.quarantine_path"),
        )


def reserved_names() -> set[str]:
    """Column names the index and the quarantine use for themselves."""
    return {f.name for f in load_schema("dedup_index").fields} | {
        f.name for f in load_schema("dedup_quarantine").fields
    }


def system_schema() -> T.StructType:
    """The index's system columns (``schemas/dedup_index.json``), without the id columns."""
    return load_schema("dedup_index")


def bucket_of(ts_us: Column, bucket_us: int) -> Column:
    """The index partition of an entry: ``floor(entry_ts / bucket_width)`` on microseconds."""
    return F.floor(ts_us / F.lit(bucket_us)).cast("long")
