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
    """One commit of the source: the table after it, the rows it wrote and removed, whether a drop.

    For a versioned store also what the commit is to a logical replica (``role``: ``write`` a batch,
    ``seal``, ``drop`` with its ``bound``, ``neutral`` a VACUUM) and the store's stream time after it.
    """

    rows: frozenset[Row]
    written: frozenset[Row] = frozenset()
    removed: frozenset[Row] = frozenset()
    drop: bool = False
    role: str = "write"
    bound: int | None = None
    stream_time: int | None = None


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
        **facts: Any,
    ) -> int:
        """Append a version (``facts``: its role, bound, stream time); returns it."""
        found = SourceVersion(frozenset(rows), frozenset(written), frozenset(removed), drop, **facts)
        self.versions.append(found)
        return self.latest

    def commit_diff(
        self,
        rows: Iterable[Row],
        identity: Callable[[Row], Hashable],
        rewritten: Iterable[Row] = (),
        **facts: Any,
    ) -> int:
        """Append a version whose changes are its difference from the latest: written are the new or changed
        rows (plus ``rewritten`` rows written again unchanged), removed the rows whose identity is gone (a
        changed row's old image is a preimage, not a removal)."""
        before, after = self.rows(), frozenset(rows)
        kept = {identity(r) for r in after}
        removed = {r for r in before if identity(r) not in kept}
        return self.commit(after, (after - before) | frozenset(rewritten), removed, **facts)

    def vacuum(self, retain_nothing: bool = False, stream_time: int | None = None) -> None:
        """VACUUM START and VACUUM END (no row changes); ``retain_nothing``: every unused file is deleted."""
        start = self.commit(self.rows(), role="neutral", stream_time=stream_time)
        self.commit(self.rows(), role="neutral", stream_time=stream_time)
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


Key = tuple[Hashable, int]


@dataclass
class VersionedTable:
    """A versioned store's physical rows: sealed and pending versions ``(key, valid_from) -> (valid_to,
    value)``, its pending tier's counters and the stream time of its last seal. Times are integers (the
    tests' milliseconds); a sealed row's segment is ``valid_to // interval`` (None for a latest version).

    - ``seal``: when a write added pending rows since the last seal. Per key with pending rows, its sealed
      rows in the region (latest ones, and segments from ``(stream time at the previous seal - retention)
      // interval`` on) and its pending rows form one chain (a pending version replaces a sealed one at its
      time); every pending row is removed, its version written sealed, every sealed version whose
      ``valid_to`` changes rewritten, except versions expired at the seal (not written, removed when
      sealed).
    - ``drop``: every sealed row in a segment below a bound goes.
    - :meth:`versions`: what reads see (:mod:`lakehouse.versioned.pending`): per key its sealed and pending
      versions, a pending one replacing a sealed one at its time, each ``valid_to`` the smaller of its own
      and the next version's time.
    """

    retention: int
    interval: int
    sealed: dict[Key, tuple[int | None, Any]] = field(default_factory=dict)
    pending: dict[Key, tuple[int | None, Any]] = field(default_factory=dict)
    pending_writes: int = 0
    sealed_writes: int = 0
    seal_stream_time: int | None = None

    def rows(self) -> frozenset[Row]:
        """The rows ``(key, valid_from, valid_to, value, pending)``."""
        sealed = {(k, vf, vt, value, False) for (k, vf), (vt, value) in self.sealed.items()}
        return frozenset(sealed | {(k, vf, vt, value, True) for (k, vf), (vt, value) in self.pending.items()})

    def seal(self, stream_time: int) -> set[Row] | None:
        """Seal at ``stream_time``; returns the rows written (None: nothing pending, no commit)."""
        if self.pending_writes == self.sealed_writes:
            return None
        first = (
            None
            if self.seal_stream_time is None
            else (self.seal_stream_time - self.retention) // self.interval
        )
        self.sealed_writes, self.seal_stream_time = self.pending_writes, stream_time
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
                if valid_to is not None and valid_to <= stream_time - self.retention:
                    self.sealed.pop((key, t), None)
                else:
                    self.sealed[(key, t)] = (valid_to, value)
                    rewritten.add((key, t, valid_to, value, False))
        return rewritten

    def drop(self, bound: int) -> set[Row]:
        """Drop the sealed rows of segments below ``bound``; returns them."""
        gone = {
            (k, t, vt, value, False)
            for (k, t), (vt, value) in self.sealed.items()
            if vt is not None and vt // self.interval < bound
        }
        for k, t, *_ in gone:
            del self.sealed[(k, t)]
        return gone

    def versions(self) -> frozenset[tuple[Hashable, int, int | None, Any]]:
        """Every version as reads see it: ``(key, valid_from, valid_to, value)``."""
        return resolved(self.rows())


def resolved(rows: Iterable[Row]) -> frozenset[tuple[Hashable, int, int | None, Any]]:
    """A store's versions from its rows ``(key, valid_from, valid_to, value, pending)``: per version the
    pending row if there is one, its ``valid_to`` the smaller of its own and its key's next ``valid_from``."""
    chosen: dict[Key, tuple[int | None, Any]] = {}
    for k, vf, vt, value, _ in sorted(rows, key=lambda r: r[4]):  # pending rows last: they win
        chosen[(k, vf)] = (vt, value)
    found = set()
    for (k, vf), (vt, value) in chosen.items():
        later = [t for key, t in chosen if key == k and t > vf]
        after = min(later) if later else None
        bound = after if vt is None or (after is not None and after < vt) else vt
        found.add((k, vf, bound, value))
    return frozenset(found)


def live(versions: Iterable[tuple[Hashable, int, int | None, Any]], stream_time: int | None, retention: int):
    """The versions a read can return at ``stream_time``: the latest ones and those ending after
    ``stream_time - retention``."""
    if stream_time is None:
        return frozenset(versions)
    return frozenset(v for v in versions if v[2] is None or v[2] > stream_time - retention)


@dataclass
class VersionedSource:
    """A versioned store's table as a :class:`SourceModel`: rows ``(key, valid_from, valid_to, value,
    pending)`` of a :class:`VersionedTable`. What each operation commits:

    - ``put_all`` of a new batch: one commit, even when no record is accepted. Its accepted versions go to
      the pending rows (the last record per time wins), each ``valid_to`` the next ``valid_from`` of its
      key in the batch; one at the time of a pending row replaces it. Every accepted version is written
      (an unchanged one included, an expired one too); no other row is (reads bound a pending version by
      the next version of its key). Sealed rows are untouched.
    - ``seal``: :meth:`VersionedTable.seal` at the store's stream time, one commit when there was a write.
    - a replayed batch id: no commit.
    - ``expire``: a partition drop of every sealed segment below ``(stream_time - retention) // interval``;
      no commit when no row is in such a segment.
    - ``vacuum``: VACUUM START and END (no row changes); :meth:`vacuum_everything` also stops covering
      earlier checkpoints.
    """

    retention: int
    interval: int
    store: VersionedStoreModel = field(init=False)
    table: VersionedTable = field(init=False)
    source: SourceModel = field(default_factory=SourceModel)

    def __post_init__(self) -> None:
        self.store = VersionedStoreModel(self.retention)
        self.table = VersionedTable(self.retention, self.interval)

    def put_all(self, records: Sequence[tuple[Hashable, Any, int]]) -> int:
        """Put ``(key, value or None for a tombstone, time)`` records in processing order; one commit."""
        incoming: dict[Key, Any] = {}
        for key, value, t in records:
            if self.store.put(key, value, t).status != NOT_PUT:
                incoming[(key, t)] = value
        facts = {"role": "write", "stream_time": self.store.stream_time}
        if not incoming:
            return self.source.commit(self.source.rows(), **facts)
        self.table.pending_writes += 1
        rewritten = set()
        for key in {k for k, _ in incoming}:
            chain = sorted(t for k, t in incoming if k == key)
            for t, valid_to in zip(chain, [*chain[1:], None], strict=True):
                self.table.pending[(key, t)] = (valid_to, incoming[(key, t)])
                rewritten.add((key, t, valid_to, incoming[(key, t)], True))
        return self.source.commit_diff(self.table.rows(), version_identity, rewritten, **facts)

    def seal(self) -> int | None:
        """Move the pending versions into the sealed ones; returns the commit's version (None: no commit)."""
        assert self.store.stream_time is not None or not self.table.pending
        rewritten = self.table.seal(self.store.stream_time or 0)
        if rewritten is None:
            return None
        facts = {"role": "seal", "stream_time": self.store.stream_time}
        return self.source.commit_diff(self.table.rows(), version_identity, rewritten, **facts)

    def expire(self) -> int | None:
        """Drop the expired segments; returns the drop's version (None: nothing to drop, no commit)."""
        if self.store.stream_time is None:
            return None
        bound = (self.store.stream_time - self.retention) // self.interval
        gone = self.table.drop(bound)
        if not gone:
            return None
        facts = {"role": "drop", "bound": bound, "stream_time": self.store.stream_time}
        return self.source.commit(self.table.rows(), removed=gone, drop=True, **facts)

    def vacuum(self) -> None:
        self.source.vacuum(stream_time=self.store.stream_time)

    def vacuum_everything(self) -> None:
        self.source.vacuum(retain_nothing=True, stream_time=self.store.stream_time)

    def stream_time(self, version: int) -> int | None:
        """The store's stream time after ``version``."""
        return next(
            (v.stream_time for v in reversed(self.source.versions[: version + 1]) if v.stream_time), None
        )

    def reads(self, version: int, in_shard: Callable[[Row], bool]) -> frozenset[Any]:
        """What reads see at ``version`` in a shard: the live versions (:func:`live`)."""
        versions = resolved(r for r in self.source.rows(version) if in_shard(r))
        return live(versions, self.stream_time(version), self.retention)


@dataclass
class LogicalReplicaModel:
    """A shard replica of a :class:`VersionedSource` that follows its logical changelog (issue 37).

    It holds a :class:`VersionedTable` of its own. ``sync(limit)`` checks, restores and re-initializes as
    :class:`ReplicaModel` does; applying versions: a batch's written rows of the shard that change a read
    (:meth:`_written`) go into its own pending rows (per version the newest row), a seal or VACUUM changes
    nothing, a drop drops its own segments below the same bound. The batches between two drops are one
    commit (none when there are none, unless they end the range: the checkpoint must be recorded), each
    drop one. ``seal()`` seals its own table at the source's stream time at its checkpoint. A restore
    writes the source's versions of the shard at the target as sealed rows. Its reads (:meth:`reads`)
    equal the source's at its checkpoint.
    """

    source: VersionedSource
    in_shard: Callable[[Row], bool] = lambda row: True
    checkpoint: int | None = None
    table: VersionedTable = field(init=False)

    def __post_init__(self) -> None:
        self.table = VersionedTable(self.source.retention, self.source.interval)

    @property
    def versions(self) -> list[SourceVersion]:
        return self.source.source.versions

    def _changes(self, number: int) -> list[Row]:
        """The rows the batch of source version ``number`` wrote in the shard that change a read: new
        versions, and pending ones whose value changed (a pending row written again with its value, its
        ``valid_to`` re-bounded or not, is not one: reads bound it by the next version of its key)."""
        held = {(r[0], r[1], r[3]) for r in self.versions[number - 1].rows if r[4]}
        written = sorted(self.versions[number].written, key=repr)
        return [r for r in written if self.in_shard(r) and (r[0], r[1], r[3]) not in held]

    def _written(self, first: int, last: int) -> dict[Key, Row]:
        """Per version, the newest of the rows the batches ``first .. last`` wrote that change a read."""
        net: dict[Key, Row] = {}
        for number in range(first, last + 1):
            if self.versions[number].role == "write":
                net.update({(row[0], row[1]): row for row in self._changes(number)})
        return net

    def lag(self) -> Lag:
        latest = self.source.source.latest
        rows_now = len(resolved(r for r in self.source.source.rows() if self.in_shard(r)))
        if self.checkpoint is None:
            return Lag(None, latest, latest + 1, rows_now, False)
        if self.checkpoint >= latest:
            return Lag(self.checkpoint, latest, 0, 0, True)
        behind = latest - self.checkpoint
        if not self.source.source.covers(self.checkpoint):
            return Lag(self.checkpoint, latest, behind, rows_now, False)
        writes = [n for n in range(self.checkpoint + 1, latest + 1) if self.versions[n].role == "write"]
        return Lag(self.checkpoint, latest, behind, sum(len(self._changes(n)) for n in writes), True)

    def sync(self, limit: int | None = None) -> Synced:
        source = self.source.source
        target = source.latest if limit is None else min(limit, source.latest)
        before = self.checkpoint
        if before is None:
            return self._rebuild(target, reinitialized=False)
        if before >= target:
            return Synced(before, before, 0, 0, 0, 0, False, False)
        if not source.covers(before):
            return self._rebuild(target, reinitialized=True)
        rows = drops = commits = 0
        after = before
        for version in range(before + 1, target + 1):
            found = self.versions[version]
            if found.role != "drop":
                continue
            if any(v.role == "write" for v in self.versions[after + 1 : version]):
                rows += self._write(after + 1, version - 1)
                commits += 1
            assert found.bound is not None
            self.table.drop(found.bound)
            drops += 1
            commits += 1
            after = version
        if after < target:
            rows += self._write(after + 1, target)
            commits += 1
        self.checkpoint = target
        return Synced(before, target, target - before, rows, drops, commits, False, False)

    def _write(self, first: int, last: int) -> int:
        if not any(v.written for v in self.versions[first : last + 1] if v.role == "write"):
            return 0
        net = self._written(first, last)
        table = self.table
        table.pending_writes = max(table.pending_writes, table.sealed_writes) + 1
        for k, vf, vt, value, _ in net.values():
            table.pending[(k, vf)] = (vt, value)
        return len(net)

    def restore(self, limit: int | None = None) -> Synced:
        """Build from nothing at ``max(limit, checkpoint)`` (a checkpoint never goes back)."""
        source = self.source.source
        target = source.latest if limit is None else min(limit, source.latest)
        before = self.checkpoint
        at = max(target, before or 0)
        rows = self._restore(at)
        return Synced(before, at, at + 1 if before is None else at - before, rows, 0, 1, True, False)

    def _rebuild(self, target: int, reinitialized: bool) -> Synced:
        before = self.checkpoint
        return Synced(before, target, target + 1, self._restore(target), 0, 1, True, reinitialized)

    def _restore(self, target: int) -> int:
        old = self.table
        versions = resolved(r for r in self.source.source.rows(target) if self.in_shard(r))
        writes = max(old.pending_writes, old.sealed_writes)
        sealed_at = [t for t in (old.seal_stream_time, self.source.stream_time(target)) if t is not None]
        self.table = VersionedTable(
            old.retention,
            old.interval,
            {(k, vf): (vt, value) for k, vf, vt, value in versions},
            {},
            writes,
            writes,
            max(sealed_at) if sealed_at else None,
        )
        self.checkpoint = target
        return len(versions)

    def seal(self) -> set[Row] | None:
        """Seal the replica's own table (at the source's stream time at its checkpoint)."""
        assert self.checkpoint is not None
        return self.table.seal(self.source.stream_time(self.checkpoint) or 0)

    def reads(self) -> frozenset[Any]:
        """What reads through the replica see: its live versions."""
        assert self.checkpoint is not None
        return live(self.table.versions(), self.source.stream_time(self.checkpoint), self.source.retention)


def dedup_rows(model: DedupModel) -> frozenset[Row]:
    """A seen-ID index's rows: ``(task, *id, entry time, partition, offset)`` of every stored entry."""
    return frozenset((task, *ident, e.ts, e.partition, e.offset) for (task, ident), e in model.index.items())


def dedup_purge(model: DedupModel) -> None:
    """Forget the expired entries (what a purge drops, at entry granularity)."""
    model.index = model.live_entries()
