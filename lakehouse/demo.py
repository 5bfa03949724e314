"""``lakehouse demo``: KIP-889's story end to end as the pipeline the jobs run, on generated data.

The generated currency-rate changelog and transactions (:mod:`lakehouse.demo_data`) land in the landing
folders of ``[pipeline.demo]`` in two parts, and after each part the pipeline runs every stage, as
``lakehouse run all --pipeline demo`` does (the second run reads the new files only): the rate updates go
into the versioned store, the transactions are deduplicated and joined with the rate valid at their time,
the store and the index are maintained, and a 6-client cluster gets an assignment generation (a client
leaves before the second). Then a failover drill of standby replicas on the landed rate updates, a summary
built from the two runs' metrics, and the data-quality suites of the pipeline's state tables.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from lakehouse.assignment.job import DEMO_CONFIG, write_demo_subscriptions
from lakehouse.assignment.store import AssignmentStore
from lakehouse.demo_data import FIRST_RUN_FRACTION, DemoSize, landing_parts, rate_updates, transactions
from lakehouse.errors import InvalidConfigError
from lakehouse.paths import is_local, resolve_path, table_name
from lakehouse.pipeline import BatchMetrics, PipelineSpec, load_pipeline, run_pipeline
from lakehouse.pipeline.sources import land_files
from lakehouse.quality import run_quality
from lakehouse.quality.enriched import mark_enriched
from lakehouse.replica.demo import demo_step as replica_demo_step
from lakehouse.summary import summary_lines

PIPELINE = "demo"
#: The client that leaves the demo's cluster before the second run.
LEAVES = "c5"
LANDING_FORMATS = ("json", "parquet")
#: Paths of the spec that ``--root`` moves along with the root when they are under the configured one.
_UNDER_ROOT = ("checkpoints", "records", "changelog", "assignment_root")
#: The steps of :func:`run_demo`, as it names them to its ``step`` callback.
STEPS = ("run 1", "run 2", "failover drill", "summary", "quality")


def demo_spec(warehouse: str, root: str | None = None, config: str | Path | None = None) -> PipelineSpec:
    """``[pipeline.demo]`` of the configuration file; with ``root``, its tables and checkpoints, and its
    landing folders and assignment store where they are under the configured root, moved to ``root``."""
    spec = load_pipeline(PIPELINE, warehouse, config)
    if root is None:
        return spec
    root = resolve_path(root).rstrip("/")
    moved = {
        key: root + path[len(spec.root) :]
        for key in _UNDER_ROOT
        if (path := getattr(spec, key)).startswith(f"{spec.root}/")
    }
    return replace(spec, root=root, **moved)


def run_demo(
    spark: SparkSession,
    spec: PipelineSpec,
    size: DemoSize | None = None,
    echo: Callable[[str], None] = print,
    step: Callable[[str], None] = lambda name: None,
) -> list[list[BatchMetrics]]:
    """Land the data generated at ``size`` (default :class:`DemoSize`) in ``spec``'s landing folders in two
    parts, run the pipeline after each, then the failover drill, the summary and the quality suites of the
    pipeline's state tables, printing what each did; ``step`` is told the name of each of these
    :data:`STEPS` steps as it starts (a progress bar).

    Landing is idempotent (a part landed before is not landed again), so re-running on the same root
    processes nothing new. Returns each run's metrics.

    Raises:
        InvalidConfigError: ``spec``'s sources are not landing folders of JSON or Parquet files, or it has
            no ``assignment_root``.
    """
    _check(spec)
    assignments = AssignmentStore.create(spark, spec.assignment_root, DEMO_CONFIG)
    runs = []
    for run, part in enumerate(demo_parts(spark, size or DemoSize()), start=1):
        step(f"run {run}")
        echo(f"[demo] run {run}: {land_part(spec, run, part)}")
        runs.append(demo_run(spark, spec, assignments, run, echo))
    step("failover drill")
    for line in replica_demo_step(spark, spec):
        echo(line)
    step("summary")
    # On a local root the commands to try read without a JVM.
    for line in summary_lines(
        runs, _tables(spec, assignments), _queries(spec, assignments), is_local(spec.root)
    ):
        echo(line)
    step("quality")
    for line in _quality(spark, spec, assignments):
        echo(line)
    return runs


def demo_parts(spark: SparkSession, size: DemoSize) -> list[tuple[DataFrame, DataFrame]]:
    """The generated (transactions, rate updates) of each of the demo's runs (lazy frames)."""
    return list(
        zip(
            landing_parts(transactions(spark, size), "timestamp", size),
            landing_parts(rate_updates(spark, size), "event_time", size),
            strict=True,
        )
    )


def demo_run(
    spark: SparkSession,
    spec: PipelineSpec,
    assignments: AssignmentStore,
    run: int,
    echo: Callable[[str], None] = print,
) -> list[BatchMetrics]:
    """The demo's ``run``-th run (from 1) after its part landed: subscribe generation ``run`` (a client
    leaves after the first) and run every stage of the pipeline; returns its metrics."""
    leave = (LEAVES,) if run > 1 else ()
    clients = write_demo_subscriptions(assignments, run, leave)
    left = "".join(f", {pid} left" for pid in leave)
    echo(f"[demo] run {run}: assignment generation {run} subscribed: {len(clients)} clients{left}")
    return run_pipeline(spark, spec, emit=lambda metrics: echo(metrics.describe()))


def _check(spec: PipelineSpec) -> None:
    for key in ("records_format", "changelog_format"):
        if getattr(spec, key) not in LANDING_FORMATS:
            raise InvalidConfigError(
                key, f"the demo lands files: one of {list(LANDING_FORMATS)}, got {getattr(spec, key)!r}"
            )
    if not spec.assignment_root:
        raise InvalidConfigError("assignment_root", "the demo subscribes a cluster to an assignment store")


def land_part(spec: PipelineSpec, run: int, part: tuple[DataFrame, DataFrame]) -> str:
    """Land the (transactions, rate updates) ``part`` of the demo's ``run``-th run; says what landed."""
    txns, rates = part
    name = f"part{run}"
    files = (
        land_files(txns, spec.records, spec.records_format, name),
        land_files(rates, spec.changelog, spec.changelog_format, name),
    )
    if not any(files):
        return (
            f"part {run} had landed before (this root ran the demo already): nothing new; "
            "to start over: lakehouse demo --fresh --yes (or lakehouse clean --pipeline demo --yes)"
        )
    span = f"the first {FIRST_RUN_FRACTION:.0%}" if run == 1 else "the rest"
    return (
        f"landed {span} of the generated time span: {files[0]} transaction files -> {spec.records}, "
        f"{files[1]} rate-update files -> {spec.changelog}"
    )


def _quality(spark: SparkSession, spec: PipelineSpec, assignments: AssignmentStore) -> list[str]:
    """Declare the enriched sink the as-of join's output, then check the pipeline's state tables; returns
    the verdict lines."""
    tables = spec.tables
    mark_enriched(
        spark,
        tables.enriched,
        record_id=spec.dedup_by,
        timestamp=spec.join_timestamp,
        valid_from=f"{spec.join_prefix}valid_from",
    )
    checked = [tables.store, tables.dedup_index, tables.enriched]
    checked += [assignments.subscriptions_path, assignments.assignment_path]
    return run_quality(spark, spec.root, checked).lines()


def _tables(spec: PipelineSpec, assignments: AssignmentStore) -> dict[str, str]:
    tables = spec.tables
    return {
        "transactions (landing)": spec.records,
        "rate updates (landing)": spec.changelog,
        "rates, versioned store": tables.store,
        "seen-ID index": tables.dedup_index,
        "duplicates quarantine": tables.quarantine,
        "deduplicated transactions": tables.deduped,
        "priced transactions (as-of join)": tables.enriched,
        "assignment subscriptions": assignments.subscriptions_path,
        "assignment": assignments.assignment_path,
        "streaming checkpoints": tables.checkpoints,
    }


def _queries(spec: PipelineSpec, assignments: AssignmentStore) -> Sequence[str]:
    """``lakehouse sql`` commands worth trying on the demo's tables, over the demo's root.

    They read without a JVM (delta-rs; ``--spark`` runs them in Spark). The store's name there is its
    versions, pending rows resolved, never its raw rows; the other tables are right as raw Delta tables
    (append-only sinks, quarantine and assignment history)."""
    tables, rate = spec.tables, f"{spec.join_prefix}rate"
    root = resolve_path(spec.root).rstrip("/")

    def name(table: str) -> str:  # a path or a URI under the root
        return table_name(resolve_path(table).removeprefix(f"{root}/").split("/"))

    quarantine = name(tables.quarantine)  # ``offset`` is a keyword of DataFusion's SQL: qualified
    statements = [
        f"SELECT currency, rate, valid_from, valid_to FROM {name(tables.store)} WHERE currency = 'EUR' "
        "ORDER BY valid_from",
        f"SELECT txn_id, timestamp, currency, amount, {rate}, amount * {rate} AS amount_usd "
        f"FROM {name(tables.enriched)} ORDER BY timestamp LIMIT 5",
        f"SELECT batch_id, txn_id, {quarantine}.offset, entry_offset FROM {quarantine} "
        "ORDER BY batch_id, txn_id LIMIT 5",
        f"SELECT generation, role, count(*) AS tasks FROM {name(assignments.assignment_path)} "
        "GROUP BY generation, role ORDER BY generation, role",
    ]
    return [f'lakehouse sql "{statement}" --root {shlex.quote(root)}' for statement in statements]
