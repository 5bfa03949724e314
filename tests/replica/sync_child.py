"""Child process of the kill -9 test: sync one replica (the parent kills this process group mid-way)."""

from __future__ import annotations

import sys
from pathlib import Path

from lakehouse.config import load_settings
from lakehouse.replica import Replica
from lakehouse.session import get_spark
from tests.conftest import TEST_SPARK_CONF

if __name__ == "__main__":
    replica_path, marker, warehouse = sys.argv[1:4]
    settings = load_settings("local", overrides={"warehouse": warehouse, "log_level": "ERROR"})
    spark = get_spark(TEST_SPARK_CONF, settings)
    replica = Replica.open(spark, replica_path)
    Path(marker).write_text("syncing")
    replica.sync()
    Path(marker).write_text("done")
