"""Damaged Delta tables named, not mis-read: checks of a table's log that cost no table scan.

A snapshot is checked when Delta builds it (:func:`checked_snapshot`, called by
:func:`lakehouse.commit_log.latest_snapshot`, which every open, read and write of a lakehouse table goes
through):

- Delta's own errors building it (a missing middle commit: versions not contiguous; a table folder or log
  deleted; a checkpoint it cannot read) become one :class:`~lakehouse.errors.DamagedTableError` line.
- The newest commit file must be non-empty and parse as JSON lines (a zero-byte or truncated last commit:
  Delta reads an empty file as a commit with no action, and a truncated one fails only later, deep in a
  read). Read once per new version (a small file on the driver), remembered per table.
- Each checkpoint file of the snapshot's log segment must end with Parquet's magic bytes (a truncated
  checkpoint): four bytes read once per checkpoint.

What it cannot see: a damage that leaves a valid-looking log (a commit's ``add`` line removed whole, a
data file rewritten with other rows) reads as a valid table. A data file deleted from under the table is
found where a read or a write reaches that file (:func:`names_missing_files` makes Spark's error there one
``DamagedTableError`` line, and the write commits nothing), or by :func:`table_health`
(``lakehouse doctor TABLE``), which lists every file of the table. See docs/recovery.md.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote

from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from lakehouse.errors import DamagedTableError, first_line
from lakehouse.jvm import jvm_class

_PARQUET_MAGIC = b"PAR1"
#: A data file's path in Spark's error for a file it could not read (``FAILED_READ_FILE``, Hadoop's
#: ``FileNotFoundException``): a URI or absolute path ending in ``.parquet``.
_DATA_FILE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*:)?/[^\s'\"`\[\]]*?\.parquet")
_Method = TypeVar("_Method", bound=Callable[..., Any])
#: Per table path: the (version, size) of its newest commit file found sound; the (path, version) of the
#: checkpoints found sound.
_checked: dict[str, tuple[int, int]] = {}
_checked_checkpoints: set[tuple[str, int]] = set()
_lock = threading.Lock()


def checked_snapshot(spark: SparkSession, path: str, update: Any) -> Any:
    """``update()`` (Delta's ``DeltaLog.forTable(...).update``: the newest snapshot), checked as the module
    doc says.

    Raises:
        DamagedTableError: the table's log is damaged (the message names the damage as Delta reports it).
    """
    try:
        snapshot = update()
    except Py4JJavaError as error:
        raise DamagedTableError(path, _delta_says(error)) from None
    if int(snapshot.version()) >= 0:
        _check_segment(spark, path, snapshot)
    return snapshot


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """``DeltaTable.isDeltaTable``, with Delta's errors on a damaged log (it builds the snapshot) raised as
    :class:`~lakehouse.errors.DamagedTableError`."""
    try:
        return bool(DeltaTable.isDeltaTable(spark, path))
    except Py4JJavaError as error:
        raise DamagedTableError(path, _delta_says(error)) from None


def _delta_says(error: Py4JJavaError) -> str:
    """The first line of Delta's message (the Java exception's, without the Py4J preamble)."""
    cause = error.java_exception
    text = str(cause.getMessage() or cause.toString())
    return first_line(Exception(text), 300)


def _check_segment(spark: SparkSession, path: str, snapshot: Any) -> None:
    """The checks of the newest commit file and the checkpoint: a few Py4J calls when already checked."""
    segment = snapshot.logSegment()
    provider = segment.checkpointProvider()
    checkpoint = (path, int(provider.version()))
    if checkpoint[1] >= 0 and checkpoint not in _checked_checkpoints:
        convert = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters  # type: ignore[union-attr]
        for status in convert.asJava(provider.topLevelFiles()):
            _check_checkpoint(path, spark, status)
        with _lock:
            _checked_checkpoints.add(checkpoint)
    deltas = segment.deltas()
    if deltas.isEmpty():
        return
    last = deltas.last()
    version, size = int(snapshot.version()), int(last.getLen())
    if _checked.get(path) == (version, size):
        return
    name = last.getPath().getName()
    if size == 0:
        raise DamagedTableError(path, f"its last commit {name} is an empty file (zero bytes)")
    try:
        text = _read(spark, last.getPath(), size).decode("utf-8", errors="replace")
    except Py4JJavaError as error:  # e.g. a checksum error: the file changed after it was written
        raise DamagedTableError(
            path, f"its last commit {name} cannot be read: {_delta_says(error)}"
        ) from None
    for number, line in enumerate(text.splitlines(), 1):
        try:
            action = json.loads(line)
        except ValueError:
            action = None
        if not isinstance(action, dict):
            raise DamagedTableError(
                path,
                f"its last commit {name} cannot be parsed (line {number} is not a JSON action: truncated?)",
            )
    with _lock:
        _checked[path] = (version, size)


def _check_checkpoint(path: str, spark: SparkSession, status: Any) -> None:
    """Raise unless a Parquet checkpoint file ends with Parquet's magic bytes (four bytes read)."""
    if not str(status.getPath()).endswith(".parquet"):
        return
    size = int(status.getLen())
    try:
        whole = size >= 8 and _read(spark, status.getPath(), 4, at=size - 4) == _PARQUET_MAGIC
    except Py4JJavaError:
        whole = False
    if not whole:
        raise DamagedTableError(
            path, f"its checkpoint {status.getPath().getName()} is truncated (not a whole Parquet file)"
        )


def _read(spark: SparkSession, hadoop_path: Any, length: int, at: int = 0) -> bytes:
    """``length`` bytes of a file from ``at``, through Hadoop (any file system Spark reaches)."""
    stream = hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).open(hadoop_path)  # type: ignore[union-attr]
    try:
        if at:
            stream.seek(at)
        return bytes(jvm_class(spark, "org.apache.commons.io.IOUtils").toByteArray(stream, length))
    finally:
        stream.close()


def names_missing_files(method: _Method) -> _Method:
    """Decorate a method of a table handle (an object with ``spark``) whose Spark jobs read a table's
    data files: Spark's error for a data file that no longer exists becomes one
    :class:`~lakehouse.errors.DamagedTableError` line naming the table, the file and what to do.

    Costs nothing until a job fails: the check runs on the failure only (a few file system calls). A
    write that reads the missing file fails before its commit, so nothing is written; a write that does
    not reach it commits (its cost follows its batch, not the table: ``lakehouse doctor TABLE`` checks
    every file).
    """

    @functools.wraps(method)
    def named(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as error:
            damage = missing_file_damage(self.spark, error)
            if damage is None:
                raise
            raise damage from None

    return named  # type: ignore[return-value]


def missing_file_damage(spark: SparkSession, error: BaseException) -> DamagedTableError | None:
    """The :class:`DamagedTableError` of a Spark error raised reading a data file that does not exist
    (any table: found by the ``_delta_log`` next to one of the file's parent folders), else None."""
    text = str(error)
    if "FAILED_READ_FILE" not in text and "FileNotFoundException" not in text:
        return None
    for found in dict.fromkeys(_DATA_FILE.findall(text)):
        if _exists(spark, found):
            continue
        folder = found
        while "/" in folder.rstrip("/"):
            folder = folder.rstrip("/").rsplit("/", 1)[0]
            if _exists(spark, f"{folder}/_delta_log"):
                name = unquote(found[len(folder) + 1 :])
                return DamagedTableError(folder, f"its data file {name} is missing (deleted from storage)")
    return None


def _exists(spark: SparkSession, path: str) -> bool:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return bool(hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(hadoop_path))  # type: ignore[union-attr]
