"""A versioned store's settings and their round trip through Delta table properties."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from pyspark.sql import types as T

from lakehouse import delta_ops
from lakehouse.errors import InvalidInputError
from lakehouse.schemas import load_schema
from lakehouse.times import micros, require_span

KIND = "versioned_store"


@dataclass(frozen=True)
class StoreSettings:
    """What a store was created with; stored on its table so ``open(path)`` needs nothing else."""

    keys: tuple[str, ...]
    values: tuple[str, ...]
    history_retention: timedelta
    segment_interval: timedelta

    def __post_init__(self) -> None:
        if not self.keys:
            raise InvalidInputError("a versioned store needs at least one key column")
        if not self.values:
            raise InvalidInputError("a versioned store needs at least one value column")
        if self.history_retention < timedelta(0):
            raise InvalidInputError(f"history_retention must be >= 0, got {self.history_retention}")
        if self.segment_interval < timedelta(milliseconds=1):
            raise InvalidInputError(f"segment_interval must be >= 1 ms, got {self.segment_interval}")
        require_span(self.history_retention, "history_retention")
        require_span(self.segment_interval, "segment_interval")

    @property
    def retention_us(self) -> int:
        return micros(self.history_retention)

    @property
    def interval_us(self) -> int:
        return micros(self.segment_interval)

    def properties(self) -> dict[str, str]:
        """The ``lakehouse.*`` table properties recording these settings."""
        return delta_ops.settings_properties(
            KIND,
            {
                "keys": json.dumps(list(self.keys)),
                "values": json.dumps(list(self.values)),
                "history_retention_us": str(self.retention_us),
                "segment_interval_us": str(self.interval_us),
            },
        )

    @classmethod
    def from_properties(cls, path: str, properties: dict[str, str]) -> StoreSettings:
        """Read the settings back from a table's properties.

        Raises:
            StoreSettingsConflictError: the table is not a lakehouse versioned store.
        """
        found = delta_ops.settings_from_properties(path, properties, KIND)
        return cls(
            keys=tuple(json.loads(found["keys"])),
            values=tuple(json.loads(found["values"])),
            history_retention=timedelta(microseconds=int(found["history_retention_us"])),
            segment_interval=timedelta(microseconds=int(found["segment_interval_us"])),
        )


def table_schema(schema: T.StructType, keys: tuple[str, ...]) -> T.StructType:
    """The store table's schema: key columns (NOT NULL), system columns, then value columns (nullable).

    Key and system columns come first so Delta collects file statistics on them.
    """
    system = load_schema("versioned_store")
    reserved = {f.name for f in system.fields} & {f.name for f in schema.fields}
    if reserved:
        raise InvalidInputError(f"column names {sorted(reserved)} are reserved by the versioned store")
    by_name = {f.name: f for f in schema.fields}
    missing = [k for k in keys if k not in by_name]
    if missing:
        raise InvalidInputError(f"key columns {missing} are not in the schema {schema.simpleString()}")
    key_fields = [T.StructField(k, by_name[k].dataType, nullable=False) for k in keys]
    value_fields = [
        T.StructField(f.name, f.dataType, nullable=True) for f in schema.fields if f.name not in keys
    ]
    return T.StructType([*key_fields, *system.fields, *value_fields])
