"""``lakehouse tables``, ``sql`` and ``store`` read a local warehouse without a JVM, equal to Spark, and
fall back to Spark (saying why in one line) where delta-rs cannot read right."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

import lakehouse.read
from lakehouse.assignment import AssignmentConfig, AssignmentStore, ClientState
from lakehouse.assignment.job import run_assignment
from lakehouse.cli import main
from lakehouse.dedup import Deduplicator
from lakehouse.errors import EngineUnsupportedError
from lakehouse.state_commands import _sql_local
from lakehouse.tables import register_all
from lakehouse.versioned import VersionedStore

T0 = datetime(2024, 1, 1, tzinfo=UTC)
RATES = T.StructType([T.StructField("currency", T.StringType()), T.StructField("rate", T.DoubleType())])
UPDATES = "currency string, rate double, timestamp timestamp, partition int, offset long"


def _updates(spark: SparkSession, rows: list[tuple[str, float | None, int]], first_offset: int = 0):
    return spark.createDataFrame(
        [(c, r, T0 + timedelta(minutes=m), 0, first_offset + i) for i, (c, r, m) in enumerate(rows)], UPDATES
    )


@pytest.fixture(scope="module")
def warehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rate store with sealed and pending versions (EUR has a late pending version inside its sealed
    history), a dedup index with its quarantine and sink, and two assignment generations."""
    root = tmp_path_factory.mktemp("read_wh")
    store = VersionedStore.create(spark, str(root / "rates"), "currency", RATES, timedelta(minutes=30))
    store.put_all(_updates(spark, [("EUR", 1.10, 0), ("EUR", 1.12, 10), ("GBP", 1.27, 5)]), batch_id=0)
    store.seal()
    store.put_all(_updates(spark, [("EUR", 1.11, 5), ("GBP", None, 20), ("EUR", 1.15, 30)], 3), batch_id=1)
    dedup = Deduplicator.create(
        spark,
        str(root / "txn" / "index"),
        "txn_id",
        timedelta(minutes=1),
        quarantine_path=str(root / "txn" / "q"),
    )
    records = spark.createDataFrame(
        [("t1", 0, 0, T0), ("t1", 0, 1, T0 + timedelta(seconds=5)), ("t2", 0, 2, T0 + timedelta(seconds=6))],
        "txn_id string, partition int, offset long, timestamp timestamp",
    )
    dedup.run(records, 0, str(root / "txn" / "clean"))
    assignments = AssignmentStore.create(
        spark, str(root / "assign"), AssignmentConfig(num_standby_replicas=1)
    )
    clients = {c: ClientState(c) for c in ("c0", "c1")}
    for generation, minute in ((1, 0), (2, 10)):
        tasks = [f"0_{i}" for i in range(3 + generation)]
        assignments.write_subscriptions(generation, clients, tasks, at=T0 + timedelta(minutes=minute))
        run_assignment(spark, str(root / "assign"), at=T0 + timedelta(minutes=minute))
    return root


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``lakehouse`` command in a fresh process that cannot start a JVM (no Java there)."""
    env = {**os.environ, "JAVA_HOME": "/nonexistent-java", "PATH": str(Path(sys.executable).parent)}
    command = [str(Path(sys.executable).parent / "lakehouse"), *args, "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def _intro(command: str, root: Path) -> str:
    """The first line the CLI prints on stderr for a read under ``--root``."""
    doing = "reading a versioned store" if command == "store" else "reading the tables"
    return f"lakehouse {command}: {doing} (root {root}, profile local)"


def test_cli_reads_need_no_jvm(warehouse: Path) -> None:
    tables = _cli(warehouse, "tables")
    assert tables.returncode == 0, tables.stderr
    rows = {line.split()[0]: line.split() for line in tables.stdout.splitlines()[2:-1]}
    assert rows["rates"][1:4] == ["versioned_store", "3", "6"]  # 6 physical rows, 3 of them pending
    assert rows["rates"][4:] == ["2024-01-01", "00:30:00+00:00"]
    assert rows["txn_index"][1] == "dedup_index" and rows["txn_q"][3] == "1"
    assert rows["assign_assignment"][4:] == ["generation", "2"]

    got = _cli(
        warehouse, "store", "get", "rates", "EUR", "--as-of", "2024-01-01T00:07:00", "--format", "json"
    )
    # stderr: the command's first line only (what it does, where)
    assert got.returncode == 0 and got.stderr.splitlines() == [_intro("store", warehouse)], got.stderr
    assert json.loads(got.stdout) == {  # the late pending version at 00:05 cuts the sealed one at 00:00
        "rate": 1.11,
        "valid_from": "2024-01-01T00:05:00+00:00",
        "valid_to": "2024-01-01T00:10:00+00:00",
    }
    history = _cli(warehouse, "store", "history", "rates", "GBP", "--format", "csv")
    assert history.stdout.splitlines() == [
        "currency,valid_from,valid_to,rate",
        "GBP,2024-01-01 00:05:00+00:00,2024-01-01 00:20:00+00:00,1.27",
        "GBP,2024-01-01 00:20:00+00:00,,",
    ]
    query = "SELECT currency, count(*) AS n FROM rates GROUP BY currency ORDER BY currency"
    assert _cli(warehouse, "sql", query, "--format", "csv").stdout.splitlines() == [
        "currency,n",
        "EUR,4",
        "GBP,2",
    ]


def test_unknown_table_is_one_line_naming_the_warehouse(warehouse: Path) -> None:
    for args in (("store", "get", "ratez", "EUR"), ("sql", "SELECT * FROM ratez")):
        done = _cli(warehouse, *args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.splitlines() == [
            _intro(args[0], warehouse),
            f"lakehouse: error: no table 'ratez' in the warehouse {warehouse}; tables there: "
            "assign_assignment, assign_subscriptions, rates, txn_clean, txn_index, txn_q",
        ]
    empty = _cli(warehouse / "nothing", "tables")
    assert empty.stdout.strip().startswith(f"no Delta tables under {warehouse / 'nothing'}")


DOCUMENTED = [  # docs/reading.md and README's statements over the dedup index and the assignment tables
    "SELECT * FROM txn_index WHERE txn_id = 't1' ORDER BY entry_ts DESC LIMIT 1",
    # `offset` quoted: a keyword to DataFusion's parser (unquoted, the statement goes to Spark)
    "SELECT batch_id, txn_id, ts, partition, `offset`, entry_ts, entry_partition, entry_offset "
    "FROM txn_q ORDER BY batch_id, ts",
    "SELECT generation, client FROM assign_assignment WHERE task = '0_3' AND role = 'active' "
    "AND generation = (SELECT max(generation) FROM assign_assignment)",
    "SELECT generation, client FROM assign_assignment WHERE task = '0_1' AND role = 'active' "
    "AND generation = (SELECT max(generation) FROM assign_assignment "
    "WHERE time <= TIMESTAMP '2024-01-01 00:05:00+00:00')",
    "SELECT currency, rate, valid_from, valid_to FROM rates WHERE currency = 'EUR' ORDER BY valid_from",
]


@pytest.mark.parametrize("query", DOCUMENTED)
def test_documented_sql_is_the_same_in_datafusion_and_spark(
    spark: SparkSession, warehouse: Path, query: str
) -> None:
    register_all(spark, str(warehouse))
    expected = [tuple(_instant(v) for v in row) for row in spark.sql(query).collect()]
    columns, rows = _sql_local(query, str(warehouse), 100)
    assert columns == spark.sql(query).columns
    assert [tuple(_instant(v) for v in row) for row in rows] == expected
    assert expected  # every statement finds something here


def _instant(value):
    return value.timestamp() if isinstance(value, datetime) else value


def test_a_table_delta_rs_cannot_read_falls_back_to_spark(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "mapped")
    store = VersionedStore.create(spark, path, "currency", RATES, timedelta(minutes=30))
    store.put_all(_updates(spark, [("EUR", 1.10, 0), ("EUR", 1.12, 10)]), batch_id=0)
    # Column mapping: a reader feature the JVM-free path refuses (never a wrong answer).
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    with pytest.raises(EngineUnsupportedError, match="columnMapping"):
        lakehouse.read.store(path)
    assert main(["store", "get", path, "EUR", "--as-of", "2024-01-01T00:05:00", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    reason = f"delta-rs cannot read {path}: it uses the reader feature(s) columnMapping"
    assert err.splitlines()[1:] == [f"lakehouse: reading with Spark: {reason}"]
    assert out.splitlines()[1:] == ["1.1,2024-01-01 00:00:00+00:00,2024-01-01 00:10:00+00:00"]


def test_a_statement_datafusion_cannot_parse_goes_to_spark(warehouse: Path) -> None:
    with pytest.raises(EngineUnsupportedError, match="DataFusion cannot run it"):
        _sql_local("SELECT txn_id, offset FROM txn_q", str(warehouse), 10)
