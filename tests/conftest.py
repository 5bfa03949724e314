"""One SparkSession for the whole run, with fast, deterministic settings; a Delta path per test."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse._jars import hadoop_aws_coordinate
from lakehouse.config import load_settings
from lakehouse.session import get_spark
from tests.child import INTERPRETED
from tests.objectstore import ObjectStore, object_store, weed_binary

TEST_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.snapshotPartitions": "1",  # as conf/lakehouse.toml: one task per state rebuild
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # Tiny test data gains nothing from adaptive execution, which runs every shuffle stage as its own job.
    "spark.sql.adaptive.enabled": "false",
    **INTERPRETED,  # expressions interpreted, not compiled (tests/child.py says why)
}


#: Test files by how long they took in a full run (``--durations``), longest first. The suite runs in two
#: processes, each taking whole files (``--dist loadfile``) in collection order (``--no-loadscope-reorder``):
#: a long file handed out last would keep one process busy while the other idles, so these go first.
LONGEST_FILES = (
    "tests/pipeline/test_crash_anywhere.py",
    "tests/s3/test_crash_anywhere.py",
    "tests/versioned/test_kafka_scenarios.py",
    "tests/replica/test_replica.py",
    "tests/test_readme.py",
    "tests/test_cluster.py",
    "tests/pipeline/test_pipeline.py",
    "tests/quality/test_incremental.py",
    "tests/dedup/test_offset_identity.py",
    "tests/versioned/test_pending.py",
    "tests/replica/test_files.py",
    "tests/s3/test_replicas.py",
    "tests/kafka/test_kafka_source.py",
    "tests/test_demo.py",
    "tests/read/test_differential.py",
    "tests/versioned/test_commits.py",
    "tests/versioned/test_store.py",
    "tests/quality/test_suites.py",
    "tests/test_concurrent_writers.py",
    "tests/pipeline/test_continuous.py",
    "tests/quality/test_data_docs.py",
    "tests/versioned/test_differential.py",
    "tests/test_spark_submit.py",
    "tests/replica/test_failover.py",
    "tests/replica/test_model_differential.py",
    "tests/kafka/test_kafka_reset.py",
)


#: Set by the run's first process (before any test process starts) to why the object store cannot be
#: started ("" when it can): its tests are then left out, and the run's summary says so in one line.
_NO_OBJECT_STORE = "SEAWEEDFS_UNAVAILABLE"


def pytest_configure(config: pytest.Config) -> None:
    """The run's first process finds or builds SeaweedFS's weed once, for every test process."""
    if not hasattr(config, "workerinput"):
        binary, why = weed_binary()
        os.environ[_NO_OBJECT_STORE] = why if binary is None else ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests of :data:`LONGEST_FILES` first, in that order (the rest keep theirs); leave out the
    object-store tests when there is no object store."""
    if os.environ.get(_NO_OBJECT_STORE):
        unrunnable = [item for item in items if "object_store_server" in getattr(item, "fixturenames", ())]
        config.hook.pytest_deselected(items=unrunnable)
        items[:] = [item for item in items if item not in unrunnable]
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The session-scoped Delta-enabled SparkSession (built through lakehouse.session.get_spark)."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    settings = load_settings(
        "local",
        overrides={
            "warehouse": str(warehouse),
            "log_level": "ERROR",
            # 2g ran out late in full runs (a broadcast of 3 rows refused, 2026-11-29): each worker's one
            # session keeps every table's Delta snapshot state it touched.
            "driver_memory": "3g",
            "extra_packages": hadoop_aws_coordinate(),  # s3a:// for the object-store tests
        },
    )
    session = get_spark(TEST_SPARK_CONF, settings)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def object_store_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """This test process's SeaweedFS S3 server (tests/objectstore.py); the tests skip in one line when its
    binary can be neither found nor built."""
    binary, why = weed_binary()
    if binary is None:
        pytest.skip(f"object store: {why}")
    with object_store(tmp_path_factory.mktemp("seaweedfs"), binary) as store:
        yield store


@pytest.fixture
def s3(spark: SparkSession, object_store_server: ObjectStore, request: pytest.FixtureRequest) -> ObjectStore:
    """The object store, reachable from the test session through ``s3a://`` paths; each test gets its own
    prefix as ``s3.uri(...)``'s first part."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    for key, value in object_store_server.hadoop_conf().items():
        hadoop.set(key, value)
    prefix = request.node.name.replace("[", "_").replace("]", "")
    return dataclasses.replace(object_store_server, prefix=prefix)


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


def _tried() -> dict[str, dict[str, int]]:
    """What this process's crash-injection (tests/pipeline/crashing.py) and hostile-input
    (tests/test_hostile_input.py) tests tried: kind -> count, per family."""
    crash = sys.modules.get("tests.pipeline.crashing")
    hostile = sys.modules.get("tests.test_hostile_input")
    return {
        "crash": dict(crash.POINTS) if crash is not None else {},
        "hostile": dict(hostile.CASES) if hostile is not None else {},
    }


#: What the test processes of a parallel run (pytest-xdist workers) tried, merged as each one ends.
_FROM_WORKERS: dict[str, Counter[str]] = {"crash": Counter(), "hostile": Counter()}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands what it tried to the controller."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["tried"] = json.dumps(_tried())


def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller of a parallel run merges what a worker that ended tried."""
    for family, counts in json.loads(node.workeroutput.get("tried", "{}")).items():
        _FROM_WORKERS[family].update(counts)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many crash-injection points and hostile-input cases the run tried (in every test process)."""
    if os.environ.get(_NO_OBJECT_STORE):
        terminalreporter.write_line(f"object-store tests not run: {os.environ[_NO_OBJECT_STORE]}")
    tried = _tried()
    crash = _FROM_WORKERS["crash"] + Counter(tried["crash"])
    cases = _FROM_WORKERS["hostile"] + Counter(tried["hostile"])
    if crash:
        terminalreporter.section("crash injection")
        for kind, count in crash.items():
            terminalreporter.write_line(f"{count} injection points: {kind}, then a restart")
    if not cases:
        return
    terminalreporter.section("hostile input")
    refused = sum(n for name, n in cases.items() if name.startswith("refused"))
    terminalreporter.write_line(
        f"{sum(cases.values())} hostile-input cases tried: {refused} refused in one line writing nothing, "
        f"{sum(cases.values()) - refused} taken under their documented handling ({len(cases)} kinds)"
    )
