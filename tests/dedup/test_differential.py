"""Spark against the reference model on whole random sequences (few examples: each is several commits).

A sequence: random ids (some null), timestamps out of order, several partitions, Kafka-like batches
(contiguous offset ranges per partition), at-least-once re-deliveries of an earlier batch under a new batch
id, and a replay of an already committed batch id (identical output, nothing written).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakehouse.dedup import Deduplicator
from tests.dedup.helpers import spark_forwarded
from tests.reference.dedup import DedupModel, Rec

BY_CHOICES = [("id",), ("key",), ("key", "id")]
VALUES = st.sampled_from(["a", "b", "c", None])


@st.composite
def sequences(draw: st.DrawFn) -> tuple[tuple[str, ...], int, list[list[Rec]]]:
    """(by, interval, batches); a batch may repeat an earlier one's records (re-delivery)."""
    by = draw(st.sampled_from(BY_CHOICES))
    interval = draw(st.sampled_from([0, 5, 10]))
    n_partitions = draw(st.integers(1, 3))
    batches: list[list[Rec]] = []
    next_offset = dict.fromkeys(range(n_partitions), 0)
    for b in range(draw(st.integers(2, 3))):
        if batches and draw(st.booleans()):
            batches.append(list(draw(st.sampled_from(batches))))
            continue
        batch = []
        for partition in range(n_partitions):
            for _ in range(draw(st.integers(0, 5))):
                offset = next_offset[partition]
                next_offset[partition] += 1
                ident = tuple(draw(VALUES) for _ in by)
                ts = draw(st.integers(0, 40)) + 10 * b
                batch.append(Rec(ident, ts, partition, offset, f"p{partition}o{offset}"))
        batches.append(batch)
    return by, interval, batches


@pytest.mark.slow
@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequences())
def test_spark_matches_model_on_random_sequences(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, sequence
) -> None:
    by, interval, batches = sequence
    path = str(tmp_path_factory.mktemp("diff") / "index")
    dedup = Deduplicator.create(spark, path, by=by, interval=timedelta(seconds=interval))
    model = DedupModel(interval, per_partition="key" in by)
    outputs = []
    for batch_id, batch in enumerate(batches):
        expected = sorted(r.label for r, d in model.process_batch(batch) if d.forwarded)
        got = spark_forwarded(dedup, spark, batch, batch_id)
        assert got == expected, f"batch {batch_id} of {batches}"
        outputs.append(got)
    version = dedup.index().sparkSession.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["version"]
    assert spark_forwarded(dedup, spark, batches[0], 0) == outputs[0]
    assert dedup.stats is not None and dedup.stats.replay
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["version"] == version
