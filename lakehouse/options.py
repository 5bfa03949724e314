"""The options of the ``lakehouse`` command and of the jobs (argparse), light to import.

Parsing imports nothing heavy (Spark, Delta, pyarrow): a command's code is imported when it runs
(:func:`lazy`), so the command checks its arguments and prints its first line before any of them loads.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lakehouse.config import parse_duration
from lakehouse.errors import InvalidConfigError, InvalidInputError
from lakehouse.pipeline.order import stage_names

if TYPE_CHECKING:
    from lakehouse.config import Settings

#: A command: the parsed arguments and the settings -> the exit code.
Command = Callable[[argparse.Namespace, "Settings"], int]
#: Rows the reading commands print unless ``--limit``.
DEFAULT_LIMIT = 100
#: The trigger interval of a continuous run (``--continuous``) unless ``--trigger`` gives one.
DEFAULT_TRIGGER = timedelta(seconds=30)


def lazy(module: str, name: str) -> Command:
    """The command ``name`` of ``module``, imported when it runs."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        command: Command = getattr(importlib.import_module(module), name)
        return command(args, settings)

    return run


def add_state_commands(commands: Any) -> None:
    """Add ``run``, ``tables``, ``sql`` and ``store`` to the ``lakehouse`` subparsers."""
    run = commands.add_parser("run", help="run a pipeline stage (or all) over the input that is new")
    run.add_argument("stage", choices=stage_names(), help="the stage, or all of them in order")
    run.add_argument("--pipeline", required=True, help="the [pipeline.<name>] job spec of the config")
    add_key_values(run, "--spec", "KEY=VALUE", "override a key of the job spec (repeatable)")
    run.add_argument(
        "--json",
        action="store_true",
        help="print one JSON line per micro-batch (and per stage with nothing new) on stdout",
    )
    add_continuous_options(run)
    run.set_defaults(run=lazy("lakehouse.state_commands", "cmd_run"))

    tables = commands.add_parser(
        "tables", help="list every table under the warehouse with its state (no JVM for a local warehouse)"
    )
    tables.set_defaults(run=lazy("lakehouse.state_commands", "cmd_tables"))

    sql = commands.add_parser(
        "sql",
        help="run one SQL query with every table under the warehouse registered (stores as their versions)",
        description="DataFusion (delta-rs, no JVM) runs the query when it can; otherwise Spark does, saying "
        "so in one line (e.g. for <store>_as_of(TIMESTAMP), a Spark SQL table function).",
    )
    sql.add_argument("query", help="the query; versioned stores also have <name>_as_of(TIMESTAMP) (Spark)")
    sql.set_defaults(run=lazy("lakehouse.state_commands", "cmd_sql"))

    store = commands.add_parser("store", help="read a versioned store: get, history, as-of, sql-view")
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
    view = actions.add_parser(
        "sql-view", help="print the SQL of the store's versions, to paste into another engine"
    )
    view.add_argument("store", help="table name (see `lakehouse tables`) or path")
    view.add_argument("--root", help="folder of the tables (default: the warehouse)")
    store.set_defaults(run=lazy("lakehouse.state_commands", "cmd_store"))

    readers = (tables, sql, get, history, as_of)
    for sub in (history, as_of):
        sub.add_argument("--system-columns", action="store_true", help="also print segment and tombstone")
    for parser in readers:
        parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help="rows to print")
        parser.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output")
        parser.add_argument("--spark", action="store_true", help="read with Spark, not delta-rs")
    for parser in (run, view, *readers):
        # The global `lakehouse --verbose` also works here (SUPPRESS keeps this one from resetting it).
        parser.add_argument(
            "--verbose", action="store_true", default=argparse.SUPPRESS, help="same as lakehouse --verbose"
        )
    for parser in readers:
        parser.add_argument("--root", help="folder of the tables (default: the warehouse)")


def add_continuous_options(parser: argparse.ArgumentParser) -> None:
    """``--continuous``, ``--trigger`` and ``--for``: options of ``lakehouse run`` and of the jobs."""
    parser.add_argument(
        "--continuous",
        action="store_true",
        help="run always on: each streaming stage a long-lived query, maintenance between its micro-batches, "
        "until SIGTERM or Ctrl-C (the micro-batches in flight commit first)",
    )
    parser.add_argument(
        "--trigger",
        type=_duration("--trigger"),
        metavar="DURATION",
        help="with --continuous: a micro-batch every DURATION when there is new input (default 30s)",
    )
    parser.add_argument(
        "--for",
        dest="duration",
        type=_duration("--for"),
        metavar="DURATION",
        help="with --continuous: stop (cleanly) after DURATION, e.g. 10m",
    )


def check_continuous_options(args: argparse.Namespace) -> None:
    """Check the options of :func:`add_continuous_options` (before Spark starts).

    Raises:
        InvalidInputError: ``--trigger`` or ``--for`` without ``--continuous``.
    """
    if not args.continuous and (args.trigger is not None or args.duration is not None):
        raise InvalidInputError("--trigger and --for go with --continuous")


def _duration(option: str) -> Callable[[str], timedelta]:
    def parse(text: str) -> timedelta:
        try:
            return parse_duration(option, text)
        except InvalidConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def add_assignment_options(parser: argparse.ArgumentParser) -> None:
    """The assignment job's options (``lakehouse assign`` and ``jobs/assign.py``)."""
    parser.add_argument("--root", required=True, help="folder of the assignment store's tables")
    parser.add_argument("--standbys", type=int, help="num_standby_replicas (creates/checks the store)")
    parser.add_argument("--acceptable-recovery-lag", type=int, default=10_000)
    parser.add_argument("--max-warmup-replicas", type=int, default=2)
    parser.add_argument("--probing-interval-minutes", type=float, default=10.0)
    parser.add_argument("--tags", default="", help="rack-aware tag keys, highest precedence first: zone,rack")


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of a repeatable option, split (an argparse ``type``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def add_key_values(
    parser: argparse.ArgumentParser, flag: str, metavar: str, help: str, dest: str | None = None
) -> None:
    """A repeatable ``flag KEY=VALUE`` option: a list of ``(key, value)`` pairs, empty by default."""
    parser.add_argument(
        flag, dest=dest, action="append", type=key_value, default=[], metavar=metavar, help=help
    )
