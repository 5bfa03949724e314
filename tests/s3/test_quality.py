"""Quality on an object store (issue 38): ``lakehouse quality`` over a warehouse on ``s3a://`` (the whole of
it, or one table) finds its tables there, appends its results to the warehouse's results table and writes
its Data Docs to a local folder under the working directory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse import VersionedStore
from lakehouse.cli import main
from lakehouse.quality.job import LOCAL_DOCS_DIR
from tests.objectstore import ObjectStore

SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.DoubleType())])
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_quality_over_a_warehouse_on_object_storage(
    spark: SparkSession,
    s3: ObjectStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    warehouse = s3.uri("warehouse")
    store = VersionedStore.create(
        spark, f"{warehouse}/rates", "k", SCHEMA, timedelta(days=1), timedelta(hours=1)
    )
    store.put("EUR", 1.1, T0)
    store.put("EUR", 1.2, T0 + timedelta(minutes=5))
    store.seal()

    assert main(["--set", f"warehouse={warehouse}", "quality"]) == 0
    assert main(["--set", f"warehouse={warehouse}", "quality", "--full", "rates"]) == 0
    docs = tmp_path / LOCAL_DOCS_DIR / s3.bucket / s3.prefix / "warehouse" / "index.html"
    assert capsys.readouterr().out.splitlines() == [
        "[quality] PASS rates (versioned_store, version 2, full): 7 expectations met",
        f"[quality] Data Docs: {docs}",
        "[quality] PASS rates (versioned_store, version 2, full): 7 expectations met",
        f"[quality] Data Docs: {docs}",
    ]
    assert docs.is_file()
    results = spark.read.format("delta").load(f"{warehouse}/quality/results")
    assert results.select("run_id").distinct().count() == 2
