"""The ``lakehouse`` command. Each subcommand is a small function; ``--help`` works everywhere.

Every command says first, on stderr, what it is about to do and with which warehouse and profile; what
is checkable without a JVM (settings, ``--conf`` keys, landing folders, a Kafka broker) is checked before
Spark starts. A lakehouse error ends the command with one line and exit code 2, any other error with one
line naming it and exit code 1; ``--verbose`` shows Spark's whole log and full errors instead.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from lakehouse.config import Settings, load_settings, profile_name, warehouse_uri
from lakehouse.errors import InvalidInputError, LakehouseError, first_line
from lakehouse.options import Command, add_assignment_options, add_key_values, add_state_commands
from lakehouse.paths import is_local, local_path

# Parsing and the first line import nothing heavy: each command imports what it needs when it runs.


def _cmd_version(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.doctor import versions

    for name, version in versions().items():
        print(f"{name}: {version}")
    return 0


def _cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.doctor import run_doctor, run_table_doctor
    from lakehouse.session import get_spark

    if args.table:
        return run_table_doctor(get_spark(dict(args.conf), settings), args.table)
    run_doctor(get_spark(dict(args.conf), settings))
    return 0


def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.demo import STEPS, demo_spec, run_demo
    from lakehouse.demo_data import DemoSize
    from lakehouse.progress import progress
    from lakehouse.session import get_spark

    spec = demo_spec(warehouse_uri(settings), args.root, args.config)
    if args.fresh:
        what = f"the demo's tables, landing folders and checkpoints under {spec.root}"
        _delete(spec.root, what, args.yes, settings, dict(args.conf))
    spark = get_spark(dict(args.conf), settings)
    size = DemoSize(rate_updates=args.rate_updates, transactions=args.transactions)
    with progress(len(STEPS)) as bar:
        run_demo(spark, spec, size, echo=bar.echo, step=bar.step)
    return 0


def _cmd_assign(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.assignment.job import config_from_args, run_assignment
    from lakehouse.session import get_spark

    for line in run_assignment(get_spark(dict(args.conf), settings), args.root, config_from_args(args)):
        print(line)
    return 0


def _cmd_failover_drill(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.replica.failover import generated_drill
    from lakehouse.session import get_spark

    spark = get_spark(dict(args.conf), settings)
    root = args.root or f"{warehouse_uri(settings)}/failover-drill"
    generated_drill(spark, root, args.keys, args.batches)
    return 0


def _cmd_quality(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.progress import progress
    from lakehouse.quality import run_quality
    from lakehouse.session import get_spark

    spark = get_spark(dict(args.conf), settings)
    with progress(len(args.tables) or None) as bar:
        report = run_quality(
            spark,
            warehouse_uri(settings),
            args.tables or None,
            results_path=args.results,
            docs_dir=args.docs,
            full=args.full,
            step=bar.step,
        )
        for line in report.lines():
            bar.echo(line)
    return 0 if report.success else 1


def _add_quality_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    quality = commands.add_parser(
        "quality",
        help="run the data-quality suite of each state table; exit 1 if any expectation fails",
        description="Run the Great Expectations suite of each lakehouse state table, append the results "
        "to a Delta table, build Data Docs, print one verdict per table; exit 1 if any expectation fails.",
    )
    quality.add_argument(
        "tables",
        nargs="*",
        metavar="TABLE",
        help="table paths (relative ones may be under the warehouse); "
        "default: every lakehouse table under the warehouse",
    )
    quality.add_argument("--results", help="Delta results table (default: <warehouse>/quality/results)")
    quality.add_argument(
        "--docs",
        help="Data Docs folder, local (default: <warehouse>/quality/docs; for a warehouse on object storage "
        "./quality-docs/<bucket>/<path>)",
    )
    quality.add_argument(
        "--full",
        action="store_true",
        help="check whole tables (default: a versioned store is checked incrementally after a passed check)",
    )
    quality.set_defaults(run=_cmd_quality)


def _cmd_clean(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse.pipeline.spec import load_pipeline

    spec = load_pipeline(args.pipeline, warehouse_uri(settings), args.config)
    what = f"pipeline {spec.name!r}'s tables and checkpoints (and what else is) under {spec.root}"
    _delete(spec.root, what, args.yes, settings, dict(args.conf))
    return 0


def _delete(folder: str, what: str, yes: bool, settings: Settings, conf: dict[str, str]) -> None:
    """Delete ``folder`` and all it holds after asking on the terminal (``yes``: without asking).

    A local folder (a path or a ``file:`` URI) is deleted without a JVM; a folder of any other URI
    (``s3a://bucket/demo``) through Hadoop's file system of a Spark session (the profile's storage settings
    and credentials), which starts once the question is answered.

    Raises:
        InvalidInputError: there is no terminal to ask and not ``yes``.
    """
    if not is_local(folder):
        if _confirmed(folder, what, yes):
            _delete_uri(folder, settings, conf)
        return
    path = Path(local_path(folder))
    if not path.exists():
        print(f"nothing to delete: {path} does not exist", file=sys.stderr)
    elif _confirmed(str(path), what, yes):
        shutil.rmtree(path)
        print(f"deleted {path}", file=sys.stderr)


def _confirmed(folder: str, what: str, yes: bool) -> bool:
    """Whether to delete: ``yes``, or the answer on the terminal (no terminal: refused)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise InvalidInputError(f"not deleting {folder} without --yes (no terminal to ask)")
    if input(f"Delete {what}? [y/N] ").strip().lower() in ("y", "yes"):
        return True
    print("nothing deleted", file=sys.stderr)
    return False


def _delete_uri(folder: str, settings: Settings, conf: dict[str, str]) -> None:
    """Delete the folder at the URI ``folder`` through Hadoop's file system, saying what it did."""
    from lakehouse.catalog import hadoop_fs, hadoop_path
    from lakehouse.session import get_spark

    print(f"starting Spark to delete {folder} through its file system", file=sys.stderr, flush=True)
    spark = get_spark(conf, settings)
    fs, path = hadoop_fs(spark, folder), hadoop_path(spark, folder)
    if not fs.exists(path):
        print(f"nothing to delete: {folder} does not exist", file=sys.stderr)
        return
    fs.delete(path, True)
    print(f"deleted {folder}", file=sys.stderr)


def _add_clean_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    clean = commands.add_parser(
        "clean",
        help="start a pipeline over: delete the folder of its tables and checkpoints (asks first)",
        description="Delete a pipeline's root folder (default <warehouse>/<name>: its tables, streaming "
        "checkpoints and whatever else lies under it, e.g. the demo's landing folders), so the next run "
        "starts over. Asks on the terminal first; without a terminal it needs --yes. A root on object "
        "storage (s3a://...) is deleted through Spark (it starts after the question).",
    )
    clean.add_argument("--pipeline", required=True, help="the [pipeline.<name>] job spec of the config")
    clean.add_argument("--yes", action="store_true", help="delete without asking")
    clean.set_defaults(run=_cmd_clean)


def _cmd_kafka(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse import kafka_broker

    if args.action == "start":
        broker = kafka_broker.start_broker(args.folder, settings.ivy_cache, args.port)
        print(f"kafka broker on {broker.bootstrap_servers} (pid {broker.pid}, files in {broker.folder})")
    elif args.action == "stop":
        print("stopped" if kafka_broker.stop_broker(args.folder) else f"no broker of {args.folder} running")
    else:
        from lakehouse.demo_data import DemoSize
        from lakehouse.kafka_demo import produce_demo
        from lakehouse.session import get_spark

        spark = get_spark(dict(args.conf), settings)
        size = DemoSize(rate_updates=args.rate_updates, transactions=args.transactions)
        for topic, count in produce_demo(spark, args.bootstrap_servers, size).items():
            print(f"{topic}: {count} records sent")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lakehouse`` command."""
    parser = argparse.ArgumentParser(
        prog="lakehouse",
        description="Kafka Streams' state semantics on Delta Lake.",
        epilog="Settings precedence: defaults < conf profile < LAKEHOUSE_<KEY> env < --set.",
    )
    parser.add_argument("--profile", help="configuration profile (default: $LAKEHOUSE_PROFILE or 'local')")
    parser.add_argument("--config", help="TOML configuration file (default: conf/lakehouse.toml)")
    add_key_values(
        parser, "--set", "KEY=VALUE", "override a setting of the profile (repeatable)", "overrides"
    )
    add_key_values(
        parser, "--conf", "spark.KEY=VALUE", "extra Spark conf for the embedded session (repeatable)"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's whole log (INFO lines, known harmless warnings) and errors in full",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    version = commands.add_parser(
        "version", help="print the versions of lakehouse, Python, PySpark and Delta"
    )
    version.set_defaults(run=_cmd_version)

    doctor = commands.add_parser(
        "doctor", help="resolve the Delta jars, start Spark, and exercise a scratch Delta table"
    )
    doctor.add_argument("table", nargs="?", help="a Delta table's path: report its health instead")
    doctor.set_defaults(run=_cmd_doctor)

    demo = commands.add_parser(
        "demo",
        help="land generated currency rates and transactions, run the demo pipeline twice, summarize",
        description="KIP-889's currency-rate story as the pipeline the jobs run: land generated rate updates "
        "and transactions in [pipeline.demo]'s landing folders in two parts, run every stage after each "
        "(the second run reads the new files only), then a failover drill, a summary and the quality suites.",
    )
    demo.add_argument(
        "--root", help="folder of the demo's landing folders and tables (default: [pipeline.demo]'s root)"
    )
    demo.add_argument("--rate-updates", type=int, default=40, help="currency-rate updates to generate")
    demo.add_argument("--transactions", type=int, default=200, help="transactions to generate")
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="start over: delete the demo's folder (its tables, landing folders, checkpoints) first; asks on "
        "the terminal unless --yes",
    )
    demo.add_argument("--yes", action="store_true", help="with --fresh: delete without asking")
    demo.set_defaults(run=_cmd_demo)

    assign = commands.add_parser(
        "assign", help="assign tasks for the latest subscriptions and write the generation to Delta"
    )
    add_assignment_options(assign)
    assign.set_defaults(run=_cmd_assign)

    drill = commands.add_parser(
        "failover-drill",
        help="lose an active client; promote its standby replica; compare catch-up with a cold restore",
    )
    drill.add_argument("--root", help="folder of the drill's tables (default: <warehouse>/failover-drill)")
    drill.add_argument("--keys", type=int, default=1000, help="keys of the generated versioned store")
    drill.add_argument("--batches", type=int, default=6, help="batches put into the store (>= 3)")
    drill.set_defaults(run=_cmd_failover_drill)
    _add_quality_parser(commands)
    add_state_commands(commands)
    _add_clean_parser(commands)

    kafka = commands.add_parser(
        "kafka", help="a local one-node Kafka broker (KRaft, 127.0.0.1) and the demo's data sent to it"
    )
    kafka.add_argument("action", choices=["start", "stop", "produce-demo"])
    kafka.add_argument("--folder", default="kafka", help="folder of the broker's files (default: kafka)")
    kafka.add_argument("--port", type=int, default=9092, help="broker port; the controller uses port+1")
    kafka.add_argument("--bootstrap-servers", default="127.0.0.1:9092", help="for produce-demo")
    kafka.add_argument("--rate-updates", type=int, default=40, help="produce-demo: rate updates")
    kafka.add_argument("--transactions", type=int, default=200, help="produce-demo: transactions")
    kafka.set_defaults(run=_cmd_kafka)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lakehouse`` console script; returns the exit code.

    0: done; 1: an unexpected error (one line naming it; ``--verbose`` raises it with its traceback);
    2: a lakehouse error (bad settings, input or state: one line); 130: interrupted.
    """
    args = build_parser().parse_args(argv)
    verbose = bool(getattr(args, "verbose", False))
    try:
        overrides = dict(args.overrides)
        if verbose:
            overrides.setdefault("quiet", "false")
        settings = load_settings(args.profile, args.config, overrides)
        _preflight(args, settings)
        _intro(args, settings)
        run: Command = args.run
        return run(args, settings)
    except LakehouseError as error:
        print(f"lakehouse: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lakehouse: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if verbose:
            raise
        print(f"lakehouse: error: {_describe(error)} (--verbose shows the full error)", file=sys.stderr)
        return 1


#: What each command is about to do, as its first line says (commands not listed say nothing first).
_INTROS = {
    "doctor": "starting Spark to check Java, Spark and Delta",
    "demo": "starting Spark to run the demo pipeline",
    "assign": "starting Spark to assign tasks",
    "failover-drill": "starting Spark for a failover drill",
    "quality": "starting Spark to check the tables' data quality",
    "tables": "reading the tables",
    "sql": "reading the tables",
    "store": "reading a versioned store",
}


def _preflight(args: argparse.Namespace, settings: Settings) -> None:
    """Check what the command needs that is checkable without a JVM (before its first line)."""
    from lakehouse.preflight import check_spark_conf, preflight_run, require_broker

    check_spark_conf(dict(args.conf))
    if args.command == "run":
        from lakehouse.options import check_continuous_options
        from lakehouse.pipeline.order import stages_of
        from lakehouse.pipeline.spec import load_pipeline

        check_continuous_options(args)
        spec = load_pipeline(args.pipeline, warehouse_uri(settings), args.config, dict(args.spec))
        preflight_run(spec, stages_of(args.stage, spec), args.continuous)
    elif args.command == "kafka" and args.action == "produce-demo":
        require_broker(args.bootstrap_servers)


def _intro(args: argparse.Namespace, settings: Settings) -> None:
    """The command's first line, on stderr (stdout may carry JSON lines): what it does, where."""
    intro = _INTROS.get(args.command)
    if args.command == "kafka" and args.action == "produce-demo":
        intro = f"starting Spark to send the demo's data to Kafka at {args.bootstrap_servers}"
    elif args.command == "kafka" and args.action == "start":
        intro = f"starting a Kafka broker on port {args.port} (files in {args.folder})"
    elif args.command == "run":
        intro = f"starting Spark to run {args.stage} of pipeline {args.pipeline}"
        if args.continuous:
            until = "until Ctrl-C or SIGTERM" if args.duration is None else f"for {args.duration}"
            intro += f" always on, {until}"
    if intro is None:
        return
    root = getattr(args, "root", None)  # the commands with --root act there, not on the warehouse
    place = f"root {root}" if root else f"warehouse {warehouse_uri(settings)}"
    where = f"{place}, profile {profile_name(args.profile)}"
    print(f"lakehouse {args.command}: {intro} ({where})", file=sys.stderr, flush=True)


def _describe(error: BaseException) -> str:
    """An unexpected error in one line: its type and its first line (a Java error's own, for Py4J's)."""
    java = getattr(error, "java_exception", None)
    return f"{type(error).__name__}: {first_line(java if java is not None else error)}"


if __name__ == "__main__":
    sys.exit(main())
