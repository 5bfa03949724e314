"""``lakehouse doctor``: check that Spark, Delta and Java work together on this machine, and
``lakehouse doctor TABLE``: a table's health (its log and its data files)."""

from __future__ import annotations

import importlib.metadata
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import __version__
from lakehouse.catalog import hadoop_fs, hadoop_path, path_exists
from lakehouse.commit_log import latest_snapshot
from lakehouse.delta_ops import ensure_table
from lakehouse.errors import DamagedTableError, LakehouseInternalError
from lakehouse.jvm import list_items
from lakehouse.paths import resolve_path
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


@dataclass(frozen=True)
class TableHealth:
    """What :func:`table_health` found: the table's version (None if unreadable) and its problems."""

    path: str
    version: int | None
    files: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def sound(self) -> bool:
        return not self.problems


def table_health(spark: SparkSession, path: str) -> TableHealth:
    """Check the Delta table at ``path``: its log (the checks of :mod:`lakehouse.damage`, Delta's own
    checks building the newest snapshot) and that every data file of that snapshot exists.

    Lists the snapshot's files from the log and asks the file system for each (metadata only; no data
    file is read). A damage that leaves a valid-looking log cannot be seen (see docs/recovery.md).
    """
    path = resolve_path(path)
    if not path_exists(spark, path):
        return TableHealth(path, None, problems=["nothing exists there (the table folder was deleted)"])
    if not path_exists(spark, f"{path.rstrip('/')}/_delta_log"):
        return TableHealth(
            path, None, problems=["it has no _delta_log (not a Delta table, or its log was deleted)"]
        )
    try:
        snapshot = latest_snapshot(spark, path)
    except DamagedTableError as error:
        return TableHealth(path, None, problems=[error.damage])
    version = int(snapshot.version())
    if version < 0:
        return TableHealth(path, None, problems=["its _delta_log holds no commit (it was deleted)"])
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    root, fs = hadoop_path(spark, path), hadoop_fs(spark, path)
    adds = list_items(snapshot.allFiles().collectAsList())
    missing = [
        add.path()
        for add in adds
        if not fs.exists(jvm.org.apache.hadoop.fs.Path(root, jvm.java.net.URI(add.path()).getPath()))
    ]
    problems = [
        f"data file {name} of version {version} is missing (deleted from storage)" for name in missing[:5]
    ]
    if len(missing) > 5:
        problems.append(f"... and {len(missing) - 5} more missing data files")
    return TableHealth(path, version, len(adds), problems)


def run_table_doctor(spark: SparkSession, path: str, echo: Callable[[str], None] = print) -> int:
    """Print a table's health; 0 if sound, 1 if not (each problem on a line, then what to do)."""
    health = table_health(spark, path)
    if health.sound:
        echo(f"OK: {health.path} version {health.version}: log sound, {health.files} data files present")
        return 0
    for problem in health.problems:
        echo(f"DAMAGED: {health.path}: {problem}")
    echo(
        "restore it from a replica, or RESTORE TABLE delta.`<path>` TO VERSION AS OF <an earlier version>, "
        "or re-create it (see docs/recovery.md)"
    )
    return 1
