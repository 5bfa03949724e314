"""What one micro-batch (or one maintenance run) of a stage did: one JSON line per batch for schedulers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from lakehouse.commit_log import CommitLog, latest_snapshot
from lakehouse.history import rows_added

#: ``details`` key of the metrics a stage emits when it found no new input.
NOTHING_NEW = "nothing_new"


@dataclass(frozen=True)
class BatchMetrics:
    """The metrics of one micro-batch of one stage.

    Attributes:
        pipeline / stage: What ran.
        batch_id: The micro-batch id (Structured Streaming's; None for ``maintain`` and ``assign``).
        records_in: Records the batch read from its source.
        records_out: Rows the batch's commit added to the stage's output table.
        duplicates: Records dropped as duplicates (ingest).
        late: Records older than stream time minus the interval or retention (ingest: forwarded but not
            saved; materialize: not put).
        expired_lookups: Records joined at a time older than the store's retention (enrich).
        replay: The batch id had been committed before (a re-run after a crash): nothing new written.
        table: The table the batch wrote (its output).
        version: That table's Delta version after the batch (ingest, enrich: that of the batch's own commit).
        seconds: Wall-clock time of the batch.
        details: Stage-specific numbers (maintenance: files removed, tables compacted, ...); in the JSON.
        said: What ``details`` say as a phrase for people, replacing them in :meth:`describe` (not in the
            JSON).
    """

    pipeline: str
    stage: str
    batch_id: int | None
    records_in: int = 0
    records_out: int = 0
    duplicates: int = 0
    late: int = 0
    expired_lookups: int = 0
    replay: bool = False
    table: str | None = None
    version: int | None = None
    seconds: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)
    said: str = ""

    @classmethod
    def nothing_new(cls, pipeline: str, stage: str, seconds: float = 0.0) -> BatchMetrics:
        """The metrics of a stage that found no new input (no micro-batch ran) in ``seconds``:
        ``details.nothing_new``."""
        return cls(pipeline, stage, None, seconds=seconds, details={NOTHING_NEW: True}, said="nothing new")

    def to_json(self) -> str:
        """The metrics as one JSON line (without :attr:`said`)."""
        values = asdict(self)
        del values["said"]
        values["seconds"] = round(self.seconds, 3)
        return json.dumps(values, sort_keys=True, default=str)

    def describe(self) -> str:
        """A one-line progress message for people."""
        if self.details.get(NOTHING_NEW):
            return f"[{self.pipeline}:{self.stage}]: nothing new ({self.seconds:.1f}s)"
        batch = "" if self.batch_id is None else f" batch {self.batch_id}"
        parts = [f"{self.records_in} in", f"{self.records_out} out"]
        parts += [f"{v} {k}" for k, v in (("duplicates", self.duplicates), ("late", self.late)) if v]
        if self.expired_lookups:
            parts.append(f"{self.expired_lookups} expired lookups")
        if self.said:
            parts.append(self.said)
        else:
            parts += [f"{k.replace('_', ' ')} {v}" for k, v in self.details.items()]
        where = "" if self.table is None else f" -> {self.table} v{self.version}"
        replay = " (replay: nothing new written)" if self.replay else ""
        return (
            f"[{self.pipeline}:{self.stage}]{batch}: {', '.join(parts)}{where}{replay} ({self.seconds:.1f}s)"
        )


Emit = Callable[[BatchMetrics], None]


def rows_committed(
    spark: SparkSession, path: str, app_id: str, batch_id: int, writer: str | None = None
) -> tuple[int | None, int]:
    """The version of the table at ``path`` whose commit recorded batch ``batch_id`` of ``app_id`` (as
    ``writer``), and its added rows; call it once the batch's commit was made (the table exists).

    (None, 0) when no retained commit recorded the batch.
    """
    found = CommitLog(spark, path, app_id, writer=writer).batch_metrics(batch_id)
    if found is None:
        return None, 0
    version, metrics = found
    return version, rows_added(metrics)


def current_version(spark: SparkSession, path: str) -> int | None:
    """The table's current version (None if there is no table): one look at its log, no Spark job."""
    version = int(latest_snapshot(spark, path).version())
    return None if version < 0 else version
