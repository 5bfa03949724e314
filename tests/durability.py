"""Make Delta checkpoint a table and clean up its log, as weeks of commits would, within a test."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pyspark.sql import SparkSession

FAST_CLEANUP = {
    "delta.checkpointInterval": "2",
    "delta.logRetentionDuration": "interval 1 hours",
    "delta.deletedFileRetentionDuration": "interval 1 hours",
}


def enable_fast_cleanup(spark: SparkSession, path: str) -> None:
    """A checkpoint every 2 commits and a one-hour log retention (one ALTER TABLE commit)."""
    settings = ", ".join(f"'{k}' = '{v}'" for k, v in FAST_CLEANUP.items())
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({settings})")


def age_log(path: str) -> set[str]:
    """Make every file of the table's log two days old; returns the names of its commit files.

    With :func:`enable_fast_cleanup` set before at least two commits (so an aged checkpoint exists), the
    checkpoint Delta writes within the next two commits is followed by its log cleanup, which deletes the
    commit files before the aged checkpoint (see :func:`deleted_since`).
    """
    log_dir = Path(path) / "_delta_log"
    old = time.time() - 2 * 86400
    for file in log_dir.iterdir():
        if file.is_file():
            os.utime(file, (old, old))
    return {p.name for p in log_dir.glob("*.json")}


def deleted_since(path: str, before: set[str]) -> list[str]:
    """The commit files of ``before`` that are no longer in the table's log."""
    return sorted(before - {p.name for p in (Path(path) / "_delta_log").glob("*.json")})
