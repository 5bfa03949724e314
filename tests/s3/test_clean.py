"""``lakehouse clean`` on object storage (issue 38): a pipeline root on ``s3a://`` is deleted through Spark's
Hadoop file system, only with ``--yes`` when there is no terminal to ask."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakehouse.cli import main
from tests.objectstore import ObjectStore


def test_clean_deletes_a_pipeline_root_on_object_storage(
    spark: SparkSession, s3: ObjectStore, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = s3.uri("warehouse")
    root = f"{warehouse}/demo"
    spark.range(3).write.format("delta").save(f"{root}/store")

    assert main(["--set", f"warehouse={warehouse}", "clean", "--pipeline", "demo"]) == 2  # no terminal
    assert ("warehouse", "demo", "store", "_delta_log", f"{0:020}.json") in s3.files()
    assert main(["--set", f"warehouse={warehouse}", "clean", "--pipeline", "demo", "--yes"]) == 0
    # No object is left (SeaweedFS's filer lists the emptied folders as prefixes still: checked by objects).
    assert s3.files() == []
    err = capsys.readouterr().err
    assert f"not deleting {root} without --yes (no terminal to ask)" in err
    assert f"deleted {root}" in err
