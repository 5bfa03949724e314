"""Segment math of a versioned store: a version lives in the segment of its ``valid_to``.

``segment = floor(valid_to / segment_interval)`` on the microsecond timeline; the latest versions
(``valid_to`` NULL, tombstones included) live in the NULL segment. Segment ``s`` holds versions whose
``valid_to`` lies in ``[s * interval, (s + 1) * interval)``.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column
from pyspark.sql import functions as F

SEGMENT_COL = "segment"
# Default segment interval tiers of Kafka's RocksDbVersionedKeyValueBytesStoreSupplier:
# (retention up to, divisor, floor).
_TIERS = (
    (timedelta(seconds=60), 3, timedelta(seconds=2)),
    (timedelta(minutes=5), 5, timedelta(seconds=20)),
    (timedelta(hours=1), 12, timedelta(minutes=1)),
)
_LONG_TIER = (24, timedelta(minutes=5))


def default_segment_interval(history_retention: timedelta) -> timedelta:
    """Kafka's default segment interval for a history retention (it affects cost, never results).

    ``R <= 60 s``: max(R/3, 2 s); ``R <= 5 min``: max(R/5, 20 s); ``R <= 1 h``: max(R/12, 1 min);
    longer: max(R/24, 5 min).
    """
    for bound, divisor, floor in _TIERS:
        if history_retention <= bound:
            return max(history_retention / divisor, floor)
    divisor, floor = _LONG_TIER
    return max(history_retention / divisor, floor)


def segment_of(timestamp_us: int, interval_us: int) -> int:
    """The segment holding a ``valid_to`` of ``timestamp_us`` (floor division: negative times work too)."""
    return timestamp_us // interval_us


def segment_sql(valid_to: str, interval_us: int) -> str:
    """SQL expression of :func:`segment_of` for the SQL expression ``valid_to``; NULL when it is NULL."""
    return f"CAST(floor(unix_micros({valid_to}) / {interval_us}) AS BIGINT)"


def segment_column(valid_to: Column | str, interval_us: int) -> Column:
    """Spark expression of :func:`segment_of` (:func:`segment_sql` as a column); NULL when ``valid_to`` is."""
    column = F.col(valid_to) if isinstance(valid_to, str) else valid_to
    return F.floor(F.unix_micros(column) / F.lit(interval_us)).cast("long")


def first_live_segment(stream_time_us: int, retention_us: int, interval_us: int) -> int:
    """The oldest segment that may hold a version a non-expired read can return.

    A segment ``s < first_live_segment`` holds only versions with ``valid_to <= stream_time - R``: they
    answer reads at ``as_of < stream_time - R`` only, which the latest version answers instead.
    """
    return segment_of(stream_time_us - retention_us, interval_us)


def segments_from(timestamp_us: int, interval_us: int) -> Column:
    """Filter on the partition column: the segments that can hold a ``valid_to > timestamp``, plus latest."""
    segment = F.col(SEGMENT_COL)
    return segment.isNull() | (segment >= F.lit(segment_of(timestamp_us, interval_us)))
