"""Time on lakehouse's microsecond timeline: Python datetimes and durations, Spark timestamps, SQL literals.

Every stored time is a UTC TIMESTAMP; computations on the driver use whole microseconds since the epoch
(``1970-01-01T00:00:00Z``), the resolution of Spark's TIMESTAMP.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import Column
from pyspark.sql import functions as F

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def micros(value: datetime | timedelta) -> int:
    """Microseconds since the epoch (a datetime; naive means UTC) or in a duration (a timedelta)."""
    if isinstance(value, timedelta):
        return value // _US
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - EPOCH) // _US


def from_micros(value: int) -> datetime:
    """The UTC datetime ``value`` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=value)


def from_micros_or_none(value: int | None) -> datetime | None:
    """:func:`from_micros`, with None for None."""
    return None if value is None else from_micros(int(value))


def duration(us: int) -> timedelta:
    """The duration of ``us`` microseconds."""
    return timedelta(microseconds=us)


def timestamp_lit(us: int) -> Column:
    """A Spark TIMESTAMP literal ``us`` microseconds after the epoch."""
    return F.timestamp_micros(F.lit(us))


def timestamp_sql(us: int) -> str:
    """A SQL TIMESTAMP literal (UTC, microseconds) for ``us`` microseconds after the epoch."""
    at = from_micros(us)
    return f"TIMESTAMP'{at.year:04d}-{at:%m-%d %H:%M:%S.%f}Z'"
