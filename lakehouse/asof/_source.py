"""The table side of an as-of join: a ``VersionedStore`` or any SCD2 DataFrame, normalized."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.errors import InvalidInputError, SchemaMismatchError
from lakehouse.versioned import VersionedStore

VALID_FROM = "valid_from"
VALID_TO = "valid_to"
TOMBSTONE = "tombstone"
SEGMENT = "segment"
_SYSTEM = (VALID_FROM, VALID_TO, SEGMENT, TOMBSTONE)


@dataclass(frozen=True)
class VersionSource:
    """What the join needs to know about the versions it reads.

    ``horizon_us`` is ``stream_time - history_retention`` of a versioned store (None for a plain
    DataFrame, which has no retention): lookups at ``t < horizon`` are expired. ``interval_us`` is the
    store's segment interval (None: the frame is not partitioned by validTo segment). For a store,
    ``frame`` and ``stream_time_us`` come from one Delta version, ``version``. ``of_keys`` gives the
    versions of only the keys of a small frame of keys (a store resolves its pending versions for those keys
    alone); None: ``frame`` semi-joined with them.
    """

    frame: DataFrame
    keys: tuple[str, ...]
    values: tuple[str, ...]
    has_tombstones: bool
    horizon_us: int | None
    interval_us: int | None
    stream_time_us: int | None = None
    version: int | None = None
    of_keys: Callable[[DataFrame], DataFrame] | None = None

    def versions_of(self, keys: DataFrame) -> DataFrame:
        """The versions of the keys in ``keys`` (a small frame of the key columns), as ``frame`` has them."""
        if self.of_keys is not None:
            return self.of_keys(keys)
        return self.frame.join(F.broadcast(keys), on=list(self.keys), how="left_semi")


def source_of(store: VersionedStore | DataFrame, on: str | Sequence[str] | None) -> VersionSource:
    """Normalize ``store``; ``on`` defaults to a store's own key columns (a DataFrame needs ``on``).

    Raises:
        InvalidInputError: no key columns, or ``on`` differs from the store's key columns.
        SchemaMismatchError: a DataFrame lacks the key columns or TIMESTAMP ``valid_from``/``valid_to``.
    """
    keys = _keys(on)
    if isinstance(store, VersionedStore):
        own = store.settings.keys
        if keys and set(keys) != set(own):
            raise InvalidInputError(f"on={list(keys)} must be the store's key columns {list(own)}")
        version, stream_time_us = store.state_version()
        horizon = None if stream_time_us is None else stream_time_us - store.settings.retention_us
        frame = store.versions(version)
        return VersionSource(
            frame,
            keys or own,
            store.settings.values,
            True,
            horizon,
            store.settings.interval_us,
            stream_time_us,
            version,
            lambda of: store.versions(version, of_keys=of),
        )
    if not keys:
        raise InvalidInputError("on= is required when the table side is a DataFrame")
    _check_scd2_frame(store, keys)
    values = tuple(c for c in store.columns if c not in keys and c not in _SYSTEM)
    return VersionSource(store, keys, values, TOMBSTONE in store.columns, None, None)


def _keys(on: str | Sequence[str] | None) -> tuple[str, ...]:
    if on is None:
        return ()
    keys = (on,) if isinstance(on, str) else tuple(on)
    if not keys or len(set(keys)) != len(keys):
        raise InvalidInputError(f"on= must name distinct key columns, got {list(keys)}")
    return keys


def _check_scd2_frame(frame: DataFrame, keys: tuple[str, ...]) -> None:
    types = {f.name: f.dataType for f in frame.schema.fields}
    missing = [c for c in (*keys, VALID_FROM, VALID_TO) if c not in types]
    wrong = {
        c: f"expected timestamp, got {types[c].simpleString()}"
        for c in (VALID_FROM, VALID_TO)
        if c in types and types[c] != T.TimestampType()
    }
    if TOMBSTONE in types and types[TOMBSTONE] != T.BooleanType():
        wrong[TOMBSTONE] = f"expected boolean, got {types[TOMBSTONE].simpleString()}"
    if missing or wrong:
        raise SchemaMismatchError("as-of join table side", missing, wrong)
