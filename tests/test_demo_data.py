"""The demo's generator is realistic at every size: the shares a person reads in the demo's summary
(duplicates, late records, lookups outside retention, priced transactions) are those configured, at 200
transactions as at 20 000, and per Kafka partition event times follow offsets within the disorder bound."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehouse.demo import demo_spec
from lakehouse.demo_data import DELETE_FRACTION, T0, DemoSize, rate_updates, transactions
from lakehouse.errors import InvalidInputError
from lakehouse.times import micros

SMALL = DemoSize()
LARGE = DemoSize(rate_updates=4_000, transactions=20_000)
#: How far (absolute) a share may be from the configured one, and from the same share at the other size.
TOLERANCE = 0.04


def _us(column: str) -> F.Column:
    return F.unix_micros(F.col(column))


def _largest_disorder_us(df: DataFrame, time_column: str) -> int:
    """The most a record's event time lies before that of a record at a lower offset of its partition."""
    before = Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    lag = F.max(_us(time_column)).over(before) - _us(time_column)
    return int(df.select(lag.alias("lag")).agg(F.max("lag").alias("lag")).first()["lag"] or 0)


def _late_share(df: DataFrame, time_column: str, bound: timedelta) -> float:
    """The share of records older than the largest event time arrived before them, minus ``bound``
    (offsets order arrivals across partitions too: rate updates by offset then partition, transactions
    by their offsets, which follow their arrival slots)."""
    before = Window.orderBy("offset", "partition").rowsBetween(Window.unboundedPreceding, -1)
    late = _us(time_column) < F.max(_us(time_column)).over(before) - micros(bound)
    return float(
        df.select(late.cast("double").alias("late")).agg(F.avg("late").alias("share")).first()["share"]
    )


def _priced_share(txns: DataFrame, rates: DataFrame) -> float:
    """The share of transactions whose currency's latest rate update at their time (inclusive) is a
    rate, not a delete: what the as-of join prices."""
    events = rates.select(
        "currency", F.col("event_time").alias("t"), "deleted", F.lit(0).alias("txn")
    ).unionByName(
        txns.select(
            "currency",
            F.col("timestamp").alias("t"),
            F.lit(None).cast("boolean").alias("deleted"),
            F.lit(1).alias("txn"),
        )
    )
    upto = Window.partitionBy("currency").orderBy("t", "txn").rowsBetween(Window.unboundedPreceding, 0)
    priced = events.select(
        "txn", (F.last("deleted", ignorenulls=True).over(upto) == F.lit(False)).alias("priced")
    )
    row = (
        priced.where("txn = 1")
        .select(F.avg(F.coalesce("priced", F.lit(False)).cast("double")).alias("share"))
        .first()
    )
    return float(row["share"])


def _shares(spark: SparkSession, size: DemoSize) -> dict[str, float]:
    spec = demo_spec("warehouse")
    txns, rates = transactions(spark, size), rate_updates(spark, size)
    counts = txns.agg(F.count("*").alias("records"), F.countDistinct("txn_id").alias("ids")).first()
    assert counts["ids"] == size.transactions
    disorder_us = micros(size.disorder)
    for frame, time_column in ((txns, "timestamp"), (rates, "event_time")):
        assert 0 < _largest_disorder_us(frame, time_column) <= disorder_us
        bounds = frame.agg(
            F.min(_us(time_column)).alias("first"), F.max(_us(time_column)).alias("last")
        ).first()
        assert micros(T0 - size.disorder) <= bounds["first"] and bounds["last"] <= micros(T0 + size.span)
    max_rate_time = rates.agg(F.max(_us("event_time")).alias("t")).first()["t"]
    retention_us = micros(spec.history_retention)
    return {
        "re-sent": (counts["records"] - counts["ids"]) / counts["ids"],
        "late transactions": _late_share(txns, "timestamp", spec.dedup_interval),
        "late rate updates": _late_share(rates, "event_time", spec.history_retention),
        "lookups outside retention": float(
            txns.select(F.avg((_us("timestamp") < max_rate_time - retention_us).cast("double"))).first()[0]
        ),
        "priced": _priced_share(txns, rates),
    }


def test_the_shares_are_the_configured_ones_at_200_and_at_20000_transactions(spark: SparkSession) -> None:
    small, large = _shares(spark, SMALL), _shares(spark, LARGE)
    configured = {
        "re-sent": SMALL.resend_share,
        # Disorder (2 min) is far below the dedup interval (1 day) and the history retention (1 h), and
        # the span (40 min) below the retention: nothing is late, no lookup is outside retention.
        "late transactions": 0.0,
        "late rate updates": 0.0,
        "lookups outside retention": 0.0,
        # Every currency has a rate from T0 on; a transaction is unpriced while its rate is deleted.
        "priced": 1 - DELETE_FRACTION,
    }
    for name, expected in configured.items():
        assert abs(small[name] - expected) <= TOLERANCE, (name, small[name])
        assert abs(large[name] - expected) <= TOLERANCE, (name, large[name])
        assert abs(small[name] - large[name]) <= TOLERANCE, (name, small[name], large[name])


@pytest.mark.parametrize(
    "size",
    [
        {"transactions": -1},
        {"resend_share": 1.5},
        {"disorder": timedelta(minutes=-1)},
        {"disorder": timedelta(hours=1), "span": timedelta(minutes=30)},
    ],
)
def test_an_impossible_demo_size_is_refused_in_one_line(size: dict) -> None:
    with pytest.raises(InvalidInputError) as raised:
        DemoSize(**size)
    assert "\n" not in str(raised.value)
