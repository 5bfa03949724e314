"""The ``lakehouse`` command. Each subcommand is a small function; ``--help`` works everywhere."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from lakehouse.assignment.job import add_arguments as add_assign_arguments
from lakehouse.assignment.job import config_from_args, run_assignment
from lakehouse.config import Settings, load_settings
from lakehouse.demo import demo_spec, run_demo
from lakehouse.demo_data import DemoSize
from lakehouse.doctor import run_doctor, run_table_doctor, versions
from lakehouse.errors import LakehouseError
from lakehouse.quality import run_quality
from lakehouse.replica.failover import generated_drill
from lakehouse.session import get_spark, warehouse_uri
from lakehouse.state_commands import add_commands as add_state_commands
from lakehouse.state_commands import key_value as _key_value

Command = Callable[[argparse.Namespace, Settings], int]


def _cmd_version(args: argparse.Namespace, settings: Settings) -> int:
    for name, version in versions().items():
        print(f"{name}: {version}")
    return 0


def _cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    if args.table:
        return run_table_doctor(get_spark(dict(args.conf), settings), args.table)
    run_doctor(get_spark(dict(args.conf), settings))
    return 0


def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    spec = demo_spec(warehouse_uri(settings), args.root, args.config)
    spark = get_spark(dict(args.conf), settings)
    run_demo(spark, spec, DemoSize(rate_updates=args.rate_updates, transactions=args.transactions))
    return 0


def _cmd_assign(args: argparse.Namespace, settings: Settings) -> int:
    for line in run_assignment(get_spark(dict(args.conf), settings), args.root, config_from_args(args)):
        print(line)
    return 0


def _cmd_failover_drill(args: argparse.Namespace, settings: Settings) -> int:
    spark = get_spark(dict(args.conf), settings)
    root = args.root or f"{warehouse_uri(settings)}/failover-drill"
    generated_drill(spark, root, args.keys, args.batches)
    return 0


def _cmd_quality(args: argparse.Namespace, settings: Settings) -> int:
    spark = get_spark(dict(args.conf), settings)
    report = run_quality(
        spark,
        warehouse_uri(settings),
        args.tables or None,
        results_path=args.results,
        docs_dir=args.docs,
        full=args.full,
    )
    for line in report.lines():
        print(line)
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
    quality.add_argument("--docs", help="Data Docs folder, local (default: <warehouse>/quality/docs)")
    quality.add_argument(
        "--full",
        action="store_true",
        help="check whole tables (default: a versioned store is checked incrementally after a passed check)",
    )
    quality.set_defaults(run=_cmd_quality)


def _cmd_kafka(args: argparse.Namespace, settings: Settings) -> int:
    from lakehouse import kafka_broker

    if args.action == "start":
        broker = kafka_broker.start_broker(args.folder, settings.ivy_cache, args.port)
        print(f"kafka broker on {broker.bootstrap_servers} (pid {broker.pid}, files in {broker.folder})")
    elif args.action == "stop":
        print("stopped" if kafka_broker.stop_broker(args.folder) else f"no broker of {args.folder} running")
    else:
        from lakehouse.kafka_demo import produce_demo

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
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="override a setting of the profile (repeatable)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        type=_key_value,
        default=[],
        metavar="spark.KEY=VALUE",
        help="extra Spark conf for the embedded session (repeatable)",
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
    demo.set_defaults(run=_cmd_demo)

    assign = commands.add_parser(
        "assign", help="assign tasks for the latest subscriptions and write the generation to Delta"
    )
    add_assign_arguments(assign)
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
    """Entry point of the ``lakehouse`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args.profile, args.config, dict(args.overrides))
        run: Command = args.run
        return run(args, settings)
    except LakehouseError as error:
        print(f"lakehouse: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
