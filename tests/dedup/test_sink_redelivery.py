"""Exactly-once in the sink when the source re-delivers records (same partition and offset again)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakehouse.dedup import Deduplicator
from tests.dedup.helpers import frame, labels
from tests.reference.dedup import DedupModel, Rec

INTERVAL = timedelta(seconds=10)


def _offsets(spark: SparkSession, sink: str) -> Counter[tuple[int, int]]:
    rows = spark.read.format("delta").load(sink).select("partition", "offset").collect()
    return Counter((r["partition"], r["offset"]) for r in rows)


def _sink_model(batches: list[list[Rec]]) -> list[str]:
    """Forwarded records per the KIP-655 model, each (partition, offset) written to the sink once."""
    model, seen, sunk = DedupModel(10, per_partition=False), set(), []
    for batch in batches:
        for rec, decision in model.process_batch(batch):
            if decision.forwarded and (rec.partition, rec.offset) not in seen:
                seen.add((rec.partition, rec.offset))
                sunk.append(rec.label)
    return sorted(sunk)


def test_redelivery_under_a_new_batch_id_and_twice_in_one_batch_is_written_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    index, sink = str(tmp_path / "index"), str(tmp_path / "sink")
    dedup = Deduplicator.create(spark, index, by="id", interval=INTERVAL)
    first = [Rec(("a",), 0, 0, 0, "a0"), Rec(("b",), 1, 1, 0, "b0"), Rec(("c",), 2, 0, 1, "c0")]
    # Batch 1 overlaps batch 0 (a re-read after a crash) and holds one record twice, plus a late one
    # delivered twice (late records are forwarded but never saved, so only the sink can tell).
    second = [
        first[0],
        first[1],
        Rec(("d",), 30, 0, 2, "d0"),
        Rec(("d",), 30, 0, 2, "d0"),
        Rec(("e",), 3, 1, 1, "e0"),
        Rec(("e",), 3, 1, 1, "e0"),
    ]
    stats0 = dedup.run(frame(spark, first, ("id",)), 0, sink)
    forwarded = dedup.apply(frame(spark, second, ("id",)), None)
    assert labels(forwarded).count("a0") == 1  # KIP-655 still forwards a re-delivery downstream
    stats1 = dedup.run(frame(spark, second, ("id",)), 1, sink)
    offsets = _offsets(spark, sink)
    assert set(offsets.values()) == {1}
    assert sorted(offsets) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert (stats0.sink_rows, stats1.sink_rows) == (3, 2)
    assert stats1.forwarded == 6
    assert labels(spark.read.format("delta").load(sink)) == _sink_model([first, second])


_rec = st.builds(
    lambda ident, ts, partition, offset: Rec((ident,), ts, partition, offset, f"{partition}:{offset}"),
    st.sampled_from("ab"),
    st.integers(0, 40),
    st.integers(0, 1),
    st.integers(0, 5),
)


@pytest.mark.slow
@settings(max_examples=2, deadline=None)
@given(batches=st.lists(st.lists(_rec, min_size=1, max_size=6), min_size=2, max_size=2))
def test_sink_matches_the_model_with_arbitrary_redeliveries(
    spark: SparkSession, tmp_path_factory: object, batches: list[list[Rec]]
) -> None:
    # A (partition, offset) is one record: re-deliveries carry the same id and time.
    first: dict[tuple[int, int], Rec] = {}
    batches = [[first.setdefault((r.partition, r.offset), r) for r in batch] for batch in batches]
    root = tmp_path_factory.mktemp("redelivery")  # type: ignore[attr-defined]
    dedup = Deduplicator.create(spark, str(root / "index"), by="id", interval=INTERVAL)
    for batch_id, batch in enumerate(batches):
        dedup.run(frame(spark, batch, ("id",)), batch_id, str(root / "sink"))
    assert labels(spark.read.format("delta").load(str(root / "sink"))) == _sink_model(batches)
