"""The demo's data: currency-rate updates (some out of order, some deleted) and a transactions stream with
at-least-once re-sends over the same time span, generated with Spark expressions from ``spark.range``
(seeded: every run sees the same data; nothing is built row by row on the driver).

``lakehouse demo`` lands them in two parts (:func:`landing_parts`), ``lakehouse kafka produce-demo`` sends
them to Kafka topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.errors import InvalidInputError
from lakehouse.schemas import load_schema
from lakehouse.times import micros

T0 = datetime(2024, 1, 1, tzinfo=UTC)
CURRENCIES = ("EUR", "GBP", "JPY", "CHF")
RATE_PARTITIONS = 2
TXN_PARTITIONS = 3
#: The share of rate updates that arrive after their event time (up to ``DemoSize.disorder``).
OUT_OF_ORDER_FRACTION = 0.15
DELETE_FRACTION = 0.05
SEED = 889
#: The share of the generated time span that lands for the demo's first run; the rest lands for its second.
FIRST_RUN_FRACTION = 0.9
_BASE_RATES = {"EUR": 1.08, "GBP": 1.27, "JPY": 0.0067, "CHF": 1.13}


@dataclass(frozen=True)
class DemoSize:
    """How much data the demo generates, over which time span, and how it arrives.

    Both streams cover ``[T0, T0 + span]`` at every size: a larger demo is a busier market, not a longer
    one, so the shares of priced transactions, late records and duplicates do not depend on the counts.
    Per Kafka partition, event times increase with offsets except for ``disorder``: a record's event time
    is at most ``disorder`` before that of any record at a lower offset of its partition (each record
    arrives at most ``disorder`` after its event time, and arrivals increase with offsets). Event times
    are whole milliseconds, as Kafka's timestamps are.

    Attributes:
        rate_updates: Currency-rate updates (every currency once per round).
        transactions: Distinct transactions, before re-sends.
        span: The generated time span.
        disorder: The largest delay between a record's event time and its arrival (``< span``).
        resend_share: The share of transactions an at-least-once producer sends twice; the re-send
            repeats the record (same id, time and partition) at most ``disorder`` after its event time.

    Raises:
        InvalidInputError: a negative count, a share outside ``[0, 1]``, a negative ``disorder`` or one
            not below a positive ``span``.
    """

    rate_updates: int = 40
    transactions: int = 200
    span: timedelta = timedelta(minutes=40)
    disorder: timedelta = timedelta(minutes=2)
    resend_share: float = 0.10

    def __post_init__(self) -> None:
        if min(self.rate_updates, self.transactions) < 0:
            raise InvalidInputError(f"the demo's counts must be >= 0, got {self}")
        if not 0 <= self.resend_share <= 1:
            raise InvalidInputError(f"resend_share must be in [0, 1], got {self.resend_share}")
        if not timedelta(0) <= self.disorder < self.span:
            raise InvalidInputError(
                f"disorder must be >= 0 and below span, got disorder {self.disorder}, span {self.span}"
            )


def rate_updates(spark: SparkSession, size: DemoSize) -> DataFrame:
    """Rate updates in rounds: every currency once per round, the rounds evenly spread from ``T0`` to
    ``T0 + span`` (both included). ``OUT_OF_ORDER_FRACTION`` of them arrive late, their event time up to
    ``disorder`` before their round (they may land in history, splitting an interval); ``DELETE_FRACTION``
    are deletes. A currency stays in one partition; offsets follow arrival (round, then currency)."""
    rows = spark.range(size.rate_updates)
    currencies = len(CURRENCIES)
    currency = F.element_at(
        F.array(*[F.lit(c) for c in CURRENCIES]), (F.col("id") % currencies + 1).cast("int")
    )
    rounds = -(-size.rate_updates // currencies)
    step_us = micros(size.span) / max(rounds - 1, 1)
    arrival_us = _millis(F.lit(micros(T0)) + F.floor(F.col("id") / currencies) * step_us)
    late = F.rand(SEED) < OUT_OF_ORDER_FRACTION
    delay_us = F.when(late, _millis(F.rand(SEED + 3) * micros(size.disorder))).otherwise(0)
    deleted = F.rand(SEED + 1) < DELETE_FRACTION
    base_rate = F.element_at(F.create_map(*[F.lit(x) for kv in _BASE_RATES.items() for x in kv]), currency)
    rate = (base_rate * (1 + (F.rand(SEED + 2) - 0.5) / 50)).cast("decimal(18,6)")
    generated = rows.select(
        currency.alias("currency"),
        F.when(deleted, F.lit(None)).otherwise(rate).alias("rate"),
        deleted.alias("deleted"),
        F.timestamp_micros(arrival_us - delay_us).alias("event_time"),
        (F.col("id") % RATE_PARTITIONS).cast("int").alias("partition"),
        F.floor(F.col("id") / RATE_PARTITIONS).alias("offset"),
    )
    return conform(generated, "demo_rate_updates")


def transactions(spark: SparkSession, size: DemoSize) -> DataFrame:
    """Transactions in the shape of Spark's Kafka source, arriving evenly from ``T0 + disorder`` to
    ``T0 + span``, each up to ``disorder`` after its event time (so event times lie in ``[T0, T0 + span)``);
    ``resend_share`` of them are sent again by an at-least-once producer, the same record a little later
    (at most ``disorder`` after its event time). Offsets follow arrival in every partition: records arrive
    in slots, an original's offset is its slot times ``K`` and a re-send's is ``K`` times the slot it
    arrives in plus one plus its lag in slots (``K`` = the largest lag + 2, so offsets are unique; Kafka
    offsets may have gaps).
    """
    disorder_us = micros(size.disorder)
    slot_us = max((micros(size.span) - disorder_us) // max(size.transactions, 1), 1)
    delay_us = _millis(F.rand(SEED + 5) * disorder_us)
    arrival_us = F.lit(micros(T0) + disorder_us) + F.col("id") * slot_us
    originals = (
        spark.range(size.transactions)
        .select(
            F.concat(F.lit("t"), F.col("id")).alias("txn_id"),
            F.element_at(
                F.array(*[F.lit(c) for c in CURRENCIES]),
                (F.floor(F.rand(SEED + 3) * len(CURRENCIES)) + 1).cast("int"),
            ).alias("currency"),
            (F.rand(SEED + 4) * 1000).cast("decimal(18,2)").alias("amount"),
            "id",
            delay_us.alias("delay_us"),
        )
        .withColumn("timestamp", F.timestamp_micros(_millis(arrival_us) - F.col("delay_us")))
    )
    # A re-send arrives in a later slot, no later than `disorder` after the record's event time.
    # (Less 1 ms: the original's event time is its arrival rounded down to the millisecond.)
    lag_slots = F.floor(
        F.rand(SEED + 7) * F.greatest(disorder_us - 1000 - F.col("delay_us"), F.lit(0)) / slot_us
    )
    per_slot = disorder_us // slot_us + 2
    resent = originals.where(F.rand(SEED + 6) < size.resend_share).withColumn(
        "offset", (F.col("id") + lag_slots) * per_slot + 1 + lag_slots
    )
    records = originals.withColumn("offset", F.col("id") * per_slot).unionByName(resent)
    return as_kafka_records(records)


def as_kafka_records(records: DataFrame) -> DataFrame:
    """Transactions (``txn_id``, ``currency``, ``amount``, ``timestamp``, ``offset``) as the demo's
    Kafka-shaped records (schema ``demo_transactions``): key ``txn_id``, a JSON value, the partition a hash
    of the key."""
    partition = (F.abs(F.hash("txn_id")) % TXN_PARTITIONS).cast("int")
    generated = records.select(
        F.col("txn_id").alias("key"),
        F.to_json(F.struct("txn_id", "currency", "amount")).alias("value"),
        F.lit("transactions").alias("topic"),
        partition.alias("partition"),
        "offset",
        "timestamp",
        "txn_id",
        "currency",
        "amount",
    )
    return conform(generated, "demo_transactions")


def _millis(us: Column) -> Column:
    """Microseconds rounded down to whole milliseconds: event times are Kafka timestamps (milliseconds)."""
    return (F.floor(us / 1000) * 1000).cast("long")


def conform(df: DataFrame, schema_name: str) -> DataFrame:
    """``df``'s columns of the schema ``schema_name`` (:mod:`lakehouse.schemas`), in its order and types."""
    schema = load_schema(schema_name)
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def landing_parts(df: DataFrame, time_column: str, size: DemoSize) -> tuple[DataFrame, DataFrame]:
    """``df`` (generated at ``size``) split by ``time_column``: the first ``FIRST_RUN_FRACTION`` of the
    generated time span, then the rest (a re-sent transaction keeps its original's time: same part)."""
    first = F.col(time_column) < F.lit(T0 + size.span * FIRST_RUN_FRACTION)
    return df.where(first), df.where(~first)
