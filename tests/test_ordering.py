from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from lakehouse.errors import SchemaMismatchError
from lakehouse.ordering import ORDER_COL, with_processing_order
from tests.reference.ordering import Record, processing_order


def _records(draw: st.DrawFn) -> list[Record]:
    sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
    return [
        Record(partition, offset, draw(st.integers(0, 20)))
        for partition, size in enumerate(sizes)
        for offset in range(size)
    ]


records_strategy = st.composite(_records)()


def _spark_order(spark: SparkSession, records: list[Record]) -> list[Record]:
    df = spark.createDataFrame(
        [(r.partition, r.offset, r.ts) for r in records], "partition int, offset long, ts long"
    )
    ordered = with_processing_order(df, "ts").orderBy(ORDER_COL).collect()
    return [Record(r["partition"], r["offset"], r["ts"]) for r in ordered]


def test_partition_with_smaller_time_goes_first_ties_to_lower_partition(spark: SparkSession) -> None:
    records = [Record(0, 0, 5), Record(0, 1, 1), Record(1, 0, 3), Record(1, 1, 5), Record(2, 0, 5)]
    expected = [Record(1, 0, 3), Record(0, 0, 5), Record(0, 1, 1), Record(1, 1, 5), Record(2, 0, 5)]
    assert processing_order(records) == expected
    assert _spark_order(spark, records) == expected


@settings(max_examples=500, deadline=None)
@given(records_strategy)
def test_reference_order_keeps_offset_order_within_each_partition(records: list[Record]) -> None:
    ordered = processing_order(records)
    assert sorted(ordered, key=lambda r: (r.partition, r.offset)) == sorted(
        records, key=lambda r: (r.partition, r.offset)
    )
    for partition in {r.partition for r in records}:
        offsets = [r.offset for r in ordered if r.partition == partition]
        assert offsets == sorted(offsets)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy)
def test_spark_order_matches_reference(spark: SparkSession, records: list[Record]) -> None:
    assert _spark_order(spark, records) == processing_order(records)


def test_sequence_by_replaces_partition_order(spark: SparkSession) -> None:
    df = spark.createDataFrame([(2, "b"), (1, "a")], "seq int, v string")
    assert [
        r["v"] for r in with_processing_order(df, "seq", sequence_by="seq").orderBy(ORDER_COL).collect()
    ] == ["a", "b"]


def test_records_without_partition_offset_or_sequence_are_rejected(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,)], "ts int")
    with pytest.raises(SchemaMismatchError, match="sequence_by"):
        with_processing_order(df, "ts")


def test_partition_and_offset_of_a_non_integer_type_are_rejected(spark: SparkSession) -> None:
    df = spark.createDataFrame([(0, "9", 1)], "partition int, offset string, ts int")
    with pytest.raises(SchemaMismatchError, match=r"offset: string \(expected an integer type\)"):
        with_processing_order(df, "ts")
