"""docs/versioned-stores.md's "SQL over state" statements, executed verbatim against a registered store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse.times import micros
from lakehouse.versioned import VersionedStore
from lakehouse.versioned.segments import segment_of

README = Path(__file__).resolve().parents[2] / "docs" / "versioned-stores.md"
T0 = datetime(2024, 1, 1, tzinfo=UTC)  # the page's statements ask about T0 + 10 min
RATES = T.StructType([T.StructField("currency", T.StringType()), T.StructField("rate", T.DoubleType())])


def readme_statements() -> list[str]:
    """The statements of the first ```sql block after the page's "SQL over state" paragraph."""
    text = README.read_text()
    block = text[text.index("**SQL over state.**") :]
    block = block[block.index("```sql") + len("```sql") : block.index("```\n", block.index("```sql") + 6)]
    code = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in code.split(";") if s.strip()]


def test_readme_sql_answers_each_question_in_one_statement(spark: SparkSession, tmp_path: Path) -> None:
    store = VersionedStore.create(spark, str(tmp_path / "rates"), "currency", RATES, timedelta(hours=1))
    minutes = [("EUR", 1.10, 0), ("EUR", 1.12, 15), ("GBP", 1.27, 5), ("GBP", None, 20)]
    updates = spark.createDataFrame(
        [(c, r, T0 + timedelta(minutes=m), 0, i) for i, (c, r, m) in enumerate(minutes)],
        "currency string, rate double, event_time timestamp, partition int, offset long",
    )
    store.put_all(updates, batch_id=1, timestamp="event_time")
    store.register("rates")

    now, as_of, every_key, history, per_segment = [spark.sql(s).collect() for s in readme_statements()]

    assert [r["rate"] for r in now] == [1.12]
    assert [r["rate"] for r in as_of] == [1.10]
    assert sorted((r["currency"], r["rate"]) for r in every_key) == [("EUR", 1.10), ("GBP", 1.27)]
    assert [(r["rate"], r["valid_from"], r["valid_to"]) for r in history] == [
        (1.10, T0.replace(tzinfo=None), (T0 + timedelta(minutes=15)).replace(tzinfo=None)),
        (1.12, (T0 + timedelta(minutes=15)).replace(tzinfo=None), None),
    ]
    interval = store.settings.interval_us
    closed = [segment_of(micros(T0 + timedelta(minutes=m)), interval) for m in (15, 20)]
    assert {r["segment"]: r["versions"] for r in per_segment} == {closed[0]: 1, closed[1]: 1, None: 2}
