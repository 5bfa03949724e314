"""File-level replay: a whole-table replica whose data files are copies of the source's.

A replica of every row of its source needs no row-level work: at each checkpoint its files are the
source's files at that version (the same relative paths, the same deletion vectors), so applying source
versions ``first .. last`` is copying the files those versions added and committing their ``AddFile`` and
``RemoveFile`` actions on the replica, in one Delta commit. That costs the files the range touched (a
seal that rewrote a partition's deletion vectors copies a few small vector files), not a scan of rows.

- Files are copied through Hadoop's ``FileSystem`` (any storage Spark reaches), by the driver in a few
  threads: a range adds few files; a restore copies every file of the snapshot once.
- A copy is idempotent (same path, same bytes): a sync killed before its commit leaves unreferenced
  files that the next sync overwrites and the replica's VACUUM removes.
- Deletion vectors stored beside the table (``u``) are copied; inline ones (``i``) travel in the action.
  A vector stored at an absolute path (``p``) is refused: the replica would depend on the source's file.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

from lakehouse.errors import InvalidInputError
from lakehouse.jvm import list_items
from lakehouse.versioned.segments import SEGMENT_COL

_COPY_THREADS = 8


@dataclass(frozen=True)
class FileChanges:
    """The net file actions of source versions ``first .. last`` and what they hold.

    ``rows``: the live rows of the added files plus those of the removed ones (a file whose deletion
    vector changed appears in both: its rows count once each way), from the files' statistics.
    ``held``: the paths of the data files the replica holds before the range that the range removes or
    gives a new deletion vector (only the vector of such a file is copied).
    """

    actions: tuple[Any, ...]
    rows: int
    held: frozenset[str]


def changes(spark: SparkSession, source_path: str, first: int, last: int) -> FileChanges:
    """The net ``AddFile``/``RemoveFile`` actions of the source's versions ``first .. last`` (both
    inclusive), read from its log on the driver (no Spark job). Missing log files raise Delta's error.

    One commit holds one action per file (path and deletion vector), so the range is netted per file: its
    last action, where a file added inside the range and removed again needs nothing (it is not copied),
    and one removed that was not there before the range (removed, re-added, removed) is not removed twice.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    scala = jvm.scala.jdk.javaapi.CollectionConverters
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, source_path)
    last_action: dict[tuple[str, str | None], Any] = {}
    existed: dict[tuple[str, str | None], bool] = {}  # whether the replica has the file before the range
    versions = log.getChanges(first, jvm.scala.Option.empty(), True)
    while versions.hasNext():
        entry = versions.next()
        if int(entry._1()) > last:
            break
        for action in list_items(scala.asJava(entry._2())):
            if action_kind(action) in ("AddFile", "RemoveFile"):
                file = _identity(action)
                existed.setdefault(file, is_removal(action))
                last_action[file] = action
    net = tuple(action for file, action in last_action.items() if not is_removal(action) or existed[file])
    held = frozenset(path for (path, _), was_there in existed.items() if was_there)
    return FileChanges(net, sum(_live_rows(a) for a in net), held)


def difference(files: Iterable[Any], others: Iterable[Any]) -> list[Any]:
    """The ``AddFile`` actions of ``files`` that ``others`` do not hold (the same path and deletion vector):
    a replica's rebuild keeps the copies it has of files the source still uses."""
    held = {_identity(f) for f in others}
    return [f for f in files if _identity(f) not in held]


def removals(spark: SparkSession, files: Iterable[Any]) -> list[Any]:
    """``RemoveFile`` actions (data changed, now) of ``files`` (``AddFile`` actions)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    now = int(jvm.java.lang.System.currentTimeMillis())
    return [f.removeWithTimestamp(now, True) for f in files]


def live_rows(files: Iterable[Any]) -> int:
    """The rows ``files`` (``AddFile`` actions) hold, less their deletion vectors', from their statistics."""
    return sum(_live_rows(f) for f in files)


def copy_files(
    spark: SparkSession,
    source_path: str,
    target_path: str,
    actions: Sequence[Any],
    held: Collection[str] = (),
) -> int:
    """Copy the data and deletion-vector files of the ``AddFile`` actions from the table at
    ``source_path`` to the same relative paths under ``target_path``; returns the files copied.

    A data file whose path is in ``held`` (files of the replica's snapshot: Delta never rewrites a data
    file in place) is not copied again, only its deletion vector; a vector file shared by several actions
    is copied once."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop = jvm.org.apache.hadoop
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    source, target = hadoop.fs.Path(source_path), hadoop.fs.Path(target_path)
    source_fs, target_fs = source.getFileSystem(conf), target.getFileSystem(conf)
    absolute = jvm.org.apache.spark.sql.delta.util.DeltaFileOperations.absolutePath
    pairs: dict[str, tuple[Any, Any]] = {}  # by target path
    for action in actions:
        if action_kind(action) != "AddFile":
            continue
        if action.path() not in held:
            target_file = absolute(target_path, action.path())
            pairs[target_file.toString()] = (absolute(source_path, action.path()), target_file)
        vector = action.deletionVector()
        if vector is not None and vector.storageType() != "i":
            if vector.storageType() != "u":
                raise InvalidInputError(
                    f"a deletion vector of {source_path} is stored at an absolute path "
                    f"({vector.pathOrInlineDv()}): a file-level replica cannot copy it"
                )
            target_vector = vector.absolutePath(target)
            pairs[target_vector.toString()] = (vector.absolutePath(source), target_vector)

    def copy(pair: tuple[Any, Any]) -> None:
        hadoop.fs.FileUtil.copy(source_fs, pair[0], target_fs, pair[1], False, True, conf)

    if len(pairs) <= 1:  # a thread of its own would cost a new py4j connection
        for pair in pairs.values():
            copy(pair)
        return len(pairs)
    with ThreadPoolExecutor(min(_COPY_THREADS, len(pairs))) as pool:
        list(pool.map(copy, pairs.values()))
    return len(pairs)


def is_removal(action: Any) -> bool:
    """Whether ``action`` is a ``RemoveFile``."""
    return action_kind(action) == "RemoveFile"


def segment_of(action: Any) -> int | None:
    """The ``segment`` partition value of a versioned store's ``AddFile`` (None: its NULL partition)."""
    value = action.partitionValues().get(SEGMENT_COL)
    return None if not value.isDefined() or value.get() is None else int(value.get())


def action_kind(action: Any) -> str:
    """The class name of a Delta log action (``AddFile``, ``RemoveFile``, ``AddCDCFile``, ...)."""
    return str(action.getClass().getSimpleName())


def _identity(action: Any) -> tuple[str, str | None]:
    """A file action's file: its path and its deletion vector's unique id (one action each per commit)."""
    vector = action.deletionVector()
    return str(action.path()), None if vector is None else str(vector.uniqueId())


def _live_rows(action: Any) -> int:
    records = action.numLogicalRecords()
    return int(records.get()) if records.isDefined() else 0
