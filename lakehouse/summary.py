"""What runs of a pipeline did, as a person reads it: per run and stage, records in and out and what was
dropped; then where the tables are and commands to try on them.

:func:`summary_lines` renders the :class:`~lakehouse.pipeline.BatchMetrics` that
:func:`~lakehouse.pipeline.run_pipeline` returned for each run (``lakehouse demo`` prints it after its runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lakehouse.pipeline.metrics import BatchMetrics
from lakehouse.pipeline.runner import STAGES

_WIDTH = max(len(stage) for stage in STAGES)


def summary_lines(
    runs: Sequence[Sequence[BatchMetrics]],
    tables: Mapping[str, str],
    queries: Iterable[str] = (),
    jvm_free: bool = True,
) -> list[str]:
    """The summary: one line per run and stage, then every table's location, then the commands to try
    (``jvm_free``: they read through delta-rs, as over a local root; else they start Spark).

    A stage a run found nothing new for shows 0 micro-batches; ``maintain`` and ``assign`` run once per
    run and show ``-``.
    """
    stages = [stage for stage in STAGES if any(m.stage == stage for metrics in runs for m in metrics)]
    lines = ["", "Summary", f"  run  {'stage':<{_WIDTH}}  batches  {'in':>9}  {'out':>9}  details"]
    for run, metrics in enumerate(runs, start=1):
        for stage in stages:
            lines.append(_stage_line(run, stage, [m for m in metrics if m.stage == stage]).rstrip())
    lines.append("Tables")
    lines += [f"  {name}: {location}" for name, location in tables.items()]
    queries = list(queries)
    if queries:
        engine = "no JVM: delta-rs reads them" if jvm_free else "Spark reads tables on object storage"
        lines.append(f"Try ({engine}; `lakehouse store sql-view` gives other engines a store's SQL):")
        lines += [f"  {query}" for query in queries]
    return lines


def _stage_line(run: int, stage: str, metrics: Sequence[BatchMetrics]) -> str:
    batches = sum(m.batch_id is not None for m in metrics)
    shown = "-" if metrics and not batches else str(batches)
    records_in, records_out = sum(m.records_in for m in metrics), sum(m.records_out for m in metrics)
    return f"  {run:>3}  {stage:<{_WIDTH}}  {shown:>7}  {records_in:>9}  {records_out:>9}  " + ", ".join(
        _details(metrics)
    )


def _details(metrics: Sequence[BatchMetrics]) -> list[str]:
    """What a person may act on: records dropped or late, lookups outside retention, replayed batches,
    then the stage's own details (numbers summed over micro-batches, zeros left out; other values: the
    last batch's; maintenance tasks that were not due by name only)."""
    counts = {
        "duplicates dropped": sum(m.duplicates for m in metrics),
        "late": sum(m.late for m in metrics),
        "lookups outside retention": sum(m.expired_lookups for m in metrics),
        "replayed batches": sum(m.replay for m in metrics),
    }
    details: dict[str, object] = {}
    for m in metrics:
        for key, value in m.details.items():
            before = details.get(key)
            details[key] = before + value if isinstance(before, int) and isinstance(value, int) else value
    skipped = details.pop("skipped", None)
    not_due = [f"not due: {_tasks(list(skipped))}"] if isinstance(skipped, dict) and skipped else []
    return (
        [f"{value} {name}" for name, value in counts.items() if value]
        + [f"{key.replace('_', ' ')} {value}" for key, value in details.items() if value != 0]
        + not_due
    )


def _tasks(names: list[str]) -> str:
    """Maintenance task names, the per-table OPTIMIZEs counted in one (``seal, optimize (3 tables)``)."""
    optimized = [name for name in names if name.startswith("optimize ")]
    others = [name for name in names if not name.startswith("optimize ")]
    if optimized:
        others.append(f"optimize ({len(optimized)} table{'' if len(optimized) == 1 else 's'})")
    return ", ".join(others)
