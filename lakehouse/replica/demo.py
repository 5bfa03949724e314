"""The replicas' step of ``lakehouse demo``: standby replicas of a rates store's tasks and a failover.

The drill needs a store that gains versions while the replicas run, so it feeds the rate updates the demo
landed for its pipeline, in three batches by offset, into a rates store of its own at
``<root>/failover/rates_store``, as the pipeline's ``materialize`` stage puts them; the pipeline's store is
left as its stages wrote it. Re-running replays the batches and re-opens the replicas.
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.pipeline.spec import PipelineSpec, source_schema
from lakehouse.pipeline.stages import changelog_store, put_changelog
from lakehouse.replica.failover import run_failover_drill

#: The fewest batches and tasks the drill needs (it is the demo's costliest step).
BATCHES = 3
PARTITIONS = 1


def demo_step(spark: SparkSession, spec: PipelineSpec) -> list[str]:
    """Run the failover drill on the rate updates landed in ``spec``'s changelog folder; returns the lines
    to print."""
    updates = (
        spark.read.format(spec.changelog_format)
        .schema(source_schema("changelog_schema", spec.changelog_schema))
        .load(spec.changelog)
    )
    row = updates.agg(F.max("offset").alias("last")).first()
    last = 0 if row is None or row["last"] is None else int(row["last"])
    width = last // BATCHES + 1
    offset = F.col("offset")
    batches = [updates.where((offset >= n * width) & (offset < (n + 1) * width)) for n in range(BATCHES)]
    root = f"{spec.root}/failover"
    store = changelog_store(spec, f"{root}/rates_store", updates)
    lines: list[str] = []
    run_failover_drill(
        spark, root, store, batches, PARTITIONS, put=partial(put_changelog, spec), echo=lines.append
    )
    return lines
