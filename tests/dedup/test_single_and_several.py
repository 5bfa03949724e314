"""One batch mixing ids alone in the batch (decided by column expressions) and ids with several records
(decided by the per-id fold), against the reference model: forwarded set, counts and resulting index.

Batch 0 saves entries; batch 1 holds, for single-record ids, a duplicate, a replay, a record with a null
offset next to its entry, a late new id, a forwarded new id, a forwarded id whose entry expired and null
ids; and for several-record ids, duplicates, forwards, a late record and a re-save, across two partitions.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.dedup import Deduplicator
from tests.dedup.helpers import at, spark_forwarded
from tests.reference.dedup import Decision, DedupModel, Entry, Rec

INTERVAL = 10
BATCH0 = [("exp", 80), ("dup", 100), ("rep", 101), ("m1", 102), ("m2", 103), ("nulloff", 104)]
# (id, ts, partition, offset) of batch 1; offsets of partition 0 continue batch 0's (0..5).
BATCH1 = [
    ("rep", 101, 0, 2),
    ("dup", 108, 0, 6),
    ("new", 112, 0, 7),
    ("late", 90, 0, 8),
    ("nulloff", 104, 0, None),
    (None, 113, 0, 10),
    ("m1", 109, 0, 11),
    ("m1", 114, 0, 12),
    ("exp", 111, 0, 13),
    (None, 105, 1, 0),
    ("m2", 104, 1, 1),
    ("m2", 120, 1, 2),
    ("m2", 125, 1, 3),
    ("m3", 121, 1, 4),
    ("m3", 108, 1, 5),
]


def _batches(by: tuple[str, ...]) -> tuple[list[Rec], list[Rec]]:
    """The two batches; the key column is the constant "k", so ("key", "id") keeps the same ids."""

    def ident(value: str | None) -> tuple[str | None, ...]:
        return tuple("k" if c == "key" else value for c in by)

    first = [Rec(ident(i), ts, 0, offset, f"b0/{offset}") for offset, (i, ts) in enumerate(BATCH0)]
    second = [Rec(ident(i), ts, p, o, f"b1/{p}/{o}") for i, ts, p, o in BATCH1]
    return first, second


def _newest_entries(dedup: Deduplicator) -> dict[tuple[int, tuple[str, ...]], Entry]:
    """The newest index row of each (task, id), as the model's entries (seconds after T0)."""
    by = list(dedup.settings.by)
    t0_us = int(at(0).timestamp()) * 1_000_000
    seconds = ((F.unix_micros("entry_ts") - F.lit(t0_us)) / 1_000_000).cast("int")
    entry = F.struct(
        seconds.alias("ts"), F.col("entry_partition").alias("p"), F.col("entry_offset").alias("o")
    )
    newest = dedup.index().groupBy("task", *by).agg(F.max_by(entry, "entry_ts").alias("e"))
    return {
        (row["task"], tuple(row[c] for c in by)): Entry(row["e"]["ts"], row["e"]["p"], row["e"]["o"])
        for row in newest.collect()
    }


@pytest.mark.parametrize("by", [("id",), ("key", "id")])
def test_batch_mixing_single_and_several_record_ids_matches_model(
    spark: SparkSession, table_path: str, by: tuple[str, ...]
) -> None:
    first, second = _batches(by)
    model = DedupModel(INTERVAL, per_partition="key" in by)
    model.process_batch(first)
    decided = model.process_batch(second)
    per_id = Counter((model.task_of(r), r.id) for r in second)
    single = {d for r, d in decided if per_id[(model.task_of(r), r.id)] == 1 or None in r.id}
    several = {d for r, d in decided if per_id[(model.task_of(r), r.id)] > 1 and None not in r.id}
    assert single == set(Decision), "batch 1 must give every decision to a record alone of its id"
    assert {Decision.FORWARDED, Decision.DUPLICATE, Decision.LATE} <= several

    dedup = Deduplicator.create(spark, table_path, by=by, interval=timedelta(seconds=INTERVAL))
    spark_forwarded(dedup, spark, first, batch_id=0)
    got = spark_forwarded(dedup, spark, second, batch_id=1)

    assert got == sorted(r.label for r, d in decided if d.forwarded)
    counts = Counter(d for _, d in decided)
    stats = dedup.stats
    assert stats is not None
    assert (stats.duplicates, stats.late, stats.replayed, stats.null_ids) == (
        counts[Decision.DUPLICATE],
        counts[Decision.LATE],
        counts[Decision.REPLAYED],
        counts[Decision.NULL_ID],
    )
    # Each id's last forwarded record of the batch is its new entry (one index row per id and batch).
    assert stats.saved == len({(model.task_of(r), r.id) for r, d in decided if d is Decision.FORWARDED})
    assert _newest_entries(dedup) == model.index
