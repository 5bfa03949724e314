"""The quality step of ``lakehouse demo``: the suite of every state table the demo wrote, last."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse.quality.enriched import mark_enriched
from lakehouse.quality.job import run_quality


def demo_step(spark: SparkSession, root: str) -> list[str]:
    """Declare ``<root>/txn_priced`` the as-of join's enriched output, then check every state table under
    ``root``; returns one verdict line per table and the path of the Data Docs index.
    """
    mark_enriched(
        spark, f"{root}/txn_priced", record_id="txn_id", timestamp="timestamp", valid_from="rate_valid_from"
    )
    return run_quality(spark, root).lines()
