"""Value types returned by a versioned store."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any


class PutStatus(Enum):
    """What a put did, like KIP-914's return codes."""

    NOT_PUT = "not_put"  # older than stream time minus history retention: nothing written
    LATEST = "latest"  # now the latest version of its key (valid to undefined)
    HISTORY = "history"  # inserted into history, valid until ``PutResult.valid_to``


@dataclass(frozen=True)
class PutResult:
    """Outcome of :meth:`VersionedStore.put`; ``valid_to`` is set for :attr:`PutStatus.HISTORY` only."""

    status: PutStatus
    valid_to: datetime | None = None


@dataclass(frozen=True)
class VersionedRecord:
    """A version of a key: ``value`` (a dict of the value columns) valid in ``[valid_from, valid_to)``.

    ``valid_to`` is None for the latest version.
    """

    value: dict[str, Any]
    valid_from: datetime
    valid_to: datetime | None = None


@dataclass(frozen=True)
class PutAllResult:
    """Outcome of one :meth:`VersionedStore.put_all` batch.

    ``replayed`` is True when ``batch_id`` had been committed before: nothing was written and the counts
    are those recorded by the original commit. ``sealed_rows`` is set when the batch then sealed the store
    (its seal policy was due): the rows that seal wrote (:class:`SealResult`).
    """

    batch_id: int | None
    records: int
    dropped: int
    rows_written: int
    stream_time: datetime | None
    replayed: bool = False
    sealed_rows: int | None = None


@dataclass(frozen=True)
class ExpireResult:
    """Outcome of :meth:`VersionedStore.expire`: the segments below ``first_live_segment`` are gone."""

    first_live_segment: int | None
    removed_files: int
    removed_rows: int


@dataclass(frozen=True)
class SealResult:
    """Outcome of :meth:`VersionedStore.seal`: the rows its MERGE inserted, updated or deleted (0: nothing
    was pending, no commit), and whether it then rewrote the latest versions' files (``purged``: their
    deletion vectors had come to delete as many rows as they hold; a second commit, an OPTIMIZE)."""

    rows_written: int
    purged: bool = False
