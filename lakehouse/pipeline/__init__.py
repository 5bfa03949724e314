"""The pipeline users schedule: incremental stages over landing folders and Delta tables (see ``runner``)."""

from __future__ import annotations

from lakehouse.pipeline.metrics import BatchMetrics
from lakehouse.pipeline.runner import ALL, STAGES, run_pipeline, stage_names
from lakehouse.pipeline.spec import PipelineSpec, load_pipeline, spec_from_values

__all__ = [
    "ALL",
    "STAGES",
    "BatchMetrics",
    "PipelineSpec",
    "load_pipeline",
    "run_pipeline",
    "spec_from_values",
    "stage_names",
]
