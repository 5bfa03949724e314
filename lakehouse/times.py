"""Time on lakehouse's microsecond timeline: Python datetimes and durations, Spark timestamps, SQL literals.

Every stored time is a UTC TIMESTAMP; computations on the driver use whole microseconds since the epoch
(``1970-01-01T00:00:00Z``), the resolution of Spark's TIMESTAMP.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakehouse.errors import InvalidInputError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def micros(value: datetime | timedelta) -> int:
    """Microseconds since the epoch (a datetime; naive means UTC) or in a duration (a timedelta)."""
    if isinstance(value, timedelta):
        return value // _US
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - EPOCH) // _US


#: First and last instants (inclusive) a Python datetime holds: years 1 to 9999. Spark's TIMESTAMP reaches
#: further, but a stored time outside them could not be read back as a datetime or written as a SQL literal.
MIN_US = micros(datetime(1, 1, 1, tzinfo=UTC))
MAX_US = micros(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
#: The longest retention, interval or width a setting may have: the span of representable times.
MAX_SPAN = timedelta(microseconds=MAX_US - MIN_US)


def require_representable(us: int | None, what: str) -> None:
    """Raise :class:`InvalidInputError` if ``us`` is outside ``[MIN_US, MAX_US]`` (None passes)."""
    if us is not None and not MIN_US <= us <= MAX_US:
        raise InvalidInputError(
            f"{what} is {us} microseconds after the epoch, outside years 1 to 9999: nothing was written"
        )


def require_span(value: timedelta, name: str) -> None:
    """Raise :class:`InvalidInputError` if the duration setting ``name`` exceeds :data:`MAX_SPAN`."""
    if value > MAX_SPAN:
        raise InvalidInputError(f"{name} must be at most {MAX_SPAN.days} days (years 1 to 9999), got {value}")


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
