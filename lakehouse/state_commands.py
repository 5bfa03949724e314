"""The ``lakehouse`` subcommands over pipelines and state tables: ``run``, ``tables``, ``sql``, ``store``.

Each is a small function of the parsed arguments and the settings (their options:
:func:`lakehouse.options.add_state_commands`). Spark errors become one line (``lakehouse: error: ...``) unless
``--verbose``.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.logger import PySparkLogger
from pyspark.sql import DataFrame, SparkSession

from lakehouse.catalog import KIND_PROPERTY
from lakehouse.config import Settings
from lakehouse.errors import EngineUnsupportedError, InvalidInputError, LakehouseError, first_line
from lakehouse.paths import is_local
from lakehouse.pipeline import load_pipeline
from lakehouse.pipeline.metrics import BatchMetrics
from lakehouse.pipeline.runner import run_as_asked
from lakehouse.read.engine import find_local_tables, open_table, run_sql
from lakehouse.read.store import StoreReader
from lakehouse.read.store import store as read_store
from lakehouse.session import get_spark, warehouse_uri
from lakehouse.tables import describe_all, describe_all_local, format_time, register_all
from lakehouse.versioned.records import VersionedRecord
from lakehouse.versioned.store import VersionedStore

T = TypeVar("T")
#: PySpark's logger of the SQL context of a failed query (pyspark.errors.exceptions.base).
_QUERY_CONTEXT_LOGGER = "SQLQueryContextLogger"


class SparkQueryError(LakehouseError, RuntimeError):
    """Spark refused or failed a query or job (the first line of its message)."""


@contextmanager
def one_line_errors(verbose: bool) -> Iterator[None]:
    """Turn Spark's errors into a :class:`SparkQueryError` of one line, unless ``verbose``.

    PySpark also logs a failed query's context as an ERROR line of JSON; that log is silenced too.
    """
    context_log = PySparkLogger.getLogger(_QUERY_CONTEXT_LOGGER)
    level = context_log.level
    if not verbose:
        context_log.setLevel(logging.CRITICAL)
    try:
        yield
    except (PySparkException, Py4JJavaError) as error:
        if verbose:
            raise
        text = str(error.java_exception) if isinstance(error, Py4JJavaError) else str(error)
        raise SparkQueryError((text.strip().splitlines() or [type(error).__name__])[0]) from None
    finally:
        context_log.setLevel(level)


def _spark(args: argparse.Namespace, settings: Settings) -> SparkSession:
    return get_spark(dict(args.conf), settings)


def _root(args: argparse.Namespace, settings: Settings) -> str:
    return args.root or warehouse_uri(settings)


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_pipeline(args.pipeline, warehouse_uri(settings), args.config, dict(args.spec))

    def emit(metrics: BatchMetrics) -> None:
        print(metrics.to_json() if args.json else metrics.describe(), flush=True)

    with one_line_errors(args.verbose):
        run_as_asked(_spark(args, settings), spec, args.stage, args, emit)
    return 0


def cmd_tables(args: argparse.Namespace, settings: Settings) -> int:
    root = _root(args, settings)
    infos = _jvm_free(args, lambda: describe_all_local(root), root)
    if infos is None:
        with one_line_errors(args.verbose):
            infos = describe_all(_spark(args, settings), root)
    if not infos:
        print(f"no Delta tables under {root} (set the warehouse with --root or --set warehouse=...)")
        return 0
    header = ("name", "kind", "version", "rows", "stream time")
    _print_rows(header, [(i.name, i.kind, i.version, i.rows, i.stream_time) for i in infos], args)
    return 0


def cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    root = _root(args, settings)
    found = _jvm_free(args, lambda: _sql_local(args.query, root, args.limit), root)
    if found is not None:
        columns, rows = found
        _print_rows(columns, rows[: args.limit], args, more=len(rows) > args.limit)
        return 0
    spark = _spark(args, settings)
    with one_line_errors(args.verbose):
        register_all(spark, root)
        _print_frame(spark.sql(args.query), args)
    return 0


def _sql_local(query: str, root: str, limit: int) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``query`` with DataFusion over every table under ``root`` (stores as their versions); at most
    ``limit + 1`` rows.

    Raises:
        EngineUnsupportedError: a table or the statement DataFusion cannot take (Spark runs it then).
        InvalidInputError: the statement names a table that does not exist (one line, listing those that do).
    """
    paths = find_local_tables(root)
    for name in paths:
        if re.search(rf"\b{re.escape(name)}_as_of\s*\(", query, re.IGNORECASE):
            raise EngineUnsupportedError(f"{name}_as_of(t) is a Spark SQL table function")
    tables, views = {}, []
    for name, path in paths.items():
        table = open_table(path)
        if table.metadata().configuration.get(KIND_PROPERTY) == "versioned_store":
            reader = StoreReader(path)
            raw = f"_lh_raw_{name.lower()}"
            tables[raw] = reader.table
            views.append(f'"{name.lower()}" AS (SELECT * FROM ({reader.sql(raw)}) AS v)')
        else:
            tables[name.lower()] = table
    statement = query.strip().rstrip(";")
    if views:
        with_clause = re.match(r"(?is)\s*WITH\s+", statement)
        statement = (
            f"WITH {', '.join(views)}, {statement[with_clause.end() :]}"
            if with_clause
            else f"WITH {', '.join(views)} {statement}"
        )
    try:
        result = run_sql(tables, statement, max_rows=limit + 1)
    except Exception as error:  # deltalake's DeltaError: DataFusion's planning and execution errors
        message = first_line(error)
        missing = re.search(r"table '(?:[^'.]*\.)*([^'.]+)' not found", message)
        if missing:
            raise _no_such_table(missing.group(1), root, paths) from None
        raise EngineUnsupportedError(f"DataFusion cannot run it ({message})") from None
    return result.column_names, list(zip(*(c.to_pylist() for c in result.columns), strict=True))


def cmd_store(args: argparse.Namespace, settings: Settings) -> int:
    root = _root(args, settings)
    path = _store_path(args.store, root)
    if args.action == "sql-view":
        print(_sql_view(args.store, path))
        return 0
    reader = _jvm_free(args, lambda: read_store(path), root)
    if reader is not None:
        _store_local(args, reader)
        return 0
    spark = _spark(args, settings)
    with one_line_errors(args.verbose):
        store = VersionedStore.open(spark, path)
        if args.action == "get":
            at = None if args.as_of is None else parse_time(args.as_of)
            record = store.get(_key(args.key), as_of=at)
            _print_record(store.settings.values, record, args)
        elif args.action == "history":
            frame = store.history(None if args.key is None else _key(args.key))
            _print_frame(frame.select(*_shown(frame.columns, args)), args)
        else:
            frame = store.as_of(parse_time(args.time)).orderBy(*store.settings.keys)
            _print_frame(frame.select(*_shown(frame.columns, args)), args)
    return 0


def _store_local(args: argparse.Namespace, reader: StoreReader) -> None:
    """``store get|history|as-of`` through delta-rs."""
    if args.action == "get":
        at = None if args.as_of is None else parse_time(args.as_of)
        _print_record(reader.settings.values, reader.get(_key(args.key), as_of=at), args)
        return
    if args.action == "history":
        found = reader.history(None if args.key is None else _key(args.key))
    else:
        found = reader.as_of(parse_time(args.time))
    found = found.select(_shown(found.column_names, args))
    rows = [tuple(r.values()) for r in found.slice(0, args.limit + 1).to_pylist()]
    _print_rows(found.column_names, rows[: args.limit], args, more=len(rows) > args.limit)


def _sql_view(name: str, path: str) -> str:
    """The statement of a store's versions for any SQL engine, with its semantics and how to point it at
    the table."""
    reader = read_store(path)
    return "\n".join(
        [
            f"-- The versions of the lakehouse versioned store {name} ({path}), pending rows resolved.",
            "-- Each row is one version of its key, valid in [valid_from, valid_to): valid_from inclusive,",
            "-- valid_to exclusive, NULL for the latest version; tombstone = true marks a deletion.",
            f"-- Stream time minus the history retention ({reader.settings.history_retention}) is the",
            "-- oldest time a read may ask for; an older as-of read is answered by the latest version only.",
            f"-- Replace {name}_raw with your engine's reference to the Delta table at the path above,",
            f"-- e.g. delta_scan('{path}') in DuckDB, delta.`{path}` in Spark SQL (with backticks for the",
            "-- double quotes).",
            f"CREATE VIEW {name} AS",
            reader.sql(f"{name}_raw", region=False) + ";",
        ]
    )


_SYSTEM_COLUMNS = ("segment", "tombstone")


def _shown(columns: Sequence[str], args: argparse.Namespace) -> list[str]:
    """The columns to print: without the system columns unless ``--system-columns``."""
    return [c for c in columns if args.system_columns or c not in _SYSTEM_COLUMNS]


def _print_record(values: Sequence[str], record: VersionedRecord | None, args: argparse.Namespace) -> None:
    rows = [] if record is None else [(*record.value.values(), record.valid_from, record.valid_to)]
    _print_rows((*values, "valid_from", "valid_to"), rows, args)


def _jvm_free(args: argparse.Namespace, read: Callable[[], T], root: str) -> T | None:
    """``read()`` through delta-rs, or None (after one line on stderr saying why) when Spark must do it:
    delta-rs cannot read a table right, the statement needs Spark, or the warehouse is not local."""
    if args.spark or not is_local(root):
        return None
    try:
        return read()
    except EngineUnsupportedError as error:
        print(f"lakehouse: reading with Spark: {error}", file=sys.stderr, flush=True)
        return None


def _store_path(name: str, root: str) -> str:
    """A table name of ``lakehouse tables`` (under ``root``), or a path.

    Raises:
        InvalidInputError: no table of that name (one line naming the warehouse and the tables there).
    """
    if "/" in name:
        return name
    if not is_local(root):
        return f"{root.rstrip('/')}/{name}"
    tables = find_local_tables(root)
    if name not in tables:
        raise _no_such_table(name, root, tables)
    return tables[name]


def _no_such_table(name: str, root: str, tables: Mapping[str, str]) -> InvalidInputError:
    there = ", ".join(tables) if tables else "none"
    return InvalidInputError(f"no table {name!r} in the warehouse {root}; tables there: {there}")


def _key(text: str) -> Any:
    """A key from the command line: ``EUR``, or ``a,b`` for a store keyed by two columns."""
    parts = tuple(text.split(","))
    return parts[0] if len(parts) == 1 else parts


def parse_time(text: str) -> datetime:
    """An ISO-8601 time; without an offset it is UTC.

    Raises:
        InvalidInputError: not an ISO-8601 time.
    """
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"expected an ISO time such as 2024-01-01T00:10:00, got {text!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _print_frame(frame: DataFrame, args: argparse.Namespace) -> None:
    """Print at most ``--limit`` rows of ``frame`` (only those rows reach the driver)."""
    rows = [tuple(r) for r in frame.limit(args.limit + 1).collect()]
    _print_rows(frame.columns, rows[: args.limit], args, more=len(rows) > args.limit)


def _print_rows(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], args: argparse.Namespace, more: bool = False
) -> None:
    """Print rows in ``--format`` (``table``: aligned with a row count; ``json``: one object a line;
    ``csv``: a header and rows); times carry their zone in every format."""
    form = getattr(args, "format", "table")
    if form == "json":
        for row in rows:
            print(json.dumps({c: _json_value(v) for c, v in zip(columns, row, strict=True)}))
    elif form == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else _cell(v) for v in row] for row in rows])
    else:
        for line in format_table(columns, rows):
            print(line)
    if more:
        print(
            f"(first {args.limit} rows; --limit N shows more)", file=sys.stderr if form != "table" else None
        )


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Rows as aligned text columns under a header, and a row count."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    line = "  ".join
    out = [line(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    out.append(line("-" * w for w in widths))
    out += [line(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    out.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
