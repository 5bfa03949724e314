"""JVM-free reads of lakehouse state through delta-rs (``deltalake``): stores, SQL, the tables of a warehouse.

``lakehouse.read.store(path).get(key, as_of=...)`` answers like :meth:`VersionedStore.get` in milliseconds
from a fresh process. A table whose protocol delta-rs cannot read right raises
:class:`~lakehouse.errors.EngineUnsupportedError` before anything is read: read it with Spark then.
"""

from lakehouse.read.engine import READER_FEATURES, find_local_tables, open_table, run_sql, unreadable_reason
from lakehouse.read.store import StoreReader, store

__all__ = [
    "READER_FEATURES",
    "StoreReader",
    "find_local_tables",
    "open_table",
    "run_sql",
    "store",
    "unreadable_reason",
]
