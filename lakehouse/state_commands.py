"""The ``lakehouse`` subcommands over pipelines and state tables: ``run``, ``tables``, ``sql``, ``store``.

Each is a small function of the parsed arguments and the settings, added to the parser by
:func:`add_commands`. Spark errors become one line (``lakehouse: error: ...``) unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.logger import PySparkLogger
from pyspark.sql import DataFrame, SparkSession

from lakehouse.catalog import find_tables
from lakehouse.config import Settings
from lakehouse.errors import InvalidInputError, LakehouseError
from lakehouse.pipeline import load_pipeline, run_pipeline, stage_names
from lakehouse.pipeline.metrics import BatchMetrics
from lakehouse.session import get_spark, warehouse_uri
from lakehouse.tables import describe_all, register_all
from lakehouse.versioned.store import VersionedStore

DEFAULT_LIMIT = 100
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


def _cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_pipeline(args.pipeline, warehouse_uri(settings), args.config, dict(args.spec))

    def emit(metrics: BatchMetrics) -> None:
        print(metrics.to_json() if args.json else metrics.describe(), flush=True)

    with one_line_errors(args.verbose):
        run_pipeline(_spark(args, settings), spec, args.stage, emit)
    return 0


def _cmd_tables(args: argparse.Namespace, settings: Settings) -> int:
    with one_line_errors(args.verbose):
        infos = describe_all(_spark(args, settings), _root(args, settings))
    header = ("name", "kind", "version", "rows", "stream time")
    rows = [(i.name, i.kind, i.version, i.rows, i.stream_time) for i in infos]
    for line in format_table(header, rows):
        print(line)
    return 0


def _cmd_sql(args: argparse.Namespace, settings: Settings) -> int:
    spark = _spark(args, settings)
    with one_line_errors(args.verbose):
        register_all(spark, _root(args, settings))
        _print_frame(spark.sql(args.query), args.limit)
    return 0


def _cmd_store(args: argparse.Namespace, settings: Settings) -> int:
    spark = _spark(args, settings)
    with one_line_errors(args.verbose):
        store = VersionedStore.open(spark, _store_path(spark, args.store, _root(args, settings)))
        if args.action == "get":
            at = None if args.as_of is None else parse_time(args.as_of)
            record = store.get(_key(args.key), as_of=at)
            rows = [] if record is None else [(*record.value.values(), record.valid_from, record.valid_to)]
            columns = (*store.settings.values, "valid_from", "valid_to")
            for line in format_table(columns, rows):
                print(line)
        elif args.action == "history":
            _print_frame(store.history(None if args.key is None else _key(args.key)), args.limit)
        else:
            _print_frame(store.as_of(parse_time(args.time)).orderBy(*store.settings.keys), args.limit)
    return 0


def _store_path(spark: SparkSession, name: str, root: str) -> str:
    """A table name of ``lakehouse tables`` (under ``root``), or a path."""
    if "/" in name:
        return name
    tables = find_tables(spark, root)
    if name not in tables:
        raise InvalidInputError(f"no table {name!r} under {root} (see `lakehouse tables`)")
    return tables[name]


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


def _print_frame(frame: DataFrame, limit: int) -> None:
    """Print at most ``limit`` rows of ``frame`` as a table (only those rows reach the driver)."""
    rows = [tuple(r) for r in frame.limit(limit + 1).collect()]
    for line in format_table(frame.columns, rows[:limit]):
        print(line)
    if len(rows) > limit:
        print(f"(first {limit} rows; --limit N shows more)")


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
        return value.isoformat(sep=" ")
    return str(value)


def add_commands(commands: Any) -> None:
    """Add ``run``, ``tables``, ``sql`` and ``store`` to the ``lakehouse`` subparsers."""
    run = commands.add_parser("run", help="run a pipeline stage (or all) over the input that is new")
    run.add_argument("stage", choices=stage_names(), help="the stage, or all of them in order")
    run.add_argument("--pipeline", required=True, help="the [pipeline.<name>] job spec of the config")
    run.add_argument(
        "--spec",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="override a key of the job spec (repeatable)",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="print one JSON line per micro-batch (and per stage with nothing new) on stdout",
    )
    run.set_defaults(run=_cmd_run)

    tables = commands.add_parser("tables", help="list every table under the warehouse with its state")
    tables.set_defaults(run=_cmd_tables)

    sql = commands.add_parser("sql", help="run one SQL query with every table under the warehouse registered")
    sql.add_argument("query", help="the query; versioned stores also have <name>_as_of(TIMESTAMP)")
    sql.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="rows to print")
    sql.set_defaults(run=_cmd_sql)

    store = commands.add_parser("store", help="read a versioned store: get, history, as-of")
    actions = store.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser("get", help="the version of KEY now, or valid at --as-of (inclusive)")
    get.add_argument("store", help="table name (see `lakehouse tables`) or path")
    get.add_argument("key", help="the key (comma-separated for several key columns)")
    get.add_argument("--as-of", help="ISO time (UTC unless it has an offset)")
    history = actions.add_parser("history", help="stored versions of KEY (or every key)")
    history.add_argument("store", help="table name (see `lakehouse tables`) or path")
    history.add_argument("key", nargs="?", help="the key (default: every key)")
    as_of = actions.add_parser("as-of", help="every key's version valid at TIME")
    as_of.add_argument("store", help="table name (see `lakehouse tables`) or path")
    as_of.add_argument("time", help="ISO time (UTC unless it has an offset)")
    for sub in (get, history, as_of):
        sub.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="rows to print")
    store.set_defaults(run=_cmd_store)

    for parser in (run, tables, sql, get, history, as_of):
        # The global `lakehouse --verbose` also works here (SUPPRESS keeps this one from resetting it).
        parser.add_argument(
            "--verbose", action="store_true", default=argparse.SUPPRESS, help="same as lakehouse --verbose"
        )
    for parser in (tables, sql, get, history, as_of):
        parser.add_argument("--root", help="folder of the tables (default: the warehouse)")


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of a repeatable option, split (an argparse ``type``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()
