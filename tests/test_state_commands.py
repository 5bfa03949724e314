"""``lakehouse tables``, ``sql`` and ``store``, and ``register`` alike for every kind of state table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse.cli import main
from lakehouse.dedup import Deduplicator
from lakehouse.versioned import VersionedStore

T0 = datetime(2024, 1, 1, tzinfo=UTC)
RATES = T.StructType([T.StructField("currency", T.StringType()), T.StructField("rate", T.DoubleType())])


@pytest.fixture(scope="module")
def warehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse with a rate store (retention 10 min, stream time T0 + 30 min) and a dedup index."""
    root = tmp_path_factory.mktemp("state_wh")
    store = VersionedStore.create(spark, str(root / "rates"), "currency", RATES, timedelta(minutes=10))
    minutes = [("EUR", 1.10, 0), ("EUR", 1.12, 15), ("GBP", 1.27, 5), ("EUR", 1.15, 30)]
    updates = spark.createDataFrame(
        [(c, r, T0 + timedelta(minutes=m), 0, i) for i, (c, r, m) in enumerate(minutes)],
        "currency string, rate double, timestamp timestamp, partition int, offset long",
    )
    store.put_all(updates, batch_id=0)
    dedup = Deduplicator.create(
        spark,
        str(root / "txn" / "index"),
        "id",
        timedelta(minutes=1),
        quarantine_path=str(root / "txn" / "q"),
    )
    records = spark.createDataFrame(
        [("a", 0, 0, T0), ("a", 0, 1, T0 + timedelta(seconds=5))],
        "id string, partition int, offset long, timestamp timestamp",
    )
    dedup.run(records, 0, str(root / "txn" / "clean"))
    return root


def test_register_gives_every_state_table_its_name_and_stores_an_as_of_function(
    spark: SparkSession, warehouse: Path
) -> None:
    VersionedStore.open(spark, str(warehouse / "rates")).register("reg_rates", temporary=False)
    Deduplicator.open(spark, str(warehouse / "txn" / "index")).register("reg_txn", temporary=False)
    # The store is a catalog view of its versions (pending ones resolved at each query).
    assert spark.catalog.getTable("reg_rates").tableType == "VIEW"
    for name, path in [("reg_txn", "txn/index"), ("reg_txn_quarantine", "txn/q")]:
        assert spark.catalog.getTable(name).tableType == "EXTERNAL"
        location = spark.sql(f"DESCRIBE DETAIL {name}").first()["location"]
        assert location.rstrip("/").endswith(str(warehouse / path))
    assert spark.sql("SELECT count(*) FROM reg_rates_as_of(TIMESTAMP '2024-01-01 00:25:00')").first()[0] == 2


def test_as_of_function_matches_as_of_inside_and_outside_retention(
    spark: SparkSession, warehouse: Path
) -> None:
    store = VersionedStore.open(spark, str(warehouse / "rates"))
    store.register("fn_rates")
    for minute in (25, 10):  # inside retention (horizon: T0 + 20 min), and expired
        t = T0 + timedelta(minutes=minute)
        expected = sorted((r["currency"], r["rate"]) for r in store.as_of(t).collect())
        literal = t.strftime("%Y-%m-%d %H:%M:%S")
        rows = spark.sql(f"SELECT currency, rate FROM fn_rates_as_of(TIMESTAMP '{literal}')").collect()
        assert sorted((r["currency"], r["rate"]) for r in rows) == expected
    at_25 = spark.sql(
        "SELECT rate FROM fn_rates_as_of(TIMESTAMP '2024-01-01 00:25:00') WHERE currency = 'EUR'"
    )
    assert [r["rate"] for r in at_25.collect()] == [1.12]


def test_tables_sql_and_store_commands(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--set", f"warehouse={warehouse}"]
    assert main([*where, "tables"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines()[2:-1]}
    # 4 rows, all pending: EUR@0 ended at 00:15, before the batch's horizon (00:20), yet it stays pending
    # (it bounds the version before it) until a seal drops it.
    assert lines["rates"][1:4] == ["versioned_store", "1", "4"]
    assert lines["txn_index"][1] == "dedup_index"
    assert lines["txn_q"][1] == "dedup_quarantine" and lines["txn_q"][3] == "1"
    assert lines["txn_clean"][1] == "delta"

    query = "SELECT currency, rate FROM rates_as_of(TIMESTAMP '2024-01-01 00:25:00') ORDER BY currency"
    assert main([*where, "sql", query]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split() for line in out[2:]] == [["EUR", "1.12"], ["GBP", "1.27"], ["(2", "rows)"]]

    assert main([*where, "store", "get", "rates", "EUR", "--as-of", "2024-01-01T00:25:00"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[0] == "1.12"
    assert main([*where, "store", "history", "rates", "EUR"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "(3 rows)"  # EUR@0, expired, until a seal


def test_bad_query_is_one_line_error(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", f"warehouse={warehouse}", "sql", "SELECT * FROM no_such_table"]) == 2
    intro, *errors = capsys.readouterr().err.splitlines()  # the first line says what the command does
    assert intro.startswith("lakehouse sql: reading the tables")
    assert len(errors) == 1 and "no_such_table" in errors[0]
