"""Grace period: records too close to the table's stream time wait in a pending table, emitted once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.asof import grace
from lakehouse.asof.grace import asof_join_with_grace
from lakehouse.errors import InvalidInputError
from tests.asof.helpers import joined, stream
from tests.versioned.helpers import batch_frame, create_store

GRACE = timedelta(milliseconds=10)


@pytest.mark.slow
def test_late_table_data_is_seen_by_waiting_records_and_each_record_is_emitted_once(
    spark: SparkSession, tmp_path
) -> None:
    store = create_store(spark, str(tmp_path / "store"), retention_ms=100, interval_ms=10)
    store.put_all(batch_frame(spark, [("k", "v0", 0, 0, 0), ("k", "v20", 20, 0, 1)]))  # stream time 20
    pending, sink = str(tmp_path / "pending"), str(tmp_path / "sink")
    run = {"grace": GRACE, "pending_path": pending, "sink_path": sink}
    # Cutoff 20 - 10 = 10: k@5 and k@10 are joined now; k@15 and k@25 wait.
    first = asof_join_with_grace(
        stream(spark, [("k", 5), ("k", 10), ("k", 15), ("k", 25)]), store, batch_id=0, **run
    )
    assert (first.emitted, first.pending) == (2, 2)
    # Late table data: a version at 12 arrives after the stream record at 15 was seen; stream time -> 40.
    store.put_all(batch_frame(spark, [("k", "v12", 12, 0, 2), ("k", "v40", 40, 0, 3)]))
    later = stream(spark, [("k", 29), ("k", 31)]).withColumn("id", F.col("id") + 10)
    second = asof_join_with_grace(later, store, batch_id=1, **run)
    assert (second.emitted, second.pending) == (3, 1)  # 15, 25 and 29 <= 30; 31 waits
    replay = asof_join_with_grace(later, store, batch_id=1, **run)
    assert replay.replayed and replay.pending == 1
    out = spark.read.format("delta").load(sink)
    assert joined(out) == {0: ("v0", 0), 1: ("v0", 0), 2: ("v12", 12), 3: ("v20", 20), 10: ("v20", 20)}


def test_grace_longer_than_history_retention_is_refused(spark: SparkSession, tmp_path) -> None:
    store = create_store(spark, str(tmp_path / "store"), retention_ms=5, interval_ms=5)
    with pytest.raises(InvalidInputError, match="must be at least the grace period"):
        asof_join_with_grace(
            stream(spark, [("k", 1)]), store, grace=GRACE, pending_path="p", sink_path="s", batch_id=0
        )


def test_a_negative_batch_id_is_refused_and_creates_nothing(spark: SparkSession, tmp_path) -> None:
    store = create_store(spark, str(tmp_path / "store"), retention_ms=100)
    pending, sink = tmp_path / "pending", tmp_path / "sink"
    with pytest.raises(InvalidInputError, match="batch id must be >= 0, got -1"):
        asof_join_with_grace(
            stream(spark, [("k", 1)]),
            store,
            grace=GRACE,
            pending_path=str(pending),
            sink_path=str(sink),
            batch_id=-1,
        )
    assert not pending.exists() and not sink.exists()


CRASHES = {
    "in the sink commit": ("_append_to_sink", "before"),
    "between the two commits": ("_write_pending", "before"),
    "after the pending commit": ("_write_pending", "after"),
}


@pytest.mark.slow
@pytest.mark.parametrize("crash", list(CRASHES))
def test_a_crash_at_any_step_then_a_rerun_emits_every_record_once(
    spark: SparkSession, tmp_path, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    store = create_store(spark, str(tmp_path / "store"), retention_ms=100, interval_ms=10)
    store.put_all(batch_frame(spark, [("k", "v0", 0, 0, 0), ("k", "v20", 20, 0, 1)]))  # stream time 20
    pending, sink = str(tmp_path / "pending"), str(tmp_path / "sink")
    run = {"grace": GRACE, "pending_path": pending, "sink_path": sink}
    first = stream(spark, [("k", 5), ("k", 15), ("k", 25)])  # cutoff 10: k@5 now, k@15 and k@25 wait
    asof_join_with_grace(first, store, batch_id=0, **run)
    second = stream(spark, [("k", 8), ("k", 29), ("k", 35)]).withColumn("id", F.col("id") + 10)
    _crash_once(monkeypatch, *CRASHES[crash])
    # Batch 1 sees stream time 40 (cutoff 30) when it crashes: k@15, k@25, k@8 and k@29 are ready.
    store.put_all(batch_frame(spark, [("k", "v12", 12, 0, 2), ("k", "v40", 40, 0, 3)]))
    with pytest.raises(_CrashError):
        asof_join_with_grace(second, store, batch_id=1, **run)
    # More table data before the re-run (stream time 50): a sink commit already made keeps cutoff 30.
    store.put_all(batch_frame(spark, [("k", "v50", 50, 0, 4)]))
    rerun = asof_join_with_grace(second, store, batch_id=1, **run)
    out = spark.read.format("delta").load(sink)
    pending_ids = {r["id"] for r in spark.read.format("delta").load(pending).select("id").collect()}
    ready = {0: ("v0", 0), 1: ("v12", 12), 2: ("v20", 20), 10: ("v0", 0), 11: ("v20", 20)}
    if crash == "in the sink commit":  # nothing of batch 1 was committed: the re-run uses cutoff 40
        assert joined(out) == {**ready, 12: ("v20", 20)} and pending_ids == set()
        assert rerun.cutoff is not None and not rerun.replayed
    else:
        assert joined(out) == ready and pending_ids == {12}
        assert rerun.replayed == (crash == "after the pending commit")
    assert out.count() == len(joined(out))  # every stream record emitted once


class _CrashError(RuntimeError):
    """The injected crash."""


def _crash_once(monkeypatch: pytest.MonkeyPatch, step: str, when: str) -> None:
    """Make ``grace.<step>`` raise once, before or after doing its commit."""
    real = getattr(grace, step)
    calls = {"n": 0}

    def crashing(*args: object) -> None:
        calls["n"] += 1
        if calls["n"] == 1 and when == "before":
            raise _CrashError(step)
        real(*args)
        if calls["n"] == 1:
            raise _CrashError(step)

    monkeypatch.setattr(grace, step, crashing)
