"""Reference model of a KIP-889 versioned key-value store (pure Python, for tests only).

Written for clarity, not speed: one ordered map ``timestamp -> value | TOMBSTONE`` per key and one observed
stream time for the whole store. Timestamps are integers (microseconds in the tests); values are any
non-None Python object, ``None`` being a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NOT_PUT = "not_put"
LATEST = "latest"
HISTORY = "history"


@dataclass(frozen=True)
class Version:
    value: Any
    valid_from: int
    valid_to: int | None  # None: the latest version ("valid to undefined")


@dataclass(frozen=True)
class Put:
    """Outcome of a put, as KIP-914 return codes: not put, now the latest, or into history until valid_to."""

    status: str
    valid_to: int | None = None


@dataclass
class VersionedStoreModel:
    history_retention: int
    stream_time: int | None = None
    versions: dict[Any, dict[int, Any]] = field(default_factory=dict)

    def _expired(self, t: int) -> bool:
        return self.stream_time is not None and t < self.stream_time - self.history_retention

    def put(self, key: Any, value: Any, t: int) -> Put:
        if self._expired(t):
            return Put(NOT_PUT)
        self.stream_time = t if self.stream_time is None else max(self.stream_time, t)
        timeline = self.versions.setdefault(key, {})
        timeline[t] = value
        later = [ts for ts in timeline if ts > t]
        return Put(HISTORY, min(later)) if later else Put(LATEST)

    def delete(self, key: Any, t: int) -> Version | None:
        if self._expired(t):
            return None
        found = self.get(key, t)
        self.put(key, None, t)
        return found

    def get(self, key: Any, as_of: int | None = None) -> Version | None:
        timeline = self.versions.get(key, {})
        if not timeline:
            return None
        newest = max(timeline)
        if as_of is None:
            return None if timeline[newest] is None else Version(timeline[newest], newest, None)
        if self._expired(as_of):
            if timeline[newest] is None or newest > as_of:
                return None
            return Version(timeline[newest], newest, None)
        candidates = [ts for ts in timeline if ts <= as_of]
        if not candidates:
            return None
        start = max(candidates)
        if timeline[start] is None:
            return None
        later = [ts for ts in timeline if ts > start]
        return Version(timeline[start], start, min(later) if later else None)

    def history(self) -> list[tuple[Any, int, int | None, Any]]:
        """Every stored version as (key, valid_from, valid_to, value), tombstones included (value None)."""
        rows = []
        for key, timeline in self.versions.items():
            stamps = sorted(timeline)
            for i, ts in enumerate(stamps):
                rows.append((key, ts, stamps[i + 1] if i + 1 < len(stamps) else None, timeline[ts]))
        return sorted(rows, key=lambda r: (repr(r[0]), r[1]))

    def readable_history(self) -> list[tuple[Any, int, int | None, Any]]:
        """The versions of :meth:`history` a read can still return: the latest of each key and every one
        with ``valid_to > stream_time - history_retention``. A version with ``valid_to`` at or below that
        bound answers no read: a read before the bound is expired (the latest version answers it) and one
        at or after it is past the version's ``valid_to`` (exclusive). A store may leave such versions out.
        """
        rows = self.history()
        if self.stream_time is None:
            return rows
        horizon = self.stream_time - self.history_retention
        return [row for row in rows if row[2] is None or row[2] > horizon]
