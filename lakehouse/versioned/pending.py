"""The pending tier of a versioned store: where batches append, and how reads see through it.

A batch must not rewrite the files of the latest versions (one row per live key: a MERGE that closes the
open version of 100k random keys touches every one of those files, so its cost grows with the number of
live keys). So a batch writes its new versions into one partition of their own, the **pending** partition
(``segment = PENDING_SEGMENT``), reading and rewriting only that partition (its size grows with the
batches since the last seal, never with the store). :meth:`VersionedStore.seal` later moves them into
their validTo segments with one MERGE, the cost a batch used to pay, once for many batches.

Physical rows are then of two kinds:

- **sealed** rows (segment NULL for the latest versions, else ``floor(valid_to / interval)``): a consistent
  chain per key, as if no pending row existed;
- **pending** rows: each ``(key, valid_from)`` at most once (a later batch replaces the value in place);
  their ``valid_to`` is the next pending version of the key, a bound that sealed versions may shorten.

The store's **versions** (what every read, the as-of join, SQL and the quality suite see) resolve the
pending rows against the sealed rows of the same keys, in one window per key:

- a pending row replaces a sealed row at the same ``(key, valid_from)``;
- every version's ``valid_to`` is the smaller of its own and the next ``valid_from`` of its key among
  both (a late pending version inside a sealed one cuts it; a pending version before a sealed one ends
  there), and ``segment`` is recomputed from it. That is what :meth:`VersionedStore.seal` writes, except
  for versions already expired (``valid_to <= stream_time - R``; no read returns them either way): a
  seal deletes them, resolution keeps them. Pending rows hold every accepted version, expired ones too,
  so each sealed version is cut by its true successor.

Only sealed rows in the **region** (the latest versions and segments from ``region_from`` on) can be
affected: every pending row was accepted at ``valid_from >= stream_time - R`` of a moment after the last
seal, and a sealed version ending at or before a pending ``valid_from`` is untouched by it. The store
records the stream time of its last seal, so a read bounds the region by ``floor((that - R) /
interval)``; the SQL view bounds it by the oldest pending ``valid_from`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakehouse.versioned.segments import SEGMENT_COL, segment_sql

#: The pending partition's segment value: above every real segment, so ``segment >= s`` filters keep it
#: and partition drops (``segment < s``) never remove it.
PENDING_SEGMENT = 2**63 - 1
_PENDING_FLAG = "_lh_pending"
_NEXT_FROM = "_lh_next_from"


def versions_sql(
    table: str,
    columns: Sequence[str],
    keys: Sequence[str],
    interval_us: int,
    region_from: str | None,
) -> str:
    """SQL of the store's versions (module doc) over ``table``, a table reference such as
    ``delta.`/lake/rates` VERSION AS OF 7``, whose columns are ``columns`` (in order).

    ``region_from``: an SQL expression of the first segment that pending rows can affect (a literal, or
    a scalar subquery); None: every sealed segment.

    The table is scanned four times (each scan pruned by the filters a query puts on the result): the
    sealed rows no pending row changes (below the region, or of a key without pending rows: an anti join
    with the pending keys) and the region and pending rows of the pending keys (a semi join), whose
    chains are resolved in one window per key.
    """
    key_list = ", ".join(_quote(k) for k in keys)
    same_key = " AND ".join(f"r.{_quote(k)} = p.{_quote(k)}" for k in keys)
    # A pending row sorts after a sealed one at the same valid_from, so the sealed one (next valid_from
    # equal to its own) is the replaced row.
    resolved_columns = [
        (
            f"least(valid_to, {_NEXT_FROM}) AS valid_to"
            if c == "valid_to"
            else f"{segment_sql(f'least(valid_to, {_NEXT_FROM})', interval_us)} AS {SEGMENT_COL}"
            if c == SEGMENT_COL
            else _quote(c)
        )
        for c in columns
    ]
    sealed = f"(r.{SEGMENT_COL} IS NULL OR r.{SEGMENT_COL} < {PENDING_SEGMENT})"
    # Region and pending rows (the pending segment is above every region bound).
    near = (
        "TRUE" if region_from is None else f"(r.{SEGMENT_COL} IS NULL OR r.{SEGMENT_COL} >= ({region_from}))"
    )
    # The untouched rows are an anti join (not an outer one), so the plan's size estimate stays the
    # table's: a join with these versions may still broadcast them.
    return f"""WITH src AS (SELECT * FROM {table}),
pending_keys AS (SELECT DISTINCT {key_list} FROM src WHERE {SEGMENT_COL} = {PENDING_SEGMENT}),
chains AS (
  SELECT r.*, CASE WHEN r.{SEGMENT_COL} = {PENDING_SEGMENT} THEN 1 ELSE 0 END AS {_PENDING_FLAG}
  FROM src r LEFT SEMI JOIN pending_keys p ON {same_key}
  WHERE {near}
),
resolved AS (
  SELECT *, lead(valid_from) OVER by_time AS {_NEXT_FROM} FROM chains
  WINDOW by_time AS (PARTITION BY {key_list} ORDER BY valid_from, {_PENDING_FLAG})
)
SELECT r.* FROM src r LEFT ANTI JOIN pending_keys p ON {same_key} AND {near}
WHERE {sealed}
UNION ALL
SELECT {", ".join(resolved_columns)} FROM resolved
WHERE {_NEXT_FROM} IS NULL OR {_NEXT_FROM} <> valid_from"""


def table_reference(path: str, version: int | None = None) -> str:
    """SQL reference of the Delta table at ``path`` (as of ``version``, or as it is at each query)."""
    reference = f"delta.`{path.replace('`', '``')}`"
    return reference if version is None else f"{reference} VERSION AS OF {version}"


def oldest_pending_segment_sql(table: str, interval_us: int) -> str:
    """Scalar subquery: the segment of the oldest pending ``valid_from`` of ``table`` (the pending
    partition's value when nothing is pending, so the region is the latest versions only)."""
    oldest = segment_sql("min(valid_from)", interval_us)
    return (
        f"SELECT coalesce({oldest}, {PENDING_SEGMENT}) FROM {table} WHERE {SEGMENT_COL} = {PENDING_SEGMENT}"
    )


def _quote(column: str) -> str:
    return f"`{column.replace('`', '``')}`"
