"""Every worked example of KIP-655, verbatim (interval 10 s unless stated), on the model and on Spark.

The model processes the records one by one; Spark gets each example as one batch (in-batch sequential
resolution) against a fresh index.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import SparkSession

from lakehouse.dedup import Deduplicator
from tests.dedup.helpers import labelled, spark_forwarded
from tests.reference.dedup import Decision, DedupModel, Rec

F, D = Decision.FORWARDED, Decision.DUPLICATE
LATE = Decision.LATE
T = 100  # the KIP's "t"

# (name, interval in seconds, [(id, timestamp)], expected decisions)
EXAMPLES = [
    ("duplicate_sequence", 10, [("a", T), ("a", T + 8), ("a", T + 11)], [F, D, F]),
    ("duplicate_sequence_out_of_order", 10, [("a", T), ("a", T - 8), ("a", T - 11)], [F, D, LATE]),
    ("bounds_inclusive", 10, [("a", 5), ("a", 15), ("a", 16)], [F, D, F]),
    ("bounds_inclusive_out_of_order", 10, [("a", 15), ("a", 5), ("a", 4)], [F, D, LATE]),
    ("interval_zero", 0, [("a", 5), ("a", 5), ("a", 6)], [F, D, F]),
    ("late_example1", 10, [("k", 20), ("k", 25), ("k", 11), ("k", 9)], [F, D, D, LATE]),
    ("late_example2", 10, [("k1", 10), ("k2", 20), ("k1", 9)], [F, F, D]),
    ("late_example3", 10, [("k1", 10), ("k2", 21), ("k1", 9)], [F, F, LATE]),
]
IDS = [e[0] for e in EXAMPLES]


@pytest.mark.parametrize(("name", "interval", "events", "expected"), EXAMPLES, ids=IDS)
def test_model_matches_kip_example(name: str, interval: int, events: list, expected: list) -> None:
    model = DedupModel(interval=interval, per_partition=False)
    assert [model.process(rec) for rec in labelled(events)] == expected


@pytest.mark.parametrize("interval", sorted({e[1] for e in EXAMPLES}))
def test_spark_batch_matches_every_kip_example(spark: SparkSession, table_path: str, interval: int) -> None:
    """All examples with this interval in one batch: each in its own partition, so its own task."""
    examples = [e for e in EXAMPLES if e[1] == interval]
    records, want = [], []
    for partition, (name, _, events, expected) in enumerate(examples):
        for offset, ((key, ts), decision) in enumerate(zip(events, expected, strict=True)):
            rec = Rec((key,), ts, partition, offset, f"{name}/{offset}")
            records.append(rec)
            if decision.forwarded:
                want.append(rec.label)
    dedup = Deduplicator.create(spark, table_path, by="key", interval=timedelta(seconds=interval))
    assert spark_forwarded(dedup, spark, records, batch_id=0) == sorted(want)
    stats = dedup.stats
    assert stats is not None
    expected_all = [d for e in examples for d in e[3]]
    assert (stats.duplicates, stats.late) == (expected_all.count(D), expected_all.count(LATE))


def test_late_record_is_not_saved_so_its_duplicate_is_forwarded() -> None:
    model = DedupModel(interval=10, per_partition=False)
    records = labelled([("k1", 10), ("k2", 21), ("k1", 9), ("k1", 9)])
    assert [model.process(r) for r in records] == [F, F, LATE, LATE]


def test_null_id_forwarded_never_stored() -> None:
    model = DedupModel(interval=10, per_partition=False)
    records = labelled([((None,), 1), ((None,), 1)])
    assert [model.process(r) for r in records] == [Decision.NULL_ID, Decision.NULL_ID]
    assert model.index == {}
