"""As-of stream-table joins (KIP-889/914) over a versioned store or any SCD2 table, as range joins."""

from lakehouse.asof.grace import GraceRunResult, asof_join_with_grace
from lakehouse.asof.join import (
    AsOfJoinResult,
    AsOfJoinStats,
    ColumnClashError,
    asof_join,
    asof_join_with_stats,
)

__all__ = [
    "AsOfJoinResult",
    "AsOfJoinStats",
    "ColumnClashError",
    "GraceRunResult",
    "asof_join",
    "asof_join_with_grace",
    "asof_join_with_stats",
]
