"""The pipeline users schedule: incremental stages over landing folders and Delta tables (see ``runner``).

Names are imported on first use (PEP 562): the ``lakehouse`` command reads the stage names
(:mod:`lakehouse.pipeline.order`) before Spark is imported.
"""

from __future__ import annotations

from lakehouse._lazy import lazy_names

#: Module -> the public names it provides.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "lakehouse.pipeline.metrics": ("BatchMetrics",),
    "lakehouse.pipeline.order": ("ALL", "stage_names"),
    "lakehouse.pipeline.runner": ("STAGES", "run_pipeline"),
    "lakehouse.pipeline.spec": ("PipelineSpec", "load_pipeline", "spec_from_values"),
}
__all__, __getattr__, __dir__ = lazy_names(__name__, globals(), _EXPORTS)
