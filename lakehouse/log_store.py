"""Which of Delta's log stores commits a table's versions, and whether it arbitrates between Spark drivers.

Delta commits version ``N`` of a table by creating ``_delta_log/N.json``, and two writers' commits are kept
apart only if the storage lets exactly one of them create that file (Delta's "mutual exclusion"). On a
local or HDFS file system an atomic rename does it. S3 has no atomic rename, so on ``s3``/``s3a``/``s3n``
paths Delta 4.4 uses ``S3SingleDriverLogStore``: it checks that ``N.json`` does not exist and then writes
it (S3A sends a HEAD, then a plain PUT), holding a lock of its own JVM between the two. That arbitrates the
threads of **one** driver; two drivers committing the same version at once can both succeed, and the
first commit is silently overwritten. Delta's multi-cluster answer is ``S3DynamoDBLogStore`` (the
``delta-storage-s3-dynamodb`` artifact, mutual exclusion through a DynamoDB table). Delta 4.4's S3 log
store does not use S3's conditional ``PUT`` (``If-None-Match: *``), although S3A 3.5 can send it
(``createFile().must("fs.option.create.conditional.overwrite", true)``) and AWS S3 and SeaweedFS honour it.

lakehouse's writers (``writer=`` names: pipelines sharing a store or a seen-ID index) rely on Delta's
arbitration: :func:`warn_unless_arbitrated` warns once per table and process, loudly, when a second named
writer commits to such a table whose log store cannot arbitrate between drivers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from lakehouse.errors import UnarbitratedWritersWarning

#: Delta's log stores that arbitrate the commits of one driver only (Java and Scala classes of that name).
SINGLE_DRIVER_STORES = ("S3SingleDriverLogStore",)
#: Tables already warned about in this process (one warning per table).
_WARNED: set[str] = set()
#: Per table path, whether its log store arbitrates between drivers (a path's store is fixed per process).
_ARBITRATED: dict[str, bool] = {}


def log_store_class(snapshot: Any) -> str:
    """The class name of the log store that commits ``snapshot``'s table (Delta's choice for its path's
    scheme and the session's ``spark.delta.logStore.*`` confs: the same object Delta commits through)."""
    store = snapshot.deltaLog().store()
    if store.getClass().getSimpleName() == "DelegatingLogStore":
        jvm_path = snapshot.deltaLog().logPath()
        store = store.getDelegate(jvm_path)
    if store.getClass().getSimpleName() == "LogStoreAdaptor":
        store = store.logStoreImpl()
    return str(store.getClass().getName())


def arbitrates_between_drivers(snapshot: Any) -> bool:
    """Whether two Spark drivers committing to ``snapshot``'s table at once are kept apart by its log store
    (False for Delta's single-driver S3 log store; any other store is taken at its word)."""
    return log_store_class(snapshot).rsplit(".", 1)[-1] not in SINGLE_DRIVER_STORES


def warn_unless_arbitrated(snapshot: Any, path: str, writers: Callable[[], Iterable[str]]) -> None:
    """Warn (:class:`UnarbitratedWritersWarning`, once per ``path`` and process) when the table's log store
    cannot arbitrate between drivers and more than one of ``writers()`` (called only then) commits to it."""
    if path in _WARNED:
        return
    if path not in _ARBITRATED:
        _ARBITRATED[path] = arbitrates_between_drivers(snapshot)
    names = [] if _ARBITRATED[path] else sorted(set(writers()))
    if len(names) < 2:
        return
    _WARNED.add(path)
    shown = ", ".join(repr(name) for name in names)
    warnings.warn(
        UnarbitratedWritersWarning(
            f"{path}: writers {shown} commit to this table through Delta's {log_store_class(snapshot)}, "
            "which keeps apart the commits of ONE Spark driver only: two drivers committing at once can "
            "silently lose a commit. Run these writers in one driver, or configure Delta's "
            "S3DynamoDBLogStore (see 'Object storage' in docs/pipeline.md)"
        ),
        stacklevel=3,
    )
