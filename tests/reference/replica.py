"""Reference model of a replica following a source table's changelog (seed 003 as issue 13 states it).

Pure Python, for tests only, written for clarity. Offsets are Delta versions:

- A **source** is a sequence of versions. Version ``v`` holds the table's rows at ``v`` (a snapshot), the
  change rows its commit wrote (inserts and update postimages: Delta's Change Data Feed minus the
  preimages) and the rows it removed, and whether it is a partition drop (versioned-store expiry, dedup
  purge). Version 0 is the empty table its creation commits. A VACUUM that deletes every file the latest
  version does not use (``RETAIN 0 HOURS``) is two versions (VACUUM START, VACUUM END) after which only a
  checkpoint at or after its START can still be caught up from (:attr:`SourceModel.covered_from`).
- A **replica** holds the rows of one shard at its **checkpoint** (the last applied version; None: nothing
  held). ``sync(limit)`` moves the checkpoint to ``min(limit, latest)`` (``limit`` None: the latest): a
  ``limit`` beyond the latest means the latest, one at or below the checkpoint applies nothing. With no
  checkpoint it restores; with a checkpoint the source no longer covers it is wiped and re-initialized
  (Kafka's ``InvalidOffsetException``), else it applies the versions in between: one replica commit per
  run of versions between partition drops, plus one per drop.
- ``lag()``: versions behind (``latest - checkpoint``; ``latest + 1`` when nothing is held) and rows behind
  (the shard's change rows of the missing versions, drops' removed rows included; when the next sync must
  restore, the shard's rows at the latest version).

Sources are produced from the other reference models: :class:`VersionedSource` (a versioned store's
table under ``put_all`` batches, replays, expiry and VACUUMs, from :mod:`tests.reference.versioned`) and
:func:`dedup_rows` (a seen-ID index's rows, from :mod:`tests.reference.dedup`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.reference.dedup import DedupModel
from tests.reference.versioned import NOT_PUT, VersionedStoreModel

Row = tuple[Any, ...]


@dataclass(frozen=True)
class SourceVersion:
    """One commit of the source: the table after it, the rows it wrote and removed, whether a drop."""

    rows: frozenset[Row]
    written: frozenset[Row] = frozenset()
    removed: frozenset[Row] = frozenset()
    drop: bool = False


@dataclass
class SourceModel:
    """A source table as the sequence of its versions (index = Delta version)."""

    versions: list[SourceVersion] = field(default_factory=lambda: [SourceVersion(frozenset())])
    #: The oldest checkpoint the source's changes can still be caught up from.
    covered_from: int = 0

    @property
    def latest(self) -> int:
        return len(self.versions) - 1

    def rows(self, version: int | None = None) -> frozenset[Row]:
        return self.versions[self.latest if version is None else version].rows

    def commit(
        self,
        rows: Iterable[Row],
        written: Iterable[Row] = (),
        removed: Iterable[Row] = (),
        drop: bool = False,
    ) -> int:
        """Append a version; returns it."""
        self.versions.append(SourceVersion(frozenset(rows), frozenset(written), frozenset(removed), drop))
        return self.latest

    def commit_diff(
        self, rows: Iterable[Row], identity: Callable[[Row], Hashable], rewritten: Iterable[Row] = ()
    ) -> int:
        """Append a version whose changes are its difference from the latest: written are the new or changed
        rows (plus ``rewritten`` rows written again unchanged), removed the rows whose identity is gone (a
        changed row's old image is a preimage, not a removal)."""
        before, after = self.rows(), frozenset(rows)
        kept = {identity(r) for r in after}
        removed = {r for r in before if identity(r) not in kept}
        return self.commit(after, (after - before) | frozenset(rewritten), removed)

    def vacuum(self, retain_nothing: bool = False) -> None:
        """VACUUM START and VACUUM END (no row changes); ``retain_nothing``: every unused file is deleted."""
        start = self.commit(self.rows())
        self.commit(self.rows())
        if retain_nothing:
            self.covered_from = start

    def covers(self, checkpoint: int) -> bool:
        """Whether every change after ``checkpoint`` is still available."""
        return checkpoint >= self.latest or checkpoint >= self.covered_from


@dataclass(frozen=True)
class Lag:
    """As ``ReplicaLag``: checkpoint, source's latest version, versions and rows behind, covered."""

    checkpoint: int | None
    source_version: int
    versions: int
    rows: int
    covered: bool


@dataclass(frozen=True)
class Synced:
    """As ``SyncResult`` (without its timing; ``reinitialized``: the reason was not None)."""

    checkpoint_before: int | None
    checkpoint: int
    versions: int
    rows: int
    partition_drops: int
    commits: int
    restored: bool
    reinitialized: bool


@dataclass
class ReplicaModel:
    """A replica of the rows of ``source`` for which ``in_shard`` holds."""

    source: SourceModel
    in_shard: Callable[[Row], bool] = lambda row: True
    checkpoint: int | None = None
    rows: frozenset[Row] = frozenset()

    def _shard(self, rows: Iterable[Row]) -> frozenset[Row]:
        return frozenset(r for r in rows if self.in_shard(r))

    def _changed_rows(self, first: int, last: int, drops: bool = True) -> int:
        counted = [v for v in self.source.versions[first : last + 1] if drops or not v.drop]
        return sum(len(self._shard(v.written)) + len(self._shard(v.removed)) for v in counted)

    def lag(self) -> Lag:
        latest = self.source.latest
        if self.checkpoint is None:
            return Lag(None, latest, latest + 1, len(self._shard(self.source.rows())), False)
        if self.checkpoint >= latest:
            return Lag(self.checkpoint, latest, 0, 0, True)
        behind = latest - self.checkpoint
        if not self.source.covers(self.checkpoint):
            return Lag(self.checkpoint, latest, behind, len(self._shard(self.source.rows())), False)
        return Lag(self.checkpoint, latest, behind, self._changed_rows(self.checkpoint + 1, latest), True)

    def sync(self, limit: int | None = None) -> Synced:
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be a source version >= 0, got {limit}")
        target = self.source.latest if limit is None else min(limit, self.source.latest)
        before = self.checkpoint
        if before is None:
            return self._rebuild(target, reinitialized=False)
        if before >= target:
            return Synced(before, before, 0, 0, 0, 0, False, False)
        if not self.source.covers(before):
            return self._rebuild(target, reinitialized=True)
        return self._apply(before, target)

    def restore(self, limit: int | None = None) -> Synced:
        """Build from nothing at ``max(limit, checkpoint)`` (a checkpoint never goes back)."""
        target = self.source.latest if limit is None else min(limit, self.source.latest)
        before = self.checkpoint
        at = max(target, before or 0)
        self.rows, self.checkpoint = self._shard(self.source.rows(at)), at
        versions = at + 1 if before is None else at - before
        return Synced(before, at, versions, len(self.rows), 0, 1, True, False)

    def _rebuild(self, target: int, reinitialized: bool) -> Synced:
        before = self.checkpoint
        self.rows, self.checkpoint = self._shard(self.source.rows(target)), target
        return Synced(before, target, target + 1, len(self.rows), 0, 1, True, reinitialized)

    def _apply(self, before: int, target: int) -> Synced:
        drops = commits = 0
        run_start = before + 1
        for version in range(before + 1, target + 1):
            if self.source.versions[version].drop:
                commits += (version > run_start) + 1
                drops += 1
                run_start = version + 1
        commits += run_start <= target
        rows = self._changed_rows(before + 1, target, drops=False)
        self.rows, self.checkpoint = self._shard(self.source.rows(target)), target
        return Synced(before, target, target - before, rows, drops, commits, False, False)


# ---------------------------------------------------------------------- sources from the other models
def version_identity(row: Row) -> Hashable:
    """A versioned store's row identity: ``(key, valid_from, pending)`` (a version may be both sealed and
    pending until a seal)."""
    return (row[0], row[1], row[4])


def dedup_identity(row: Row) -> Hashable:
    """A seen-ID index row's identity: ``(task, *id, entry time)``."""
    return row[:-2]


@dataclass
class VersionedSource:
    """A versioned store's table as a :class:`SourceModel`: rows ``(key, valid_from, valid_to, value,
    pending)``.

    Times are integers (the tests' milliseconds); ``interval`` is the segment interval in those units, a
    sealed row's segment ``valid_to // interval`` (None for a latest version). What each operation commits:

    - ``put_all`` of a new batch: one commit, even when no record is accepted. Its accepted versions go to
      the pending rows: per key, the pending versions and the batch's (the last record per time wins)
      form one chain, each ``valid_to`` the next ``valid_from`` in it. Every accepted version is written
      (an unchanged one included, an expired one too) and every pending version whose ``valid_to``
      changes. Sealed rows are untouched.
    - ``seal``: one commit when a batch wrote pending rows since the last seal. Per key with pending rows,
      its sealed rows in the region (latest ones, and segments from ``(stream time at the previous seal -
      retention) // interval`` on) and its pending rows form one chain (a pending version replaces a
      sealed one at its time); every pending row is removed, its version written sealed, every sealed
      version whose ``valid_to`` changes rewritten, except versions expired at the seal (not written,
      removed when sealed).
    - a replayed batch id: no commit.
    - ``expire``: a partition drop of every sealed segment below ``(stream_time - retention) // interval``;
      no commit when no row is in such a segment.
    - ``vacuum``: VACUUM START and END (no row changes); :meth:`vacuum_everything` also stops covering
      earlier checkpoints.
    """

    retention: int
    interval: int
    store: VersionedStoreModel = field(init=False)
    source: SourceModel = field(default_factory=SourceModel)
    sealed: dict[tuple[Hashable, int], tuple[int | None, Any]] = field(default_factory=dict)
    pending: dict[tuple[Hashable, int], tuple[int | None, Any]] = field(default_factory=dict)
    pending_writes: int = 0
    sealed_writes: int = 0
    seal_stream_time: int | None = None

    def __post_init__(self) -> None:
        self.store = VersionedStoreModel(self.retention)

    def _table(self) -> frozenset[Row]:
        sealed = {(k, vf, vt, value, False) for (k, vf), (vt, value) in self.sealed.items()}
        return frozenset(sealed | {(k, vf, vt, value, True) for (k, vf), (vt, value) in self.pending.items()})

    def _expired(self, valid_to: int | None) -> bool:
        assert self.store.stream_time is not None
        return valid_to is not None and valid_to <= self.store.stream_time - self.retention

    def put_all(self, records: Sequence[tuple[Hashable, Any, int]]) -> int:
        """Put ``(key, value or None for a tombstone, time)`` records in processing order; one commit."""
        incoming: dict[tuple[Hashable, int], Any] = {}
        for key, value, t in records:
            if self.store.put(key, value, t).status != NOT_PUT:
                incoming[(key, t)] = value
        if not incoming:
            return self.source.commit(self.source.rows())
        self.pending_writes += 1
        rewritten = set()
        for key in {k for k, _ in incoming}:
            chain = sorted({t for k, t in self.pending if k == key} | {t for k, t in incoming if k == key})
            for i, t in enumerate(chain):
                valid_to = chain[i + 1] if i + 1 < len(chain) else None
                if (key, t) in incoming:
                    value = incoming[(key, t)]
                elif self.pending[(key, t)][0] != valid_to:
                    value = self.pending[(key, t)][1]
                else:
                    continue
                self.pending[(key, t)] = (valid_to, value)
                rewritten.add((key, t, valid_to, value, True))
        return self.source.commit_diff(self._table(), version_identity, rewritten)

    def seal(self) -> int | None:
        """Move the pending versions into the sealed ones; returns the commit's version (None: no commit)."""
        if self.pending_writes == self.sealed_writes:
            return None
        assert self.store.stream_time is not None
        first = (
            None
            if self.seal_stream_time is None
            else (self.seal_stream_time - self.retention) // self.interval
        )
        self.sealed_writes, self.seal_stream_time = self.pending_writes, self.store.stream_time
        rewritten = set()
        for key in {k for k, _ in self.pending}:
            chain = {
                t: (vt, value, False)
                for (k, t), (vt, value) in self.sealed.items()
                if k == key and (vt is None or first is None or vt // self.interval >= first)
            }
            chain.update({t: (vt, value, True) for (k, t), (vt, value) in self.pending.items() if k == key})
            times = sorted(chain)
            for i, t in enumerate(times):
                valid_to = times[i + 1] if i + 1 < len(times) else None
                stored_to, value, was_pending = chain[t]
                if was_pending:
                    del self.pending[(key, t)]
                elif stored_to == valid_to:
                    continue
                if self._expired(valid_to):
                    self.sealed.pop((key, t), None)
                else:
                    self.sealed[(key, t)] = (valid_to, value)
                    rewritten.add((key, t, valid_to, value, False))
        return self.source.commit_diff(self._table(), version_identity, rewritten)

    def expire(self) -> int | None:
        """Drop the expired segments; returns the drop's version (None: nothing to drop, no commit)."""
        if self.store.stream_time is None:
            return None
        bound = (self.store.stream_time - self.retention) // self.interval
        gone = {
            (k, t, vt, value, False)
            for (k, t), (vt, value) in self.sealed.items()
            if vt is not None and vt // self.interval < bound
        }
        if not gone:
            return None
        for k, t, *_ in gone:
            del self.sealed[(k, t)]
        return self.source.commit(self._table(), removed=gone, drop=True)

    def vacuum(self) -> None:
        self.source.vacuum()

    def vacuum_everything(self) -> None:
        self.source.vacuum(retain_nothing=True)


def dedup_rows(model: DedupModel) -> frozenset[Row]:
    """A seen-ID index's rows: ``(task, *id, entry time, partition, offset)`` of every stored entry."""
    return frozenset((task, *ident, e.ts, e.partition, e.offset) for (task, ident), e in model.index.items())


def dedup_purge(model: DedupModel) -> None:
    """Forget the expired entries (what a purge drops, at entry granularity)."""
    model.index = model.live_entries()
