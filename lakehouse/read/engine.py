"""delta-rs (``deltalake``, DataFusion) as lakehouse's JVM-free Delta engine: open a table only when delta-rs
reads it right, run SQL over tables, list the tables under a local folder.

The check is ours, not delta-rs's: a table is read without a JVM only when its protocol is one this path is
tested on (:data:`READER_FEATURES`); anything else (a future reader feature, column mapping) raises
:class:`~lakehouse.errors.EngineUnsupportedError` before a byte of data is read, and callers read it with
Spark instead. Never a wrong answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from lakehouse.commit_log import recorded_state
from lakehouse.errors import EngineUnsupportedError
from lakehouse.paths import MAX_TABLE_DEPTH, is_local, local_path, table_name

#: Reader features the JVM-free path reads and is tested on (``tests/read``): deletion vectors (every
#: store's seals write them) and timestamps without a zone. Column mapping and every other feature go to
#: Spark.
READER_FEATURES = frozenset({"deletionVectors", "timestampNtz"})
#: Protocol reader versions: 1 (no features), 3 (table features). Version 2 is column mapping.
_READER_VERSIONS = (1, 3)
_RECENT_COMMITS = 20


def unreadable_reason(table: DeltaTable) -> str | None:
    """Why delta-rs must not read ``table`` (a protocol beyond :data:`READER_FEATURES`), or None."""
    protocol = table.protocol()
    if protocol.min_reader_version not in _READER_VERSIONS:
        return f"it needs Delta reader version {protocol.min_reader_version} (column mapping or newer)"
    missing = sorted(set(protocol.reader_features or ()) - READER_FEATURES)
    if missing:
        return f"it uses the reader feature(s) {', '.join(missing)}"
    return None


def open_table(path: str, version: int | None = None) -> DeltaTable:
    """The Delta table at ``path`` (as of ``version``), checked readable by delta-rs.

    Raises:
        EngineUnsupportedError: not a local path, or a protocol :func:`unreadable_reason` refuses.
    """
    if not is_local(path):
        raise EngineUnsupportedError(f"{path} is not on the local file system")
    table = DeltaTable(local_path(path), version=version)
    reason = unreadable_reason(table)
    if reason is not None:
        raise EngineUnsupportedError(f"delta-rs cannot read {path}: {reason}")
    return table


def run_sql(tables: Mapping[str, DeltaTable], query: str, max_rows: int | None = None) -> pa.Table:
    """The result of one SQL ``query`` run by DataFusion over ``tables`` (by name), as an Arrow table; with
    ``max_rows``, its first rows only (the stream of batches is read no further)."""
    builder = QueryBuilder()
    for name, table in tables.items():
        builder = builder.register(name, table)
    reader = pa.RecordBatchReader.from_stream(builder.execute(query))
    if max_rows is None:
        return _without_views(reader.read_all())
    batches, rows = [], 0
    for batch in reader:
        batches.append(batch)
        rows += batch.num_rows
        if rows >= max_rows:
            break
    return _without_views(pa.Table.from_batches(batches, reader.schema).slice(0, max_rows))


def _without_views(table: pa.Table) -> pa.Table:
    """``table`` with DataFusion's view types (``string_view``, ``binary_view``) as plain Arrow types, which
    every Arrow consumer (pandas, Polars, ``pyarrow.compute`` sorting) takes."""
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    schema = pa.schema([f.with_type(plain.get(f.type, f.type)) for f in table.schema])
    return table if schema == table.schema else table.cast(schema)


def find_local_tables(root: str) -> dict[str, str]:
    """Every Delta table under the local folder ``root`` (a few levels deep), by name: its relative path
    with ``_`` (the names of :func:`lakehouse.catalog.find_tables`). Folders named ``_*`` or ``.*`` and
    partition folders (``col=value``) are skipped."""
    top = local_path(root)
    found: dict[str, str] = {}
    pending: list[tuple[str, tuple[str, ...]]] = [(top, ())]
    while pending:
        folder, parts = pending.pop()
        try:
            children = [e for e in os.scandir(folder) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            continue
        if parts and any(c.name == "_delta_log" for c in children):
            found[table_name(parts)] = folder
            continue
        if len(parts) >= MAX_TABLE_DEPTH:
            continue
        for child in children:
            if not child.name.startswith(("_", ".")) and "=" not in child.name:
                pending.append((child.path, (*parts, child.name)))
    return dict(sorted(found.items()))


def recorded_state_of(table: DeltaTable, app_id: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """The state (``fields``) that ``app_id``'s commits recorded as of the table's version (see
    :meth:`lakehouse.commit_log.CommitLog.state_at`): the newest commits first, all retained ones if none
    of them carries it."""
    for limit in (_RECENT_COMMITS, None):
        commits = table.history(limit)
        state = recorded_state(commits, app_id, fields, table.version())
        if state or len(commits) < _RECENT_COMMITS:
            return state
    return {}
