"""A Kafka ingest job as its own process: ``ingest_child.py BOOTSTRAP TOPIC ROOT [KILL_AT_BATCH]``.

With ``KILL_AT_BATCH`` the process kills itself with SIGKILL (no exception, no cleanup) right after the
index commit of that batch, i.e. after the dedup commit and before the sink and checkpoint commits.
Prints one ``stats <json>`` line per batch it completed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from datetime import timedelta

from pyspark.sql import SparkSession

from lakehouse.config import load_settings
from lakehouse.dedup import Deduplicator, DedupStats
from lakehouse.kafka_source import ingest, read_kafka
from lakehouse.session import get_spark
from tests.conftest import TEST_SPARK_CONF

VALUE_SCHEMA = "txn_id string, amount int, event_time timestamp"
BATCH_RECORDS = 4


def run(spark: SparkSession, bootstrap: str, topic: str, root: str, kill_at: int | None) -> list[DedupStats]:
    """Ingest ``topic`` into ``root``/sink (index ``root``/index, checkpoint ``root``/checkpoint)."""
    dedup = Deduplicator.create(spark, f"{root}/index", by="txn_id", interval=timedelta(hours=1))
    if kill_at is not None:
        index_commits = [0]

        def crash(step: str) -> None:
            if step == "index":
                index_commits[0] += 1
                if index_commits[0] == kill_at + 1:  # batches 0..kill_at-1 committed: this is kill_at
                    os.kill(os.getpid(), signal.SIGKILL)

        dedup._after_commit = crash
    stream = read_kafka(
        spark, bootstrap, topic, VALUE_SCHEMA, timestamp="event_time", max_offsets_per_trigger=BATCH_RECORDS
    )
    return ingest(stream, dedup, f"{root}/sink", f"{root}/checkpoint")


if __name__ == "__main__":
    settings = load_settings("local", overrides={"log_level": "ERROR", "driver_memory": "1g"})
    session = get_spark({**TEST_SPARK_CONF, "spark.master": "local[1]"}, settings)
    kill = int(sys.argv[4]) if len(sys.argv) > 4 else None
    for stats in run(session, sys.argv[1], sys.argv[2], sys.argv[3], kill):
        print("stats " + json.dumps(dataclasses.asdict(stats)), flush=True)
    session.stop()
