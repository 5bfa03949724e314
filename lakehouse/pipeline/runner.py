"""Run a pipeline's stages: what ``lakehouse run`` and the ``jobs/`` entry points call.

:func:`run_pipeline` runs them once over what is new (a scheduled run); :func:`run_continuous` keeps them
running (always on): every streaming stage a long-lived query with a processing-time trigger, the others
(maintenance, assignment) between the queries' micro-batches, on their due rules, in the same process.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta

from delta.tables import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from lakehouse.catalog import path_exists
from lakehouse.commit_log import CONFLICTS
from lakehouse.errors import ConcurrentWriteError
from lakehouse.options import DEFAULT_TRIGGER, check_continuous_options
from lakehouse.pipeline import stages
from lakehouse.pipeline.metrics import BatchMetrics, Emit
from lakehouse.pipeline.order import ALL, ORDER, stages_of
from lakehouse.pipeline.spec import PipelineSpec
from lakehouse.pipeline.stream import AfterBatch, Continuous, Run, failed_stage_error

#: Each stage's function, in the order ``all`` runs them (:data:`~lakehouse.pipeline.order.ORDER`).
STAGES: dict[str, Callable[[Run], list[BatchMetrics]]] = {name: getattr(stages, name) for name in ORDER}
#: The stages that are streaming queries (long-lived in a continuous run); the others run between them.
STREAMING = ("materialize", "ingest", "enrich")
#: A continuous run looks at what maintenance is due at most this often (and at least once per trigger
#: interval): deciding reads the newest commits of five tables on the driver, next to the micro-batches.
MAINTENANCE_INTERVAL = timedelta(minutes=1)


def run_pipeline(
    spark: SparkSession,
    spec: PipelineSpec,
    stage: str = ALL,
    emit: Emit = lambda metrics: print(metrics.to_json(), flush=True),
    after_batch: AfterBatch | None = None,
) -> list[BatchMetrics]:
    """Run ``stage`` (or ``all``) of the pipeline once over the input that is new; returns the metrics.

    Each streaming stage processes the input its checkpoint has not seen, in micro-batches, and stops
    (``trigger(availableNow=True)``); ``emit`` gets each micro-batch's metrics as soon as it is done, and
    :meth:`BatchMetrics.nothing_new` for a stage that had nothing new (not in the list returned).

    Raises:
        LakehouseError: a bad spec or input (nothing of that micro-batch was marked done: re-run it).
    """
    run = Run(spark, spec, emit) if after_batch is None else Run(spark, spec, emit, after_batch)
    done: list[BatchMetrics] = []
    for name in stages_of(stage, spec):
        start = time.monotonic()
        metrics = STAGES[name](run)
        if not metrics:
            emit(BatchMetrics.nothing_new(spec.name, name, time.monotonic() - start))
        done += metrics
    return done


def run_continuous(
    spark: SparkSession,
    spec: PipelineSpec,
    stage: str = ALL,
    trigger: timedelta = DEFAULT_TRIGGER,
    emit: Emit = lambda metrics: print(metrics.to_json(), flush=True),
    stop: threading.Event | None = None,
    duration: timedelta | None = None,
) -> None:
    """Run ``stage`` (or ``all``) of the pipeline always on, until ``stop`` is set or ``duration`` passed.

    Every streaming stage (materialize, ingest, enrich) runs as a long-lived Structured Streaming query in
    this session, a micro-batch every ``trigger`` when its input has something new; a stage whose input
    does not exist yet (a landing folder nothing landed in, the tables ``enrich`` reads) starts once it
    does. Every ``trigger`` or :data:`MAINTENANCE_INTERVAL`, whichever is longer, between the queries'
    micro-batches (not blocking them), ``maintain`` runs the maintenance that is due and ``assign`` assigns
    a new subscription generation if there is one; a
    maintenance commit that loses a race with a micro-batch's writes nothing and is due again the next
    time (a micro-batch that loses one is run again, as in a scheduled run). ``emit`` gets each
    micro-batch's metrics as it commits (from the queries' threads, one at a time) and each maintenance
    run's.

    Stopping (``stop`` set, e.g. by :func:`stop_on_signals`, or ``duration`` over) lets the micro-batches
    in flight commit and Spark mark them done, then stops the queries: no micro-batch starts meanwhile, so
    the next start (scheduled or continuous) goes on from there.

    Raises:
        LakehouseError: a bad spec, or a stage's micro-batch failed (the queries are stopped first).
    """
    lock = threading.Lock()

    def emit_one(metrics: BatchMetrics) -> None:
        with lock:
            emit(metrics)

    continuous = Continuous(spark, f"{trigger.total_seconds():g} seconds")
    run = Run(spark, spec, emit_one, continuous=continuous)
    names = stages_of(stage, spec)
    waiting = [name for name in names if name in STREAMING]
    stop = stop or threading.Event()
    deadline = None if duration is None else time.monotonic() + duration.total_seconds()
    said_waiting: set[str] = set()
    next_maintenance = time.monotonic()
    try:
        while True:
            for name in list(waiting):
                if _can_start(run, name):
                    STAGES[name](run)
                    waiting.remove(name)
                elif name not in said_waiting:
                    said_waiting.add(name)
                    emit_one(BatchMetrics.nothing_new(spec.name, name))
            if time.monotonic() >= next_maintenance:
                next_maintenance = time.monotonic() + max(trigger, MAINTENANCE_INTERVAL).total_seconds()
                for name in names:
                    if name not in STREAMING and not stop.is_set():
                        _maintenance(run, name)
            _raise_failure(run, continuous)
            left = (
                trigger.total_seconds()
                if deadline is None
                else min(trigger.total_seconds(), deadline - time.monotonic())
            )
            if stop.wait(max(left, 0)) or (deadline is not None and time.monotonic() >= deadline):
                break
    finally:
        continuous.stop()
    _raise_failure(run, continuous)


def _can_start(run: Run, stage: str) -> bool:
    """Whether ``stage``'s input exists (a landing folder, a Delta source, the tables ``enrich`` reads)."""
    spec, spark = run.spec, run.spark
    if stage == "enrich":
        tables = spec.tables
        return DeltaTable.isDeltaTable(spark, tables.store) and DeltaTable.isDeltaTable(spark, tables.deduped)
    source = "changelog" if stage == "materialize" else "records"
    fmt, path = getattr(spec, f"{source}_format"), getattr(spec, source)
    return fmt == "kafka" or not path or path_exists(spark, path)


def _maintenance(run: Run, stage: str) -> None:
    """``stage`` (maintain, assign) once, its metrics emitted if it did something; a commit that lost a race
    with a micro-batch is left to the next time it is due (said in one metrics line)."""
    start = time.monotonic()
    try:
        STAGES[stage](replace(run, emit=lambda metrics: _did_something(metrics) and run.emit(metrics)))
    except (ConcurrentWriteError, *CONFLICTS) as error:
        lost = str(error).strip().splitlines()[0]
        run.emit(
            BatchMetrics(
                run.spec.name,
                stage,
                None,
                seconds=time.monotonic() - start,
                details={"conflict": lost},
                said=f"lost a race with a micro-batch, due again next time: {lost}",
            )
        )


def _did_something(metrics: BatchMetrics) -> bool:
    """Whether a maintenance run (maintain, assign) did anything: a continuous run says only those."""
    if metrics.stage == "assign":
        return not metrics.replay
    done = {key: value for key, value in metrics.details.items() if key != "skipped"}
    return done.get("optimized", "none") != "none" or len(done) > 1 or "optimized" not in done


def _raise_failure(run: Run, continuous: Continuous) -> None:
    failed = continuous.failure()
    if failed is None:
        return
    stage, error = failed
    if isinstance(error, StreamingQueryException):
        raise failed_stage_error(run, stage, error) from None
    raise error


def run_as_asked(
    spark: SparkSession, spec: PipelineSpec, stage: str, args: argparse.Namespace, emit: Emit | None = None
) -> None:
    """Run ``stage`` as the parsed options ask: once (:func:`run_pipeline`), or with ``--continuous``
    (:func:`add_continuous_options`) always on, stopped by SIGTERM or Ctrl-C (:func:`stop_on_signals`).

    Raises:
        InvalidInputError: ``--trigger`` or ``--for`` without ``--continuous`` (see
            :func:`check_continuous_options`: check it before Spark starts).
    """
    check_continuous_options(args)
    emitting = {} if emit is None else {"emit": emit}
    if not args.continuous:
        run_pipeline(spark, spec, stage, **emitting)
        return
    with stop_on_signals() as stop:
        trigger = args.trigger or DEFAULT_TRIGGER
        run_continuous(spark, spec, stage, trigger, stop=stop, duration=args.duration, **emitting)


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C) while the block runs (main thread only): a continuous
    run given it stops cleanly. The previous handlers are restored after the block."""
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
