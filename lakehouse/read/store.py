"""A versioned store read through delta-rs, without a JVM: ``lakehouse.read.store(path).get(key)``.

Reads are those of :class:`lakehouse.versioned.VersionedStore` (same semantics, tested equal row for row):
the store's versions are the one portable definition (:func:`lakehouse.versioned.pending.versions_sql`,
dialect ``ansi``) run by DataFusion; stream time, retention and the pending-tier state come from the
table's properties and commit metadata (no data read). A version is valid in ``[valid_from, valid_to)``;
a read at ``as_of < stream_time - R`` is expired and answered by the latest version only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse.errors import InvalidInputError, NotALakehouseTableError
from lakehouse.paths import local_path
from lakehouse.read.engine import open_table, recorded_state_of, run_sql
from lakehouse.times import from_micros, micros
from lakehouse.versioned.pending import PENDING_SEGMENT, versions_sql
from lakehouse.versioned.records import VersionedRecord
from lakehouse.versioned.segments import SEGMENT_COL, segment_of
from lakehouse.versioned.settings import KIND, StoreSettings

# The state a versioned store records on its commits (lakehouse.versioned.store).
_APP_ID = "lakehouse.versioned_store"
_STREAM_TIME = "stream_time_us"
_PENDING_WRITES, _SEALED_WRITES, _SEAL_STREAM_TIME = "pending_writes", "sealed_writes", "seal_stream_time_us"
_STATE_FIELDS = (_STREAM_TIME, _PENDING_WRITES, _SEALED_WRITES, _SEAL_STREAM_TIME)
_TABLE = "store"


def store(path: str, version: int | None = None) -> StoreReader:
    """Open the versioned store at ``path`` (as of table ``version``, default the latest) for JVM-free reads.

    Raises:
        NotALakehouseTableError: ``path`` holds no versioned store.
        EngineUnsupportedError: delta-rs cannot read the table right (read it with Spark instead).
    """
    return StoreReader(path, version)


class StoreReader:
    """Reads of one versioned store at one table version through delta-rs (see :func:`store`)."""

    def __init__(self, path: str, version: int | None = None) -> None:
        self.path = path
        try:
            self.table = open_table(path, version)
        except Exception as error:  # deltalake's TableNotFoundError and friends
            if type(error).__name__ != "TableNotFoundError":
                raise
            raise NotALakehouseTableError(path, KIND, "it is not a Delta table (no _delta_log)") from None
        properties = self.table.metadata().configuration
        if properties.get("lakehouse.kind") is None:
            raise NotALakehouseTableError(path, KIND, "it is a Delta table lakehouse did not create")
        self.settings = StoreSettings.from_properties(path, properties)
        self.version = self.table.version()
        self.state = recorded_state_of(self.table, _APP_ID, _STATE_FIELDS)

    @property
    def columns(self) -> list[str]:
        """The table's columns, in order."""
        return [f.name for f in self.table.schema().fields]

    @property
    def stream_time(self) -> datetime | None:
        """Observed stream time (None before the first put)."""
        found = self.state.get(_STREAM_TIME)
        return None if found is None else from_micros(int(found))

    def sql(self, table: str = _TABLE, region: bool = True) -> str:
        """The statement of the store's versions over ``table`` (``ansi`` dialect, see
        :func:`~lakehouse.versioned.pending.versions_sql`); ``region`` bounds the sealed rows it resolves
        by the store's state at this version (False: valid at every version, for other engines)."""
        region_from = self._region_from() if region else None
        return versions_sql(
            table,
            self.columns,
            self.settings.keys,
            self.settings.interval_us,
            None if region_from is None else str(region_from),
            dialect="ansi",
        )

    def versions(self, key: Any = None) -> pa.Table:
        """Every version (of ``key``, or all) with ``valid_from``, ``valid_to`` and ``tombstone``, ordered by
        key and ``valid_from``: :meth:`VersionedStore.versions` without its ``segment`` column."""
        return self._versions(key, None)

    def _versions(self, key: Any, first_segment: int | None) -> pa.Table:
        """:meth:`versions`, or with ``first_segment`` only those that can be valid at a time in that
        segment or later: the sealed rows of earlier segments (``valid_to`` before that segment) are not
        read. Each version returned that is valid at such a time is resolved right: its true successor
        starts after that time, so it is read; a version whose successor is not read ends before it."""
        conditions = []
        if key is not None:
            conditions += [f'"{k}" = {_literal(v)}' for k, v in self._key_dict(key).items()]
        if first_segment is not None:
            conditions.append(f'("{SEGMENT_COL}" IS NULL OR "{SEGMENT_COL}" >= {first_segment})')
        source = _TABLE
        if conditions:
            source = f"(SELECT * FROM {_TABLE} WHERE {' AND '.join(conditions)}) AS rows_read"
        if not self._has_pending():  # the table itself
            columns = ", ".join(f'"{c}"' for c in self.columns if c != SEGMENT_COL)
            query = f"SELECT {columns} FROM {source}"
        else:
            query = self.sql(source)
        order = ", ".join(f'"{c}"' for c in (*self.settings.keys, "valid_from"))
        return run_sql({_TABLE: self.table}, f"SELECT * FROM ({query}) AS versions ORDER BY {order}")

    def history(self, key: Any = None) -> pa.Table:
        """Stored versions (of ``key``, or all), tombstones included, ordered by key and ``valid_from``."""
        return self.versions(key)

    def get(self, key: Any, as_of: datetime | None = None) -> VersionedRecord | None:
        """The latest version of ``key`` (``as_of`` None) or the one valid at ``as_of`` (inclusive); None when
        absent or a tombstone. An expired ``as_of`` (``< stream_time - R``) is answered by the latest
        version only, if ``valid_from <= as_of``."""
        found = self._valid(self._versions(key, self._first_segment(as_of)), as_of)
        if found.num_rows == 0:
            return None
        row = found.slice(0, 1).to_pylist()[0]
        if row["tombstone"]:
            return None
        value = {v: row[v] for v in self.settings.values}
        return VersionedRecord(value, row["valid_from"], row["valid_to"])

    def as_of(self, t: datetime, include_tombstones: bool = False) -> pa.Table:
        """Every key's version valid at ``t`` (``valid_from <= t < valid_to``), expired reads answered by
        latest versions only; tombstones left out unless ``include_tombstones``."""
        found = self._valid(self._versions(None, self._first_segment(t)), t)
        return found if include_tombstones else found.filter(pc.invert(found["tombstone"]))

    def _valid(self, versions: pa.Table, as_of: datetime | None) -> pa.Table:
        """The rows of ``versions`` valid at ``as_of`` (None: the latest), with the expired-read rule."""
        latest = pc.is_null(versions["valid_to"])
        if as_of is None:
            return versions.filter(latest)
        t_us = micros(as_of)
        at = pa.scalar(t_us, pa.timestamp("us", tz="UTC"))
        expired = self._is_expired(t_us)
        ends_after = latest if expired else pc.or_kleene(latest, pc.greater(versions["valid_to"], at))
        return versions.filter(pc.and_kleene(pc.less_equal(versions["valid_from"], at), ends_after))

    def _first_segment(self, as_of: datetime | None) -> int:
        """The first segment a read at ``as_of`` needs (None: the latest versions and pending rows only; an
        expired read is answered by the latest version too)."""
        if as_of is None or self._is_expired(micros(as_of)):
            return PENDING_SEGMENT
        return segment_of(micros(as_of), self.settings.interval_us)

    def _is_expired(self, t_us: int) -> bool:
        horizon = self.state.get(_STREAM_TIME)
        return horizon is not None and t_us < int(horizon) - self.settings.retention_us

    def _has_pending(self) -> bool:
        return int(self.state.get(_PENDING_WRITES, 0)) > int(self.state.get(_SEALED_WRITES, 0))

    def _region_from(self) -> int | None:
        sealed_at = self.state.get(_SEAL_STREAM_TIME)
        if sealed_at is None:
            return None
        return segment_of(int(sealed_at) - self.settings.retention_us, self.settings.interval_us)

    def _key_dict(self, key: Any) -> dict[str, Any]:
        keys = self.settings.keys
        if isinstance(key, Mapping):
            found = dict(key)
        elif isinstance(key, tuple) and len(key) == len(keys):
            found = dict(zip(keys, key, strict=True))
        elif len(keys) == 1:
            found = {keys[0]: key}
        else:
            raise InvalidInputError(f"key must be a tuple or dict of {list(keys)}, got {key!r}")
        if set(found) != set(keys):
            raise InvalidInputError(f"key must name the columns {list(keys)}, got {sorted(found)}")
        return found

    def __repr__(self) -> str:
        return f"StoreReader({local_path(self.path)!r}, version={self.version})"


def _literal(value: Any) -> str:
    """An SQL literal of a key value (text and numbers; other types as text)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"
