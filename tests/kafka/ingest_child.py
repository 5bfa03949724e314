"""The pipeline's ingest job over a Kafka topic as its own process: ``ingest_child.py BOOTSTRAP TOPIC ROOT
[KILL_AT_BATCH]``.

With ``KILL_AT_BATCH`` the process kills itself with SIGKILL (no exception, no cleanup) right after the
index commit of that batch, i.e. after the dedup commit and before the sink and checkpoint commits.
Prints one ``stats <json>`` line (the job's metrics) per batch it completed.
"""

from __future__ import annotations

import os
import signal
import sys

from pyspark.sql import SparkSession

from lakehouse.config import load_settings
from lakehouse.dedup import Deduplicator
from lakehouse.pipeline import BatchMetrics, PipelineSpec, run_pipeline, spec_from_values
from lakehouse.session import get_spark
from tests.conftest import TEST_SPARK_CONF

VALUE_SCHEMA = "txn_id string, amount int, event_time timestamp"
BATCH_RECORDS = 4


def spec(bootstrap: str, topic: str, root: str) -> PipelineSpec:
    """Ingest ``topic`` (dedup by ``txn_id`` within an hour) into the tables under ``root``."""
    values = {
        "root": root,
        "kafka_bootstrap_servers": bootstrap,
        "records": topic,
        "records_format": "kafka",
        "records_schema": VALUE_SCHEMA,
        "dedup_by": ["txn_id"],
        "dedup_interval": "1h",
        "max_offsets_per_trigger": BATCH_RECORDS,
    }
    return spec_from_values("kafka_ingest", values, root)


def run(
    spark: SparkSession, bootstrap: str, topic: str, root: str, kill_at: int | None, emit=lambda m: None
) -> list[BatchMetrics]:
    """Run the ingest stage once; with ``kill_at``, die right after that batch's index commit."""
    if kill_at is not None:
        index_commits = [0]

        def crash(step: str) -> None:
            if step == "index":
                index_commits[0] += 1
                if index_commits[0] == kill_at + 1:  # batches 0..kill_at-1 committed: this is kill_at
                    os.kill(os.getpid(), signal.SIGKILL)

        created = Deduplicator.__init__

        def with_crash(self: Deduplicator, *args: object, **kwargs: object) -> None:
            created(self, *args, **kwargs)
            self._after_commit = crash

        Deduplicator.__init__ = with_crash  # type: ignore[method-assign]
    return run_pipeline(spark, spec(bootstrap, topic, root), "ingest", emit=emit)


if __name__ == "__main__":
    settings = load_settings("local", overrides={"log_level": "ERROR", "driver_memory": "1g"})
    session = get_spark({**TEST_SPARK_CONF, "spark.master": "local[1]"}, settings)
    kill = int(sys.argv[4]) if len(sys.argv) > 4 else None
    run(session, *sys.argv[1:4], kill, emit=lambda m: print("stats " + m.to_json(), flush=True))
    session.stop()
