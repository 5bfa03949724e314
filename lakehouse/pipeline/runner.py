"""Run a pipeline's stages: what ``lakehouse run`` and the ``jobs/`` entry points call."""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from lakehouse.pipeline import stages
from lakehouse.pipeline.metrics import BatchMetrics, Emit
from lakehouse.pipeline.order import ALL, ORDER, stages_of
from lakehouse.pipeline.spec import PipelineSpec
from lakehouse.pipeline.stream import AfterBatch, Run

#: Each stage's function, in the order ``all`` runs them (:data:`~lakehouse.pipeline.order.ORDER`).
STAGES: dict[str, Callable[[Run], list[BatchMetrics]]] = {name: getattr(stages, name) for name in ORDER}


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
