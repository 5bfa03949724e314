"""The suite of a deduplicator's seen-ID index (``lakehouse.kind = dedup_index``).

An entry is live while ``entry_ts >= stream_time(task) - interval`` (stream times as the index's last
commit recorded them). One window over the index (per task and id, by ``entry_ts``) flags:

- ``one_live_entry_per_id``: at most one live entry per (task, id) (flagged once per id).
- ``purged_buckets_dropped``: nothing is left in a bucket below the bound of the last ``purge()``
  (``floor((min stream time - interval) / bucket_width)`` at that time). ``purge()`` drops whole buckets,
  so expired entries may remain in the bucket holding the bound until a later purge.
- ``bucket_of_entry_ts``: ``bucket = floor(entry_ts / bucket_width)`` (microseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse.dedup.settings import BUCKET_COL, ENTRY_TS_COL, TASK_COL, DedupSettings, bucket_of
from lakehouse.quality.rules import Rule, key_text, violation_rows
from lakehouse.times import micros

KIND = "dedup_index"
ONE_LIVE = Rule("one_live_entry_per_id", "at most one live entry per (task, id)")
BUCKET = Rule("bucket_of_entry_ts", "bucket = floor(entry_ts / bucket_width)")


def purge_rule(bound: int | None) -> Rule:
    """The retention rule, naming the bound of the last ``purge()`` (None: no purge() recorded)."""
    what = (
        "no purge() recorded yet" if bound is None else f"the last purge() dropped the buckets below {bound}"
    )
    return Rule("purged_buckets_dropped", f"no entry left in a purged bucket ({what})")


def dedup_rules(purged_below: int | None) -> tuple[Rule, ...]:
    """The rules of a seen-ID index's suite, in the order they are reported."""
    return (ONE_LIVE, purge_rule(purged_below), BUCKET)


def dedup_violations(
    index: DataFrame,
    settings: DedupSettings,
    stream_times: Mapping[int, datetime],
    purged_below: int | None,
) -> DataFrame:
    """The rows of the seen-ID ``index`` that break a rule, as violation rows (one window pass).

    An entry of a task without a recorded stream time counts as live.
    """
    # Before the first batch the index has no id columns (and no rows).
    ids = [TASK_COL, *(c for c in settings.by if c in index.columns)]
    by_time = Window.partitionBy(*ids).orderBy(F.col(ENTRY_TS_COL).asc())
    whole_id = by_time.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    entry_us = F.unix_micros(ENTRY_TS_COL)
    live = F.coalesce(entry_us >= _stream_time_us(stream_times) - F.lit(settings.interval_us), F.lit(True))
    live_entries = F.sum(live.cast("int")).over(whole_id)
    last_of_id = F.lead(ENTRY_TS_COL, 1).over(by_time).isNull()
    purged = F.col(BUCKET_COL) < F.lit(purged_below) if purged_below is not None else F.lit(False)
    flagged = index.select(
        *ids,
        ENTRY_TS_COL,
        BUCKET_COL,
        (last_of_id & (live_entries > 1)).alias(ONE_LIVE.name),
        purged.alias(purge_rule(None).name),
        (F.col(BUCKET_COL) != bucket_of(entry_us, settings.bucket_us)).alias(BUCKET.name),
    )
    detail = F.format_string("entry_ts=%s bucket=%s", F.col(ENTRY_TS_COL), F.col(BUCKET_COL))
    return violation_rows(flagged, dedup_rules(purged_below), key_text(ids), detail)


def _stream_time_us(stream_times: Mapping[int, datetime]) -> Column:
    if not stream_times:
        return F.lit(None).cast("long")
    pairs = [F.lit(x) for task, at in sorted(stream_times.items()) for x in (task, micros(at))]
    return F.element_at(F.create_map(*pairs), F.col(TASK_COL))
