"""Running one stage as a Structured Streaming query: ``trigger(availableNow=True)`` + ``foreachBatch``.

The query reads what its source has that the stage's checkpoint has not seen, in micro-batches, and stops.
Spark writes each micro-batch's offsets to the checkpoint *before* running it and marks it done *after*,
so a run killed anywhere re-runs its last micro-batch with the same batch id and the same records on
the next run. The stage's writes are keyed by that batch id (Delta ``txnAppId``/``txnVersion`` and the
state tables' own batch records), so the re-run leaves every table as one uninterrupted run would.

The same makes a lost race safe to retry: a micro-batch whose commit finds that another writer committed
to its table since the batch read it (``ConcurrentWriteError``: nothing of that commit was written) is
planned and run again against the new version, up to :data:`CONFLICT_RETRIES` times with a doubling wait.

In a continuous run (:class:`Continuous`) the query is long-lived instead: ``trigger(processingTime=...)``,
started and left running; :meth:`Continuous.stop` lets the micro-batches in flight commit, then stops it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from lakehouse.catalog import list_files, path_exists
from lakehouse.errors import ConcurrentWriteError, LakehouseError
from lakehouse.pipeline.freshness import Freshness
from lakehouse.pipeline.metrics import BatchMetrics, Emit
from lakehouse.pipeline.spec import PipelineSpec

#: Called after each micro-batch's commits, before Spark marks the batch done (crash-injection tests).
AfterBatch = Callable[[str, int], None]
#: Times a micro-batch that lost a commit race with another writer is run again before the stage fails.
CONFLICT_RETRIES = 3
#: Seconds before the first retry; each further retry waits twice as long (plus up to 50% jitter).
CONFLICT_BACKOFF_S = 1.0


#: Seconds :meth:`Continuous.stop` waits for the micro-batches in flight to be marked done before it stops.
STOP_TIMEOUT_S = 600.0


class StageFailedError(LakehouseError, RuntimeError):
    """A stage's streaming query failed for a reason that is not a lakehouse error."""


class StoppingError(RuntimeError):
    """A micro-batch began after a continuous run was told to stop: it ran nothing (the next start will)."""


class Continuous:
    """The long-lived queries of a continuous run, and the gate that stops them between micro-batches.

    A micro-batch is in flight from when Spark plans it (its offsets in the query's checkpoint) until Spark
    marks it done (its ``commits`` entry). :meth:`stop` lets those in flight run and be marked done; a
    micro-batch Spark plans after :meth:`stop` began runs nothing (:meth:`batch` fails its query with
    :class:`StoppingError` before it writes: the next start runs it, with the same batch id and records).
    """

    def __init__(self, spark: SparkSession, trigger: str) -> None:
        self.spark = spark
        self.trigger = trigger
        self._queries: dict[str, tuple[StreamingQuery, str, list[BaseException]]] = {}
        self._last_planned: dict[str, int] | None = None  # per stage, once stopping
        self._lock = threading.Lock()

    def started(
        self, stage: str, query: StreamingQuery, checkpoint: str, failures: list[BaseException]
    ) -> None:
        """Keep ``query``, the long-lived query of ``stage`` (``failures``: what its micro-batches raised)."""
        self._queries[stage] = (query, checkpoint, failures)

    def batch(self, stage: str, batch_id: int) -> None:
        """Check that micro-batch ``batch_id`` of ``stage`` may run (call it first).

        Raises:
            StoppingError: the run is stopping and Spark planned the batch after it began.
        """
        with self._lock:
            last = None if self._last_planned is None else self._last_planned.get(stage, -1)
        if last is not None and batch_id > last:
            raise StoppingError(f"{stage} batch {batch_id} not started: the run is stopping")

    def failure(self) -> tuple[str, BaseException | StreamingQueryException] | None:
        """The first stage whose query ended by itself, and why (a stage's own error, or Spark's)."""
        for stage, (query, _, failures) in self._queries.items():
            if query.isActive:
                continue
            real = [error for error in failures if not isinstance(error, StoppingError)]
            if real:
                return stage, real[0]
            error = query.exception()
            if error is not None and not failures:
                return stage, error
        return None

    def stop(self) -> None:
        """Let the micro-batches in flight run and Spark mark them done (up to :data:`STOP_TIMEOUT_S`),
        then stop every query; no micro-batch starts meanwhile."""
        with self._lock:
            if self._last_planned is None:
                self._last_planned = {
                    stage: _last_batch(self.spark, f"{checkpoint}/offsets")
                    for stage, (_, checkpoint, _) in self._queries.items()
                }
            last_planned = dict(self._last_planned)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for stage, (query, checkpoint, _) in self._queries.items():
            planned = last_planned[stage]
            while planned >= 0 and query.isActive and time.monotonic() < deadline:
                if path_exists(self.spark, f"{checkpoint}/commits/{planned}"):
                    break
                time.sleep(0.05)
            query.stop()


def _last_batch(spark: SparkSession, log: str) -> int:
    """The highest batch id in a checkpoint's ``offsets`` or ``commits`` log (-1: none)."""
    names = [status.getPath().getName() for status in list_files(spark, log)]
    return max((int(name) for name in names if name.isdigit()), default=-1)


@dataclass(frozen=True)
class Run:
    """What every stage of one run shares.

    Attributes:
        continuous: Set in a continuous run: each streaming stage starts a long-lived query there and
            returns at once (no metrics); None: each runs over what is new and stops.
        freshness: When the records this run ingested landed, for ``enrich``'s lag.
    """

    spark: SparkSession
    spec: PipelineSpec
    emit: Emit
    after_batch: AfterBatch = lambda stage, batch_id: None
    continuous: Continuous | None = None
    freshness: Freshness = field(default_factory=Freshness)


Handler = Callable[[DataFrame, int], BatchMetrics]


def run_stream(run: Run, stage: str, source: DataFrame, handle: Handler) -> list[BatchMetrics]:
    """Run ``handle`` on every micro-batch of ``source`` not yet done, then stop; returns their metrics.

    In a continuous run, start the query with ``run.continuous``'s processing-time trigger and return at
    once (no metrics: each micro-batch's are emitted as it commits).

    Raises:
        The exception ``handle`` raised (a lakehouse error stays itself), else :class:`StageFailedError`
        with the first line of Spark's.
    """
    done: list[BatchMetrics] = []
    failures: list[BaseException] = []

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        start = time.monotonic()
        try:
            if run.continuous is not None:
                run.continuous.batch(stage, batch_id)
            metrics, retries = _retrying_conflicts(lambda: handle(batch, batch_id))
            run.after_batch(stage, batch_id)
        except BaseException as error:
            failures.append(error)
            raise
        if retries:
            metrics = replace(metrics, details={**metrics.details, "conflict_retries": retries})
        metrics = replace(metrics, seconds=time.monotonic() - start)
        done.append(metrics)
        run.emit(metrics)

    checkpoint = run.spec.tables.checkpoint(stage)
    writer = (
        source.writeStream.queryName(f"{run.spec.name}_{stage}")
        .foreachBatch(each_batch)
        .option("checkpointLocation", checkpoint)
    )
    if run.continuous is not None:
        query = writer.trigger(processingTime=run.continuous.trigger).start()
        run.continuous.started(stage, query, checkpoint, failures)
        return []
    query = writer.trigger(availableNow=True).start()
    try:
        query.awaitTermination()
    except StreamingQueryException as error:
        if failures:
            raise failures[0] from None
        raise failed_stage_error(run, stage, error) from None
    return done


def failed_stage_error(run: Run, stage: str, error: StreamingQueryException) -> StageFailedError:
    """The error of ``stage``'s query failing for ``error`` (Spark's), in one line."""
    return StageFailedError(f"stage {stage} of pipeline {run.spec.name} failed: {_reason(error)}")


def _reason(error: StreamingQueryException) -> str:
    """The first line of Spark's error, plus its ``Reason:`` line if any (Kafka's source names the
    partition and both offsets there when a partition's offsets went backwards: a re-created topic)."""
    lines = [line.strip() for line in str(error).strip().splitlines()] or ["unknown error"]
    because = next((line for line in lines[1:] if line.startswith("Reason:")), None)
    return lines[0] if because is None else f"{lines[0]} {because}"


def _retrying_conflicts(attempt: Callable[[], BatchMetrics]) -> tuple[BatchMetrics, int]:
    """``attempt()`` and how many times it was retried after a ``ConcurrentWriteError``.

    Raises:
        ConcurrentWriteError: the last of :data:`CONFLICT_RETRIES` retries lost its race too.
    """
    retries = 0
    while True:
        try:
            return attempt(), retries
        except ConcurrentWriteError:
            if retries == CONFLICT_RETRIES:
                raise
            time.sleep(CONFLICT_BACKOFF_S * 2**retries * (1 + random.random() / 2))
            retries += 1
