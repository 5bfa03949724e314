"""One SparkSession for the whole run, with fast, deterministic settings; a Delta path per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.config import load_settings
from lakehouse.session import get_spark

TEST_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # Tiny test data gains nothing from adaptive execution, which runs every shuffle stage as its own job.
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The session-scoped Delta-enabled SparkSession (built through lakehouse.session.get_spark)."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    settings = load_settings(
        "local", overrides={"warehouse": str(warehouse), "log_level": "ERROR", "driver_memory": "2g"}
    )
    session = get_spark(TEST_SPARK_CONF, settings)
    yield session
    session.stop()


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    """A fresh location for one Delta table."""
    return str(tmp_path / "table")


@pytest.fixture
def retention_check_off(spark: SparkSession) -> Iterator[None]:
    """Let the test create stores whose ``file_retention`` is under Delta's 7-day VACUUM safety threshold."""
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    spark.conf.set(key, "false")
    yield
    spark.conf.unset(key)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many crash-injection points (tests/pipeline/test_crash_anywhere.py) and hostile-input cases
    (tests/test_hostile_input.py) the run tried."""
    crash = sys.modules.get("tests.pipeline.test_crash_anywhere")
    if crash is not None and crash.POINTS:
        terminalreporter.section("crash injection")
        for kind, count in crash.POINTS.items():
            terminalreporter.write_line(f"{count} injection points: {kind}, then a restart")
    hostile = sys.modules.get("tests.test_hostile_input")
    if hostile is None or not hostile.CASES:
        return
    cases = hostile.CASES
    terminalreporter.section("hostile input")
    refused = sum(n for name, n in cases.items() if name.startswith("refused"))
    terminalreporter.write_line(
        f"{sum(cases.values())} hostile-input cases tried: {refused} refused in one line writing nothing, "
        f"{sum(cases.values()) - refused} taken under their documented handling ({len(cases)} kinds)"
    )
