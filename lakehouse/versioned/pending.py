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
  their ``valid_to`` is the next version of the key in the batch that wrote them (NULL for its last), a
  bound that later versions, pending or sealed, shorten: no batch rewrites the rows of another.

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


#: SQL dialects :func:`versions_sql` writes: ``spark`` (backtick identifiers, plus the recomputed
#: ``segment`` column the library's reads prune on) and ``ansi`` (double-quoted identifiers, no ``segment``:
#: DataFusion, DuckDB, Trino, Polars). The statement is otherwise the same text.
DIALECTS = ("spark", "ansi")


def versions_sql(
    table: str,
    columns: Sequence[str],
    keys: Sequence[str],
    interval_us: int,
    region_from: str | None,
    dialect: str = "spark",
    few_keys: bool = False,
) -> str:
    """SQL of the store's versions (module doc) over ``table``, a table reference such as
    ``delta.`/lake/rates` VERSION AS OF 7``, whose columns are ``columns`` (in order).

    The one definition of a store's versions, for every engine: plain SQL (``EXISTS``, ``CASE``, one
    window function, ``UNION ALL``) whose only dialect differences are the identifier quotes and, for
    ``spark``, the ``segment`` column recomputed from the resolved ``valid_to`` (``ansi`` leaves it out:
    it is a storage detail). Each version is valid in ``[valid_from, valid_to)``, ``valid_to`` NULL for
    the latest; ``tombstone`` true marks a deletion.

    ``region_from``: an SQL expression of the first segment that pending rows can affect (a literal, or
    a scalar subquery); None: every sealed segment.

    The table is scanned up to four times (each scan pruned by the filters a query puts on the result):
    the sealed rows below the region, the sealed rows of the region whose key has no pending row (``NOT
    EXISTS``: an anti join), and the region and pending rows of the pending keys (``EXISTS``: a semi
    join), whose chains are resolved in one window per key. With ``few_keys`` (the table holds the rows of
    a few keys, as :meth:`VersionedStore.versions` picks them for a batch) every row of the region goes
    through the window instead: two scans, no join (a sealed chain resolves to itself: each version's
    ``valid_to`` is its successor's ``valid_from``).
    """
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    q = _quote if dialect == "spark" else _double_quote
    segment, pending_flag, next_from = q(SEGMENT_COL), q(_PENDING_FLAG), q(_NEXT_FROM)
    key_list = ", ".join(q(k) for k in keys)
    same_key = " AND ".join(f"_lh_p.{q(k)} = _lh_r.{q(k)}" for k in keys)
    # The resolved valid_to: the smaller of the row's own and the next valid_from of its key (NULL: none).
    valid_to = f"CASE WHEN {next_from} < valid_to OR valid_to IS NULL THEN {next_from} ELSE valid_to END"
    output = [c for c in columns if dialect == "spark" or c != SEGMENT_COL]
    raw_columns = ", ".join(f"_lh_r.{q(c)}" for c in output)
    resolved_columns = ", ".join(
        f"{valid_to} AS valid_to"
        if c == "valid_to"
        else f"{segment_sql(valid_to, interval_us)} AS {segment}"
        if c == SEGMENT_COL
        else q(c)
        for c in output
    )
    pending = f"{segment} = {PENDING_SEGMENT}"
    sealed = f"(_lh_r.{segment} IS NULL OR _lh_r.{segment} < {PENDING_SEGMENT})"
    # Region and pending rows (the pending segment is above every region bound).
    near = (
        "TRUE" if region_from is None else f"(_lh_r.{segment} IS NULL OR _lh_r.{segment} >= ({region_from}))"
    )
    has_pending = f"EXISTS (SELECT 1 FROM src _lh_p WHERE _lh_p.{pending} AND {same_key})"
    below = ""
    if region_from is not None:
        below = f"SELECT {raw_columns} FROM src _lh_r WHERE {sealed} AND NOT {near}\nUNION ALL\n"
    # The rows of keys without a pending row, as stored (none with few_keys: they go through the window).
    unresolved = f"SELECT {raw_columns} FROM src _lh_r WHERE {sealed} AND {near} AND NOT {has_pending}"
    in_chains, unresolved = (
        (near, "") if few_keys else (f"{near} AND {has_pending}", f"{unresolved}\nUNION ALL\n")
    )
    # A pending row sorts after a sealed one at the same valid_from, so the sealed one (next valid_from
    # equal to its own) is the replaced row.
    return f"""WITH src AS (SELECT * FROM {table}),
chains AS (
  SELECT _lh_r.*, CASE WHEN _lh_r.{pending} THEN 1 ELSE 0 END AS {pending_flag}
  FROM src _lh_r WHERE {in_chains}
),
resolved AS (
  SELECT *, lead(valid_from) OVER (PARTITION BY {key_list} ORDER BY valid_from, {pending_flag}) AS {next_from}
  FROM chains
)
{below}{unresolved}SELECT {resolved_columns} FROM resolved
WHERE {next_from} IS NULL OR {next_from} <> valid_from"""


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


def _double_quote(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'
