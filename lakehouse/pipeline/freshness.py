"""Freshness: how long after its landing a record's enriched row was committed, per micro-batch of ``enrich``.

A record *lands* when its source has it: a landing folder's file when it was written there (its
modification time, which Spark's file source records for each file of a micro-batch in the query's
checkpoint), a Kafka record at its Kafka timestamp. ``ingest`` notes, for each version of ``deduped`` it
commits, when the records of its micro-batch landed (the earliest and the latest); each ``enrich``
micro-batch reads ``deduped`` up to a version (its offsets in the query's checkpoint), so once its commit
is made it knows the lag of its records: from the latest landing (its freshest record) and from the
earliest (its stalest). Only what this process ingested is known: a batch of versions ingested by an
earlier run, or from a Delta source, has no figure. The bookkeeping reads the checkpoints' small files on
the driver; a Kafka batch's landing times take one aggregate of the batch.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.catalog import hadoop_fs, hadoop_path


@dataclass(frozen=True)
class Landed:
    """When the records of one batch (or file) landed: the earliest and the latest, epoch seconds."""

    earliest: float
    latest: float

    def __or__(self, other: Landed) -> Landed:
        return Landed(min(self.earliest, other.earliest), max(self.latest, other.latest))


@dataclass(frozen=True)
class Lag:
    """Seconds from landing to the enriched commit of a batch's records: its freshest and its stalest."""

    freshest: float
    stalest: float

    def details(self) -> dict[str, float]:
        """The figures as a stage's metrics carry them (``details["freshness_s"]``)."""
        return {"freshest": round(self.freshest, 3), "stalest": round(self.stalest, 3)}

    def said(self) -> str:
        """The figures as a phrase for people."""
        return f"landed {self.freshest:.1f}-{self.stalest:.1f} s before"


class Freshness:
    """The landing times of the versions of ``deduped`` that ``ingest`` committed in this process, until
    ``enrich`` joined them (thread-safe: the stages of a continuous run call it from their own threads)."""

    def __init__(self) -> None:
        self._landed: dict[int, Landed] = {}
        self._lock = threading.Lock()

    def ingested(
        self, batch: DataFrame, batch_id: int, source_format: str, checkpoint: str, version: int
    ) -> None:
        """Note that micro-batch ``batch_id`` (``batch``, read from a source of ``source_format`` by the
        query of ``checkpoint``) was appended to ``deduped`` by its commit ``version``."""
        if source_format == "kafka":
            landed = kafka_landed(batch)
        elif source_format == "delta":
            landed = None
        else:
            landed = files_landed(batch.sparkSession, checkpoint, batch_id)
        if landed is not None:
            with self._lock:
                self._landed[version] = landed

    def enriched(
        self, spark: SparkSession, checkpoint: str, batch_id: int, committed_at: float
    ) -> Lag | None:
        """The lag, at ``committed_at`` (epoch seconds), of the records of micro-batch ``batch_id`` of the
        query of ``checkpoint`` (``enrich``, reading ``deduped``); None when none of them was ingested by
        this process. Those versions are forgotten."""
        upto = _delta_offset_versions(spark, checkpoint, batch_id)
        with self._lock:
            read = [version for version in self._landed if version < upto]
            found = [self._landed.pop(version) for version in read]
        if not found:
            return None
        landed = found[0]
        for other in found[1:]:
            landed |= other
        return Lag(committed_at - landed.latest, committed_at - landed.earliest)


def kafka_landed(batch: DataFrame) -> Landed | None:
    """When the records of a Kafka micro-batch landed: their Kafka timestamps (one aggregate; None if
    the batch is empty)."""
    row = batch.agg(F.min("timestamp").alias("earliest"), F.max("timestamp").alias("latest")).first()
    if row is None or row["earliest"] is None:
        return None
    return Landed(row["earliest"].timestamp(), row["latest"].timestamp())


def files_landed(spark: SparkSession, checkpoint: str, batch_id: int) -> Landed | None:
    """When the files of micro-batch ``batch_id`` of a file-source query landed: their modification
    times, as the query's source log (``<checkpoint>/sources/0``) records them (None: not found)."""
    log = f"{checkpoint}/sources/0/{batch_id}"
    text = _read_text(spark, log) or _read_text(spark, f"{log}.compact")
    if text is None:
        return None
    times = []
    for line in text.splitlines()[1:]:  # the first line is the log's format version
        entry = json.loads(line)
        if entry.get("batchId") == batch_id:
            times.append(float(entry["timestamp"]) / 1000)
    return Landed(min(times), max(times)) if times else None


def _delta_offset_versions(spark: SparkSession, checkpoint: str, batch_id: int) -> int:
    """The versions of its Delta source that micro-batch ``batch_id`` of the query read up to: every
    version below the returned one (the batch's end offset, in ``<checkpoint>/offsets/<batch_id>``)."""
    text = _read_text(spark, f"{checkpoint}/offsets/{batch_id}")
    if text is None:
        return -1
    offset = json.loads(text.splitlines()[2])  # format version, batch metadata, then the source's offset
    version = int(offset["reservoirVersion"])
    # In the initial snapshot (isStartingVersion), every version up to it; else a negative index is the
    # start of that version (nothing of it read), and any other index a file of it.
    started = int(offset.get("index", -1)) < 0 and not offset.get("isStartingVersion")
    return version if started else version + 1


def _read_text(spark: SparkSession, path: str) -> str | None:
    """The text of a small file (on any Hadoop file system), None if there is none."""
    fs = hadoop_fs(spark, path)
    file = hadoop_path(spark, path)
    if not fs.exists(file):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = fs.open(file)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()
