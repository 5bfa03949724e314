"""The replica reference model on its own (pure Python, many examples): its changes replay to its snapshots,
its shards partition the table, its checkpoints and lags follow the issue's rules."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference.dedup import DedupModel, Rec
from tests.reference.replica import (
    Lag,
    LogicalReplicaModel,
    ReplicaModel,
    Row,
    SourceModel,
    VersionedSource,
    dedup_identity,
    dedup_purge,
    dedup_rows,
    version_identity,
)

SHARDS = 2
VERSIONED_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.lists(
                st.tuples(st.sampled_from("abcd"), st.sampled_from(["x", "y", None]), st.integers(0, 60)),
                min_size=1,
                max_size=4,
            ),
        ),
        st.tuples(st.sampled_from(["seal", "expire", "vacuum", "vacuum_everything"]), st.none()),
        st.tuples(
            st.just("sync"), st.tuples(st.integers(0, SHARDS - 1), st.one_of(st.none(), st.integers(0, 15)))
        ),
        st.tuples(st.just("seal_replica"), st.integers(0, SHARDS - 1)),
    ),
    max_size=14,
)


def replayed(
    rows: frozenset[Row], source: SourceModel, first: int, last: int, identity: Callable[[Row], Hashable]
) -> frozenset[Row]:
    """``rows`` with versions ``first .. last`` applied change by change: per identity, removal or upsert."""
    table = {identity(r): r for r in rows}
    for version in source.versions[first : last + 1]:
        for row in version.removed:
            table.pop(identity(row), None)  # rows of another shard are not in ``rows``
        for row in version.written:
            table[identity(row)] = row
    return frozenset(table.values())


def check_sync(model: ReplicaModel, limit: int | None, identity: Callable[[Row], Hashable]) -> None:
    source = model.source
    before, rows_before, lag_before = model.checkpoint, model.rows, model.lag()
    result = model.sync(limit)
    target = source.latest if limit is None else min(limit, source.latest)
    assert model.checkpoint == (target if before is None else max(before, target))
    assert result.checkpoint == model.checkpoint and result.checkpoint_before == before
    assert model.rows == frozenset(r for r in source.rows(model.checkpoint) if model.in_shard(r))
    assert result.reinitialized == (before is not None and target > before and not lag_before.covered)
    assert result.restored == (before is None or result.reinitialized)
    if before is not None and not result.restored and target > before:
        changed = replayed(rows_before, source, before + 1, target, identity)
        assert model.rows == frozenset(r for r in changed if model.in_shard(r))
        assert result.versions == target - before
        if target == source.latest:
            assert result.rows + removed_by_drops(model, before, target) == lag_before.rows
    lag = model.lag()
    assert lag.versions == source.latest - model.checkpoint
    assert lag.covered == source.covers(model.checkpoint)
    assert (lag.rows == 0) if lag.versions == 0 else lag.rows >= 0


def check_logical_sync(model: LogicalReplicaModel, limit: int | None) -> None:
    """A logical replica's sync: checkpoints, restores and lags as :func:`check_sync` has them, and reads
    (not rows) equal to the source's at the checkpoint."""
    source = model.source.source
    before, lag_before = model.checkpoint, model.lag()
    result = model.sync(limit)
    target = source.latest if limit is None else min(limit, source.latest)
    assert model.checkpoint == (target if before is None else max(before, target))
    assert result.checkpoint == model.checkpoint and result.checkpoint_before == before
    assert result.reinitialized == (before is not None and target > before and not lag_before.covered)
    assert result.restored == (before is None or result.reinitialized)
    if before is not None and not result.restored and target > before:
        assert result.versions == target - before
        assert result.rows <= lag_before.rows  # each version's newest row only
    assert model.reads() == model.source.reads(model.checkpoint, model.in_shard)
    lag = model.lag()
    assert lag.versions == source.latest - model.checkpoint
    assert lag.covered == source.covers(model.checkpoint)


def removed_by_drops(model: ReplicaModel, before: int, target: int) -> int:
    drops = [v for v in model.source.versions[before + 1 : target + 1] if v.drop]
    return sum(1 for v in drops for r in v.removed if model.in_shard(r))


@settings(max_examples=400, deadline=None)
@given(VERSIONED_OPS)
def test_versioned_source_replicas_follow_the_issue_rules(ops) -> None:
    source = VersionedSource(retention=20, interval=5)
    models = [LogicalReplicaModel(source, lambda row, p=p: ord(row[0]) % SHARDS == p) for p in range(SHARDS)]
    for op, arg in ops:
        if op == "put":
            before = source.source.rows()
            version = source.put_all(arg)
            # A put removes only versions that expired at its commit: none a read can return.
            removed = {r[:2] for r in source.source.versions[version].removed}
            assert not removed & {r[:2] for r in source.store.readable_history()}
            assert replayed(before, source.source, version, version, version_identity) == source.source.rows()
        elif op == "seal":
            before = source.source.rows()
            version = source.seal()
            if version is not None:
                # A seal removes every pending row, and only sealed versions that no read can return.
                assert not any(r[4] for r in source.source.rows())
                removed = {r[:2] for r in source.source.versions[version].removed if not r[4]}
                assert not removed & {r[:2] for r in source.store.readable_history()}
                after = replayed(before, source.source, version, version, version_identity)
                assert after == source.source.rows()
        elif op == "expire":
            dropped = source.expire()
            assert dropped is None or source.source.versions[dropped].drop
        elif op == "vacuum":
            source.vacuum()
        elif op == "vacuum_everything":
            source.vacuum_everything()
        elif op == "seal_replica":
            replica = models[arg]
            if replica.checkpoint is not None:
                reads = replica.reads()
                replica.seal()  # on its own schedule: reads are the same
                assert replica.reads() == reads
        else:
            shard, limit = arg
            check_logical_sync(models[shard], limit)
    for model in models:
        check_logical_sync(model, None)
    everything = source.reads(source.source.latest, lambda row: True)
    assert models[0].reads() | models[1].reads() == everything
    assert not models[0].reads() & models[1].reads()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from("pq"), st.integers(0, 30), st.integers(0, 1)), min_size=1, max_size=4
        ),
        max_size=5,
    ),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, SHARDS - 1), st.integers(0, 12)), max_size=4),
)
def test_dedup_index_replicas_follow_the_issue_rules(batches, syncs) -> None:
    index = DedupModel(interval=5, per_partition=True)
    source = SourceModel()
    # A per-partition index's shard is its task (= source partition) modulo the shards.
    models = [ReplicaModel(source, lambda row, p=p: row[0] % SHARDS == p) for p in range(SHARDS)]
    offsets = [0, 0]
    for number, batch in enumerate(batches):
        records = []
        for ident, ts, partition in batch:
            records.append(Rec((ident,), ts + 20 * number, partition, offsets[partition]))
            offsets[partition] += 1
        index.process_batch(records)
        source.commit_diff(dedup_rows(index), dedup_identity)
        if number % 2:
            before = source.rows()
            dedup_purge(index)
            source.commit(dedup_rows(index), removed=before - dedup_rows(index), drop=True)
        for after_batch, shard, limit in syncs:
            if after_batch == number:
                check_sync(models[shard], limit, dedup_identity)
    for model in models:
        check_sync(model, None, dedup_identity)
    assert models[0].rows | models[1].rows == source.rows()


def test_worked_example_limit_reinitialization_and_lag() -> None:
    source = SourceModel()
    replica = ReplicaModel(source)
    for n in range(3):
        source.commit({("k", n)}, written={("k", n)}, removed={("k", n - 1)} if n else ())
    assert replica.lag() == Lag(None, 3, 4, 1, False)
    assert replica.sync(limit=1).checkpoint == 1 and replica.rows == {("k", 0)}
    assert replica.sync(limit=0).versions == 0 and replica.checkpoint == 1  # a checkpoint never goes back
    assert replica.lag().versions == 2 and replica.lag().rows == 4  # two writes, two removals
    assert replica.sync(limit=99).checkpoint == 3 and replica.rows == {("k", 2)}
    source.commit({("k", 3)}, written={("k", 3)}, removed={("k", 2)})
    source.vacuum(retain_nothing=True)  # versions 5, 6: checkpoint 3 is no longer covered
    assert not replica.lag().covered and replica.lag().rows == 1
    result = replica.sync()
    assert result.reinitialized and result.restored and result.versions == 7 and replica.checkpoint == 6
    again = replica.restore(limit=2)  # a restore never moves the checkpoint back
    assert (again.checkpoint, again.versions, again.restored, replica.rows) == (6, 0, True, {("k", 3)})
