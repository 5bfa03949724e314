"""``lakehouse doctor``: check that Spark, Delta and Java work together on this machine."""

from __future__ import annotations

import importlib.metadata
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyspark
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import __version__
from lakehouse.delta_ops import ensure_table
from lakehouse.errors import LakehouseInternalError
from lakehouse.schemas import load_schema


def versions(spark: SparkSession | None = None) -> dict[str, str]:
    """Versions of lakehouse, Python, PySpark and delta-spark; given a session, its Java, Spark and conf."""
    found = {
        "lakehouse": __version__,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "delta-spark": importlib.metadata.version("delta-spark"),
    }
    if spark is not None:
        row = spark.sql(
            "SELECT java_method('java.lang.System', 'getProperty', 'java.version') AS java"
        ).first()
        found["java"] = row["java"] if row is not None else "unknown"
        found["spark (JVM)"] = spark.version
        found["master"] = spark.sparkContext.master
        found["shuffle partitions"] = spark.conf.get("spark.sql.shuffle.partitions") or "unset"
    return found


def probe_delta(spark: SparkSession, root: Path) -> list[str]:
    """Create, MERGE, time-travel and vacuum a scratch Delta table under ``root``; return what was checked.

    Raises:
        LakehouseInternalError: a read did not return what was written.
    """
    path = str(root / "doctor_probe")
    schema = load_schema("doctor_probe")
    table = ensure_table(spark, path, schema, properties={"delta.enableChangeDataFeed": "true"})
    spark.createDataFrame([(1, "a"), (2, "b")], schema).write.format("delta").mode("append").save(path)
    updates = spark.createDataFrame([(2, "B"), (3, "c")], schema)
    (
        table.alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    now = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    before = sorted(
        tuple(r) for r in spark.read.format("delta").option("versionAsOf", 1).load(path).collect()
    )
    changes = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2).load(path)
    )
    change_types = sorted(r[0] for r in changes.select("_change_type").collect())
    DeltaTable.forPath(spark, path).vacuum()
    _expect("MERGE", now, [(1, "a"), (2, "B"), (3, "c")])
    _expect("VERSION AS OF 1", before, [(1, "a"), (2, "b")])
    _expect("change data feed", change_types, ["insert", "update_postimage", "update_preimage"])
    n_versions = DeltaTable.forPath(spark, path).history().where(F.col("operation") == "MERGE").count()
    return [
        f"created a Delta table at {path}",
        f"MERGE upserted 2 rows ({n_versions} MERGE commit)",
        "VERSION AS OF 1 read the rows before the MERGE",
        f"change data feed of the MERGE: {', '.join(change_types)}",
        "VACUUM ran",
    ]


def _expect(what: str, actual: object, expected: object) -> None:
    if actual != expected:
        raise LakehouseInternalError(f"doctor: {what} returned {actual}, expected {expected}")


def run_doctor(spark: SparkSession, echo: Callable[[str], None] = print) -> None:
    """Print versions, run the Delta probe in a temporary folder, and print OK."""
    for name, version in versions(spark).items():
        echo(f"{name:>18}: {version}")
    with tempfile.TemporaryDirectory(prefix="lakehouse-doctor-") as tmp:
        for line in probe_delta(spark, Path(tmp)):
            echo(f"  ok  {line}")
    echo("OK: Spark, Delta Lake and Java work together")
