"""Small domain helpers for the dedup tests: records as inline tuples, frames, Spark vs the model."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from pyspark.sql import DataFrame, SparkSession

from lakehouse.dedup import Deduplicator
from tests.reference.dedup import Decision, DedupModel, Rec

T0 = datetime(2024, 1, 1, tzinfo=UTC)
RECORD_SCHEMA = "key string, id string, value string, partition int, offset long, timestamp timestamp"
DEFAULTS = {"key": "k", "id": "i"}


def at(seconds: float) -> datetime:
    """The time ``seconds`` after ``T0``."""
    return T0 + timedelta(seconds=seconds)


def frame(spark: SparkSession, records: Sequence[Rec], by: Sequence[str]) -> DataFrame:
    """Records as a Kafka-shaped frame; the ``by`` columns carry ``rec.id``, ``value`` the label."""
    rows = []
    for rec in records:
        cols = {**DEFAULTS, **dict(zip(by, rec.id, strict=True))}
        rows.append((cols["key"], cols["id"], rec.label, rec.partition, rec.offset, at(rec.ts)))
    return spark.createDataFrame(rows, RECORD_SCHEMA)


def labels(df: DataFrame) -> list[str]:
    """Sorted labels (``value``) of a frame's records."""
    return sorted(r["value"] for r in df.select("value").collect())


def model_forwarded(model: DedupModel, records: Sequence[Rec]) -> list[str]:
    """Sorted labels the model forwards for one batch."""
    return sorted(rec.label for rec, d in model.process_batch(records) if d.forwarded)


def spark_forwarded(
    dedup: Deduplicator, spark: SparkSession, records: Sequence[Rec], batch_id: int
) -> list[str]:
    """Sorted labels ``apply`` forwards for one batch."""
    return labels(dedup.apply(frame(spark, records, dedup.settings.by), batch_id))


def labelled(records: Sequence[tuple[object, ...]]) -> list[Rec]:
    """``Rec(id, ts, partition, offset)`` tuples, labelled ``r0, r1, ...`` in the given order."""
    out = []
    for i, fields in enumerate(records):
        ident, ts, *rest = fields
        partition = rest[0] if rest else 0
        offset = rest[1] if len(rest) > 1 else i
        out.append(Rec(ident if isinstance(ident, tuple) else (ident,), ts, partition, offset, f"r{i}"))
    return out


FORWARDED = Decision.FORWARDED
