"""When a versioned store seals itself: the bound on the read amplification of its pending rows.

Every read of a store (``get``, ``as_of``, the as-of join, the SQL view) resolves the pending rows against
the sealed rows of their keys (:mod:`lakehouse.versioned.pending`): on top of the scan of the latest
versions (one row per live key) that any read pays, it reads the pending rows and the sealed rows of the
pending keys, and orders them in one window per key. That extra work grows with the pending rows, and a
schedule that seals only nightly lets them grow all day. A seal reads the latest versions too (one row
per live key) and rewrites the pending keys' versions, so once the pending rows are a sizeable fraction of
the live keys, every read pays a sizeable fraction of a seal.

:class:`SealPolicy` bounds that ratio: a ``put_all`` batch that leaves at least ``pending_per_live_key``
pending rows per live key (and at least ``min_rows``) seals the store right after its commit, whatever
schedule runs ``maintain``. The pending rows are counted from the store's commit metadata (the records
each batch accepted since the newest seal, an upper bound: a batch may replace pending versions), the live
keys as of the newest seal (the rows of the latest-version partition that the seal read): no Spark job
decides.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.errors import InvalidInputError


@dataclass(frozen=True)
class SealPolicy:
    """Seal after a batch once its pending rows reach ``pending_per_live_key`` x the live keys and
    ``min_rows`` (both inclusive).

    Attributes:
        pending_per_live_key: Pending rows per live key (``> 0``) at which reads have paid enough: with
            0.1 a store of 1M keys seals every 100k pending rows (``bench/RESULTS_steady.md`` measures
            what pending rows cost the pipeline's reads).
        min_rows: Never seal for fewer pending rows than this (``>= 0``): a small store's reads do not
            pay for a seal per batch.
    """

    pending_per_live_key: float = 0.1
    min_rows: int = 10_000

    def __post_init__(self) -> None:
        if not self.pending_per_live_key > 0:
            raise InvalidInputError(f"pending_per_live_key must be > 0, got {self.pending_per_live_key}")
        if self.min_rows < 0:
            raise InvalidInputError(f"min_rows must be >= 0, got {self.min_rows}")

    def due(self, pending_rows: int, live_keys: int) -> bool:
        """Whether a store with ``pending_rows`` pending rows and ``live_keys`` live keys should seal."""
        return pending_rows >= max(self.min_rows, self.pending_per_live_key * live_keys)
