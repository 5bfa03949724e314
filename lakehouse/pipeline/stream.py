"""Running one stage as a Structured Streaming query: ``trigger(availableNow=True)`` + ``foreachBatch``.

The query reads what its source has that the stage's checkpoint has not seen, in micro-batches, and stops.
Spark writes each micro-batch's offsets to the checkpoint *before* running it and marks it done *after*,
so a run killed anywhere re-runs its last micro-batch with the same batch id and the same records on
the next run. The stage's writes are keyed by that batch id (Delta ``txnAppId``/``txnVersion`` and the
state tables' own batch records), so the re-run leaves every table as one uninterrupted run would.

The same makes a lost race safe to retry: a micro-batch whose commit finds that another writer committed
to its table since the batch read it (``ConcurrentWriteError``: nothing of that commit was written) is
planned and run again against the new version, up to :data:`CONFLICT_RETRIES` times with a doubling wait.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from lakehouse.errors import ConcurrentWriteError, LakehouseError
from lakehouse.pipeline.metrics import BatchMetrics, Emit
from lakehouse.pipeline.spec import PipelineSpec

#: Called after each micro-batch's commits, before Spark marks the batch done (crash-injection tests).
AfterBatch = Callable[[str, int], None]
#: Times a micro-batch that lost a commit race with another writer is run again before the stage fails.
CONFLICT_RETRIES = 3
#: Seconds before the first retry; each further retry waits twice as long (plus up to 50% jitter).
CONFLICT_BACKOFF_S = 1.0


class StageFailedError(LakehouseError, RuntimeError):
    """A stage's streaming query failed for a reason that is not a lakehouse error."""


@dataclass(frozen=True)
class Run:
    """What every stage of one run shares."""

    spark: SparkSession
    spec: PipelineSpec
    emit: Emit
    after_batch: AfterBatch = lambda stage, batch_id: None


Handler = Callable[[DataFrame, int], BatchMetrics]


def run_stream(run: Run, stage: str, source: DataFrame, handle: Handler) -> list[BatchMetrics]:
    """Run ``handle`` on every micro-batch of ``source`` not yet done, then stop; returns their metrics.

    Raises:
        The exception ``handle`` raised (a lakehouse error stays itself), else :class:`StageFailedError`
        with the first line of Spark's.
    """
    done: list[BatchMetrics] = []
    failures: list[BaseException] = []

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        start = time.monotonic()
        try:
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

    query = (
        source.writeStream.queryName(f"{run.spec.name}_{stage}")
        .foreachBatch(each_batch)
        .trigger(availableNow=True)
        .option("checkpointLocation", run.spec.tables.checkpoint(stage))
        .start()
    )
    try:
        query.awaitTermination()
    except StreamingQueryException as error:
        if failures:
            raise failures[0] from None
        raise StageFailedError(
            f"stage {stage} of pipeline {run.spec.name} failed: {_reason(error)}"
        ) from None
    return done


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
