"""The keys of a versioned store changed since a passing check, and the part of the store their check reads.

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

**Pruning: the segments a change can reach.** The changed keys' versions sit in every segment, so their
check would read every file's key and time columns. It reads only the rows in segments ``>= s`` and the
NULL (latest) segment instead, a literal filter on the partition column, when that provably gives every
changed key the violation rows of its whole set of versions. The **change rows** are the Change Data
Feed rows of ``(v0, v]`` (inserts and post-images add a row; deletes and pre-images remove one), except
the removals of rows in a segment below the last ``expire()`` bound (none is left at ``v``: a file there
sends the check to a full one). Let ``T`` be their smallest ``valid_from`` and
``s = min(floor(T / interval), the smallest segment among them)``. Pruning is done when nothing is
pending at ``v`` (no file in the pending partition) nor at ``v0`` (the change rows remove as many pending
rows as they add), no change row has a NULL ``valid_from`` (the store's schema refuses one), and every
``(key, valid_from)`` whose rows the change rows remove more often than they add lies after ``v0``'s
horizon ``H0`` (always, with no horizon at ``v0``); otherwise the changed keys are read whole. Then, for
a changed key, with ``X`` its versions at ``v0`` (its physical rows: nothing pending; they broke no rule)
and ``Y`` at ``v``, and ``E`` the rows of ``Y`` in a non-NULL segment below ``s`` (those not read):

1. ``E`` holds the same rows at ``v0``: a row added or removed in between is a change row, in a segment
   ``>= s`` (or NULL), unless it was an expired removal, which left no row behind at ``v``.
2. ``E`` is a prefix of ``X`` in ``valid_from`` order, minus the expired ones: ``X`` broke no rule, so
   its ``valid_from`` are distinct, each closed version ends at or before the next one starts, the open
   one is last, and ``segment = floor(valid_to / interval)`` grows with ``valid_from``. Every row of
   ``E`` ends before ``s * interval <= T``.
3. Every other row of ``Y`` starts at or after the end of ``E``'s last row ``e``: one added since starts
   at or after ``T``; an older one is a row of ``X`` after ``e`` (a row of ``X`` at the ``valid_from`` of
   a row of ``E`` would be a second version there).
4. ``e``'s successor ``n`` in ``X`` (``e`` is closed, so there is one) starts at ``e.valid_to``, or
   later with the gap allowed: ``n.valid_from <= H0``. If it starts at ``e.valid_to < T``, no change row
   has its ``valid_from``; in the other case the change rows do not remove rows of its ``(key,
   valid_from)`` more often than they add them (or pruning was refused). Either way ``Y`` still has a
   row there, in a segment ``>= s`` or NULL (in ``E`` it would be ``n`` itself, after ``e``). So the
   first row of ``Y`` after ``E`` starts at ``e.valid_to`` (they touch), or between it and
   ``n.valid_from <= H0 <= H`` (the gap ends at or before ``v``'s horizon ``H``: allowed).

By 2-4, every row of ``E`` breaks no rule in ``Y`` (the same rows and neighbours as in ``X``, the
boundary pair touching or with an allowed gap, no file below the expiry bound) and holds no open version;
the rows read keep their neighbours, but for the first one's predecessor ``e``, which starts before it
(no duplicate ``(key, valid_from)``). So the window over the rows read flags exactly the rows the window
over all of ``Y`` flags, and a chain certified among them (:mod:`lakehouse.quality._version_chains`)
breaks no rule in ``Y`` either. Corruption written behind the store's back is a change row: in the rows
read (its segment lowers ``s``, its ``valid_from`` lowers ``T``), and so is the predecessor of a late
version inserted before older ones. ``E`` rows and their order are only those of ``X``, which passed.

What is trusted: that rows change only through Delta commits, and that the earlier check was right.
When the answer cannot be had this way (the log or change data of the range is gone, the Change Data Feed
is off, the table's metadata changed, a file is missing or sits in an expired segment), :class:`Changes`
says why and the caller checks the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.catalog import hadoop_fs, hadoop_path
from lakehouse.commit_log import latest_snapshot, snapshot_files
from lakehouse.errors import first_line
from lakehouse.versioned._plan import VALID_FROM
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.segments import SEGMENT_COL, segment_of
from lakehouse.versioned.settings import StoreSettings

# The change data must be read whole: a missing change file is an unreadable range, not an empty one.
_FAIL_ON_MISSING_FILES = {"spark.sql.files.ignoreMissingFiles": "false"}
# Commit file actions that change the table's metadata (schema, properties, partitioning) or protocol.
_METADATA_ACTIONS = ('{"metaData"', '{"protocol"')
# Change Data Feed row types that remove a row (the others add one).
_REMOVALS = ("delete", "update_preimage")
# No expire() recorded: no segment is below it.
_NO_BOUND = -(2**63)
# Per change row: +1 adds a row, -1 removes one, 0 a pending row at the checked version (no change).
_NET = "_net"


@dataclass(frozen=True)
class Changes:
    """The distinct keys to check (checkpointed, ``count`` of them), or why the whole table must be.

    ``from_segment``: the check of those keys needs only their rows in segments ``>=`` it and in the NULL
    segment (module doc); None: all their rows.
    """

    keys: DataFrame | None
    count: int
    full_because: str | None = None
    from_segment: int | None = None


def changed_keys(
    spark: SparkSession,
    path: str,
    settings: StoreSettings,
    since: int,
    version: int,
    expired_below: int | None,
    since_horizon_us: int | None,
) -> Changes:
    """The keys of the store at ``path`` to check at ``version`` after a passing check of ``since``, and
    the segments their check must read. ``since_horizon_us``: the store's ``stream_time - R`` at
    ``since`` (None: no put before it)."""
    reason = _metadata_changed(spark, path, since, version)
    if reason is not None:
        return Changes(None, 0, reason)
    # Each data file (its path relative to the table, decoded) and its segment, from the log.
    files = {unquote(str(a.path())): _segment_of_file(a) for a in snapshot_files(spark, path, version)}
    missing = _missing(spark, path, files)
    if missing:
        return Changes(None, 0, f"{len(missing)} data file(s) missing from storage, e.g. {missing[0]}")
    bound = _NO_BOUND if expired_below is None else expired_below
    expired = [name for name, segment in files.items() if segment is not None and segment < bound]
    if expired:
        return Changes(None, 0, f"a file in a segment below the last expire() bound: {expired[0]}")
    pending = PENDING_SEGMENT in files.values()
    keys = list(settings.keys)
    try:
        with delta_ops.session_confs(spark, _FAIL_ON_MISSING_FILES):
            rows = _change_rows(spark, path, keys, since, version, pending)
            if rows is None:
                return Changes(None, 0)
            found = _per_key(rows, keys, bound).localCheckpoint(eager=True)
            totals = _totals(found)
    except (CapturedException, Py4JJavaError) as error:
        unreadable = f"the change data of versions {since + 1}-{version} is unreadable"
        return Changes(None, 0, f"{unreadable}: {_reason(error)}")
    from_segment = _from_segment(totals, pending, since_horizon_us, settings.interval_us)
    return Changes(found, int(totals["count"]), from_segment=from_segment)


def _from_segment(
    totals: dict[str, Any], pending: bool, since_horizon_us: int | None, interval_us: int
) -> int | None:
    """The segment ``s`` of the module doc, from the change rows' :func:`_totals`; None (read every
    segment) when something is pending at either check, a change row has a NULL ``valid_from``, a
    ``(key, valid_from)`` at or before ``since_horizon_us`` lost rows, or no change row is left."""
    if pending or totals["pending_net"] != 0 or totals["null_from"] or totals["first_from_us"] is None:
        return None
    lost = totals["lost_from_us"]
    if since_horizon_us is not None and lost is not None and lost <= since_horizon_us:
        return None
    reach = segment_of(totals["first_from_us"], interval_us)
    lowest = totals["min_segment"]
    return reach if lowest is None else min(reach, lowest)


def _segment_of_file(action: object) -> int | None:
    """The segment of a data file's ``AddFile`` action (None: the NULL partition of the latest versions)."""
    value = action.partitionValues().get(SEGMENT_COL)  # type: ignore[attr-defined]
    return None if not value.isDefined() or value.get() is None else int(value.get())


def _change_rows(
    spark: SparkSession, path: str, keys: list[str], since: int, version: int, pending: bool
) -> DataFrame | None:
    """The change rows of ``(since, version]`` and the pending partition's rows at ``version`` (lazy; None
    when there are neither): their keys, ``valid_from``, segment and :data:`_NET`."""
    frames = []
    if since < version:
        changes = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", since + 1)
            .option("endingVersion", version)
            .load(path)
        )
        net = F.when(F.col("_change_type").isin(*_REMOVALS), -1).otherwise(1)
        frames.append(changes.select(*keys, VALID_FROM, SEGMENT_COL, net.alias(_NET)))
    if pending:
        table = spark.read.format("delta").option("versionAsOf", version).load(path)
        pending_rows = table.where(F.col(SEGMENT_COL) == F.lit(PENDING_SEGMENT))
        frames.append(pending_rows.select(*keys, VALID_FROM, SEGMENT_COL, F.lit(0).alias(_NET)))
    if not frames:
        return None
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def _per_key(rows: DataFrame, keys: list[str], bound: int) -> DataFrame:
    """One row per distinct key of ``rows`` (lazy), with what pruning needs of its change rows (the
    removals of rows below the expiry ``bound`` left aside): the smallest ``valid_from`` (microseconds) and
    segment, whether one has a NULL ``valid_from``, the smallest ``valid_from`` whose rows it removes more
    often than it adds, and the pending rows it adds minus those it removes."""
    segment, net = F.col(SEGMENT_COL), F.col(_NET)
    counted = ~((net < 0) & segment.isNotNull() & (segment < F.lit(bound)))
    # Partitioned by key once: both aggregates below then run without another shuffle.
    per_from = (
        rows.repartition(*keys)
        .groupBy(*keys, VALID_FROM)
        .agg(
            F.max(counted).alias("counted"),
            F.sum(F.when(counted, net).otherwise(0)).alias("net"),
            F.min(F.when(counted, segment)).alias("min_segment"),
            F.sum(F.when(segment == F.lit(PENDING_SEGMENT), net).otherwise(0)).alias("pending_net"),
        )
    )
    from_us = F.unix_micros(VALID_FROM)
    return per_from.groupBy(*keys).agg(
        F.min(F.when(F.col("counted"), from_us)).alias("first_from_us"),
        F.max(F.col("counted") & F.col(VALID_FROM).isNull()).alias("null_from"),
        F.min("min_segment").alias("min_segment"),
        F.min(F.when(F.col("net") < 0, from_us)).alias("lost_from_us"),
        F.sum("pending_net").alias("pending_net"),
    )


def _totals(per_key: DataFrame) -> dict[str, Any]:
    """The number of keys of ``per_key`` and its columns over all keys (one Spark job)."""
    aggregates: list[Column] = [
        F.count(F.lit(1)).alias("count"),
        F.min("first_from_us").alias("first_from_us"),
        F.coalesce(F.max("null_from"), F.lit(False)).alias("null_from"),
        F.min("min_segment").alias("min_segment"),
        F.min("lost_from_us").alias("lost_from_us"),
        F.coalesce(F.sum("pending_net"), F.lit(0)).alias("pending_net"),
    ]
    row = per_key.agg(*aggregates).first()
    assert row is not None
    return row.asDict()


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
