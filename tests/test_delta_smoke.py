"""Real Delta Lake through the embedded session: create, MERGE, VERSION AS OF, CDF, VACUUM."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse.doctor import probe_delta, versions
from lakehouse.session import DELTA_EXTENSION


def test_session_is_delta_enabled_and_reused(spark: SparkSession) -> None:
    from lakehouse.session import get_spark

    assert DELTA_EXTENSION in spark.conf.get("spark.sql.extensions", "")
    assert get_spark() is spark


def test_probe_creates_merges_time_travels_reads_cdf_and_vacuums(spark: SparkSession, tmp_path: Path) -> None:
    checked = probe_delta(spark, tmp_path)
    assert any("change data feed" in line for line in checked)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'doctor_probe'}`").select("operation").collect()
    operations = {row["operation"] for row in history}
    assert {"CREATE TABLE", "WRITE", "MERGE", "VACUUM END"} <= operations


def test_versions_report_the_jvm(spark: SparkSession) -> None:
    found = versions(spark)
    assert found["java"].startswith("17")
    assert found["spark (JVM)"] == found["pyspark"]
