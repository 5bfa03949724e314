"""The keys of a versioned store changed since a passing check: what an incremental check must look at.

A check of version ``v`` after a check of version ``v0 <= v`` in which every expectation passed needs to
look only at the keys whose versions may differ from what passed:

- the keys of the store's Change Data Feed rows for versions ``(v0, v]``: every row a Delta commit added or
  removed, the store's own writes and anything written behind its back through Delta (a commit that adds
  or removes files without change data files, such as a partition drop, shows as insert/delete rows);
- the keys with rows in the pending partition at ``v`` (:mod:`lakehouse.versioned.pending`): the versions
  of a key without pending rows are its physical rows, as they were at ``v0`` when none of them changed,
  whatever the seal state; a key with pending rows is resolved against the newest seal's region, which
  moves with seals, so it is always looked at (the pending partition is small: the batches since a seal).

Every per-key rule of the versioned suite depends only on the key's versions and on ``stream_time - R``
(the horizon), which only grows, and a larger horizon only allows more gaps: a key that passed at ``v0``
and did not change still passes at ``v``. The whole-table rules are checked without reading data: the
expiry rule from the partition values of the snapshot's files (a file in a segment below the last
``expire()`` bound sends the check to a full one, which names its keys), and lost files (removed from
storage behind Delta's back: no commit shows them) by comparing the snapshot's files with a listing of
their folders.

What is trusted: that rows change only through Delta commits, and that the earlier check was right.
When the answer cannot be had this way (the log or change data of the range is gone, the Change Data Feed
is off, the table's metadata changed, a file is missing or sits in an expired segment), :class:`Changes`
says why and the caller checks the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.catalog import hadoop_fs, hadoop_path
from lakehouse.commit_log import latest_snapshot
from lakehouse.errors import first_line
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.segments import SEGMENT_COL

# The change data must be read whole: a missing change file is an unreadable range, not an empty one.
_FAIL_ON_MISSING_FILES = {"spark.sql.files.ignoreMissingFiles": "false"}
# Commit file actions that change the table's metadata (schema, properties, partitioning) or protocol.
_METADATA_ACTIONS = ('{"metaData"', '{"protocol"')
# No expire() recorded: no segment is below it.
_NO_BOUND = -(2**63)


@dataclass(frozen=True)
class Changes:
    """The distinct keys to check (checkpointed, ``count`` of them), or why the whole table must be."""

    keys: DataFrame | None
    count: int
    full_because: str | None = None


def changed_keys(
    spark: SparkSession, path: str, keys: list[str], since: int, version: int, expired_below: int | None
) -> Changes:
    """The keys of the store at ``path`` to check at ``version`` after a passing check of ``since``."""
    reason = _metadata_changed(spark, path, since, version)
    if reason is not None:
        return Changes(None, 0, reason)
    files = _snapshot_files(spark, path, version)
    missing = _missing(spark, path, files)
    if missing:
        return Changes(None, 0, f"{len(missing)} data file(s) missing from storage, e.g. {missing[0]}")
    bound = _NO_BOUND if expired_below is None else expired_below
    expired = [name for name, segment in files.items() if segment is not None and segment < bound]
    if expired:
        return Changes(None, 0, f"a file in a segment below the last expire() bound: {expired[0]}")
    try:
        with delta_ops.session_confs(spark, _FAIL_ON_MISSING_FILES):
            frame = _change_keys(spark, path, keys, since, version, PENDING_SEGMENT in files.values())
            if frame is None:
                return Changes(None, 0)
            found = frame.localCheckpoint(eager=True)
            return Changes(found, found.count())
    except (CapturedException, Py4JJavaError) as error:
        unreadable = f"the change data of versions {since + 1}-{version} is unreadable"
        return Changes(None, 0, f"{unreadable}: {_reason(error)}")


def _change_keys(
    spark: SparkSession, path: str, keys: list[str], since: int, version: int, pending: bool
) -> DataFrame | None:
    """The distinct keys of the change rows of ``(since, version]`` and of the pending partition (lazy;
    None when there are neither)."""
    frames = []
    if since < version:
        changes = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", since + 1)
            .option("endingVersion", version)
            .load(path)
        )
        frames.append(changes.select(*keys))
    if pending:
        table = spark.read.format("delta").option("versionAsOf", version).load(path)
        frames.append(table.where(F.col(SEGMENT_COL) == F.lit(PENDING_SEGMENT)).select(*keys))
    if not frames:
        return None
    union = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    return union.distinct()


def created_ms(spark: SparkSession, path: str) -> int | None:
    """When the table at ``path`` was created (epoch milliseconds, from its metadata), if recorded.

    A table dropped and created again at the same path has a later creation time than a check of the
    old one: that check says nothing of it.
    """
    created = latest_snapshot(spark, path).metadata().createdTime()
    return int(created.get()) if created.isDefined() else None


def _metadata_changed(spark: SparkSession, path: str, since: int, version: int) -> str | None:
    """Why the commits ``(since, version]`` cannot be trusted for an incremental check, or None.

    Reads each commit file on the driver (one call per file): a missing one (log cleanup) or one carrying
    a metadata or protocol action (schema, properties, partitioning) rules the range out.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    snapshot = latest_snapshot(spark, path)
    log = snapshot.deltaLog()
    conf = log.newDeltaHadoopConf()
    files = jvm.org.apache.spark.sql.delta.util.DeltaCommitFileProvider.apply(snapshot)
    for commit in range(since + 1, version + 1):
        try:
            text = log.store().read(files.deltaFile(commit), conf).mkString("\n")
        except Py4JJavaError as error:
            return f"the log of version {commit} is unreadable: {_reason(error)}"
        if any(line.startswith(_METADATA_ACTIONS) for line in str(text).splitlines()):
            return f"the table's metadata changed at version {commit}"
    return None


def _snapshot_files(spark: SparkSession, path: str, version: int) -> dict[str, int | None]:
    """The data files of the table at ``version`` (paths relative to the table, decoded) and their
    segment (None: the latest versions' NULL partition), from the log: no data file is read."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    snapshot = log.getSnapshotAt(
        version,
        getattr(log, "getSnapshotAt$default$2")(),
        getattr(log, "getSnapshotAt$default$3")(),
        getattr(log, "getSnapshotAt$default$4")(),
    )
    files = DataFrame(snapshot.allFiles().toDF(), spark).select(
        "path", F.col("partitionValues").getItem(SEGMENT_COL).alias(SEGMENT_COL)
    )
    return {
        unquote(row["path"]): None if row[SEGMENT_COL] is None else int(row[SEGMENT_COL])
        for row in files.collect()
    }


def _missing(spark: SparkSession, path: str, files: dict[str, int | None]) -> list[str]:
    """The ``files`` (relative to the table at ``path``) that a listing of their folders lacks, sorted."""
    fs = hadoop_fs(spark, path)
    root = fs.makeQualified(hadoop_path(spark, path)).toString().rstrip("/")
    folders = {name.rpartition("/")[0] for name in files}
    listed: set[str] = set()
    for folder in sorted(folders):
        location = hadoop_path(spark, f"{root}/{folder}" if folder else root)
        if not fs.exists(location):
            continue
        for status in fs.listStatus(location):
            listed.add(str(status.getPath().toString())[len(root) + 1 :])
    return sorted(name for name in files if "://" not in name and name not in listed)


def _reason(error: Exception) -> str:
    """The first line of the Java exception behind ``error`` (py4j's own text is a stack trace)."""
    java = getattr(error, "java_exception", None)
    return first_line(error if java is None else RuntimeError(str(java.toString())))
