"""RocksDBVersionedStoreTest's scenarios (kafka-semantics.md §1.10) as data.

Times are milliseconds after the epoch. ``HR = 300_000``, ``SI = HR / 3``, ``B = 10`` as in Kafka's test.
Operations:
- ``Put(key, value, ts, expect)``: ``expect`` is ``LATEST`` (-1), ``NOT_PUT`` (Long.MIN_VALUE) or the
  returned validTo;
- ``Get(key, as_of, expect)``: ``as_of`` None is ``get(key)``; ``expect`` None or ``(value, from, to)``
  with ``to`` None for the latest version;
- ``Delete(key, ts, expect)``: ``expect`` None or ``(value, from)`` of the record valid at ts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HR = 300_000
SI = HR // 3
B = 10
LATEST = "latest"
NOT_PUT = "not_put"


@dataclass(frozen=True)
class Put:
    key: str
    value: str | None
    ts: int
    expect: str | int


@dataclass(frozen=True)
class Get:
    key: str
    as_of: int | None
    expect: tuple[str, int, int | None] | None


@dataclass(frozen=True)
class Delete:
    key: str
    ts: int
    expect: tuple[str, int] | None


@dataclass(frozen=True)
class Scenario:
    name: str
    ops: tuple[Any, ...]
    history_retention: int = HR
    segment_interval: int = SI


def _puts(key: str, *triples: tuple[str | None, int, str | int]) -> list[Put]:
    return [Put(key, value, ts, expect) for value, ts, expect in triples]


def _gets(key: str, *pairs: tuple[int | None, tuple[str, int, int | None] | None]) -> list[Get]:
    return [Get(key, as_of, expect) for as_of, expect in pairs]


_OLDER = [("v2", B - 2, B), ("v1", B - 1, B), ("v4", B - 4, B - 2)]
_OLDER_GETS = [(B - 1, ("v1", B - 1, B)), (B - 2, ("v2", B - 2, B - 1)), (B - 3, ("v4", B - 4, B - 2))]
_REPEAT_GETS = [
    (None, None),
    (SI + 30, None),
    (SI + 15, None),
    (SI + 6, ("vp5", SI + 5, SI + 10)),
    (SI + 2, None),
    (SI, None),
    (SI - 1, None),
    (SI - 5, ("vn5", SI - 5, SI - 1)),
    (SI - 6, ("vn6", SI - 6, SI - 5)),
    (SI - 8, None),
]
_NULLS_INTO_OLDER = [
    (None, SI + 20, LATEST),
    (None, SI - 1, SI + 20),
    (None, SI + 1, SI + 20),
    (None, SI - 10, SI - 1),
    (None, SI + 10, SI + 20),
]

SCENARIOS = [
    Scenario(
        "shouldPutLatest",
        (
            *_puts("k", ("v", B, LATEST), ("v2", B + 1, LATEST)),
            *_gets(
                "k",
                (None, ("v2", B + 1, None)),
                (B, ("v", B, B + 1)),
                (B + 1, ("v2", B + 1, None)),
                (B + 2, ("v2", B + 1, None)),
            ),
        ),
    ),
    Scenario(
        "shouldPutNullAsLatest",
        (
            *_puts("k", (None, B, LATEST), (None, B + 1, LATEST)),
            *_gets("k", (None, None), (B, None), (B + 1, None), (B + 2, None)),
        ),
    ),
    Scenario(
        "shouldPutOlderWithNonNullLatest",
        (
            *_puts("k", ("v", B, LATEST), *_OLDER),
            *_gets("k", (None, ("v", B, None)), (B, ("v", B, None)), *_OLDER_GETS),
        ),
    ),
    Scenario(
        "shouldPutOlderWithNullLatest",
        (
            *_puts("k", (None, B, LATEST), *_OLDER),
            *_gets("k", (None, None), (B, None), *_OLDER_GETS),
        ),
    ),
    Scenario(
        "shouldPutOlderNullWithNonNullLatest",
        (
            *_puts(
                "k",
                ("v", B, LATEST),
                (None, B - 2, B),
                (None, B - 1, B),
                (None, B - 4, B - 2),
                ("v5", B - 5, B - 4),
                ("v3", B - 3, B - 2),
                (None, B - 6, B - 5),
            ),
            *_gets(
                "k",
                (None, ("v", B, None)),
                (B, ("v", B, None)),
                (B - 1, None),
                (B - 2, None),
                (B - 3, ("v3", B - 3, B - 2)),
                (B - 4, None),
                (B - 5, ("v5", B - 5, B - 4)),
                (B - 6, None),
            ),
        ),
    ),
    Scenario(
        "shouldPutOlderNullWithNullLatest",
        (
            *_puts(
                "k",
                (None, B, LATEST),
                (None, B - 2, B),
                (None, B - 1, B),
                (None, B - 4, B - 2),
                ("v3", B - 3, B - 2),
                ("v5", B - 5, B - 4),
                (None, B - 6, B - 5),
            ),
            *_gets(
                "k",
                (None, None),
                (B, None),
                (B - 1, None),
                (B - 2, None),
                (B - 3, ("v3", B - 3, B - 2)),
                (B - 4, None),
                (B - 5, ("v5", B - 5, B - 4)),
                (B - 6, None),
            ),
        ),
    ),
    Scenario(
        "shouldPutRepeatTimestampAsLatest",
        (
            *_puts("k", ("x", B, LATEST), ("b", B, LATEST)),
            *_gets("k", (None, ("b", B, None)), (B, ("b", B, None)), (B - 1, None)),
            *_puts("k", (None, B, LATEST)),
            *_gets("k", (None, None), (B, None)),
            *_puts("k", (None, B, LATEST)),
            *_gets("k", (None, None), (B, None)),
            *_puts("k", ("b", B, LATEST)),
            *_gets("k", (None, ("b", B, None)), (B, ("b", B, None))),
        ),
    ),
    Scenario(
        "shouldPutRepeatTimestamps",
        (
            *_puts(
                "k",
                ("x", SI + 20, LATEST),
                (None, SI - 10, SI + 20),
                ("x", SI - 10, SI + 20),
                (None, SI - 10, SI + 20),
                ("x", SI - 1, SI + 20),
                ("x", SI + 1, SI + 20),
                (None, SI - 1, SI + 1),
                (None, SI + 1, SI + 20),
                (None, SI + 10, SI + 20),
                (None, SI + 5, SI + 10),
                ("vp5", SI + 5, SI + 10),
                ("x", SI - 5, SI - 1),
                ("vn5", SI - 5, SI - 1),
                (None, SI + 20, LATEST),
                (None, SI + 20, LATEST),
                ("vn6", SI - 6, SI - 5),
            ),
            *_gets("k", *_REPEAT_GETS),
        ),
    ),
    Scenario(
        "shouldPutIntoMultipleSegments",
        (
            *_puts(
                "k",
                (None, SI - 20, LATEST),
                ("vn10", SI - 10, LATEST),
                (None, SI - 1, LATEST),
                (None, SI + 1, LATEST),
                ("vp10", SI + 10, LATEST),
                (None, SI + 20, LATEST),
            ),
            *_gets(
                "k",
                (None, None),
                (SI + 30, None),
                (SI + 15, ("vp10", SI + 10, SI + 20)),
                (SI + 5, None),
                (SI + 2, None),
                (SI, None),
                (SI - 1, None),
                (SI - 5, ("vn10", SI - 10, SI - 1)),
                (SI - 15, None),
            ),
        ),
    ),
    Scenario(
        "shouldMoveRecordToOlderSegmentDuringPut",
        (
            *_puts(
                "k",
                ("vp20", SI + 20, LATEST),
                ("vp10", SI + 10, SI + 20),
                ("vn10", SI - 10, SI + 10),
                ("vn2", SI - 2, SI + 10),
                ("vn1", SI - 1, SI + 10),
                ("vp1", SI + 1, SI + 10),
            ),
            *_gets(
                "k",
                (None, ("vp20", SI + 20, None)),
                (SI + 30, ("vp20", SI + 20, None)),
                (SI + 15, ("vp10", SI + 10, SI + 20)),
                (SI + 5, ("vp1", SI + 1, SI + 10)),
                (SI, ("vn1", SI - 1, SI + 1)),
                (SI - 1, ("vn1", SI - 1, SI + 1)),
                (SI - 2, ("vn2", SI - 2, SI - 1)),
                (SI - 5, ("vn10", SI - 10, SI - 2)),
            ),
        ),
    ),
    Scenario(
        "shouldMoveRecordToOlderSegmentWithNullsDuringPut",
        (
            *_puts(
                "k",
                *_NULLS_INTO_OLDER,
                ("vp5", SI + 5, SI + 10),
                ("vn5", SI - 5, SI - 1),
                ("vn6", SI - 6, SI - 5),
            ),
            *_gets("k", *_REPEAT_GETS),
        ),
    ),
    Scenario(
        "shouldFallThroughToExistingOlderSegmentAsLatestDuringPut",
        (
            *_puts(
                "k",
                (None, SI - 5, LATEST),
                ("vn6", SI - 6, SI - 5),
                ("vp20", SI + 20, LATEST),
                (None, SI + 10, SI + 20),
                (None, SI - 1, SI + 10),
                ("vn2", SI - 2, SI - 1),
            ),
            *_gets(
                "k",
                (None, ("vp20", SI + 20, None)),
                (SI + 30, ("vp20", SI + 20, None)),
                (SI + 12, None),
                (SI, None),
                (SI - 1, None),
                (SI - 2, ("vn2", SI - 2, SI - 1)),
                (SI - 5, None),
                (SI - 6, ("vn6", SI - 6, SI - 5)),
            ),
        ),
    ),
    Scenario(
        "shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo",
        (
            *_puts(
                "k",
                ("vp30", SI + 30, LATEST),
                (None, SI - 10, SI + 30),
                ("vn5", SI - 5, SI + 30),
                ("vn1", SI - 1, SI + 30),
                (None, SI - 2, SI - 1),
            ),
            *_gets(
                "k",
                (None, ("vp30", SI + 30, None)),
                (SI + 10, ("vn1", SI - 1, SI + 30)),
                (SI - 1, ("vn1", SI - 1, SI + 30)),
                (SI - 2, None),
                (SI - 5, ("vn5", SI - 5, SI - 2)),
                (SI - 10, None),
            ),
        ),
    ),
    Scenario(
        "shouldDelete",
        (
            *_puts(
                "k",
                ("vp20", SI + 20, LATEST),
                ("vp10", SI + 10, SI + 20),
                ("vn10", SI - 10, SI + 10),
                ("vn2", SI - 2, SI + 10),
            ),
            Delete("k", SI - 5, ("vn10", SI - 10)),
            Delete("k", SI + 10, ("vp10", SI + 10)),
            Delete("k", SI + 10, None),
            Delete("k", SI + 25, ("vp20", SI + 20)),
        ),
    ),
    Scenario(
        "shouldNotPutExpired",
        (
            Put("k", "v", HR + 10, LATEST),
            Put("k1", "v1", 10, LATEST),
            Get("k1", None, ("v1", 10, None)),
            Put("k2", "v2", 9, NOT_PUT),
            Get("k2", None, None),
        ),
    ),
    Scenario(
        "shouldNotDeleteExpired",
        (
            Put("k1", "v1", 1, LATEST),
            Put("k2", "v2", 1, LATEST),
            Put("kother", "vo", HR + 10, LATEST),
            Delete("k1", 10, ("v1", 1)),
            Get("k1", None, None),
            Delete("k2", 9, None),
            Get("k2", None, ("v2", 1, None)),
        ),
    ),
    Scenario(
        "shouldGetFromOlderSegments",
        (
            *_puts("k", ("v", SI - 20, LATEST), (None, SI - 10, LATEST)),
            *_puts("ko", (None, SI + 10, LATEST), (None, 2 * SI + 10, LATEST), (None, 3 * SI + 10, LATEST)),
            *_gets("k", (SI - 15, ("v", SI - 20, SI - 10)), (SI - 30, None), (SI - 5, None)),
        ),
    ),
    Scenario(
        "shouldNotGetExpired",
        (
            *_puts("k", ("v_old", 0, LATEST), ("v", SI - 10, LATEST)),
            Get("k", SI - 11, ("v_old", 0, SI - 10)),
            Put("ko", "vo", HR + SI - 11, LATEST),
            Get("k", SI - 11, ("v_old", 0, SI - 10)),
            Put("ko", "vo", HR + SI - 10, LATEST),
            Get("k", SI - 11, None),
        ),
    ),
    Scenario(
        "shouldGetExpiredIfLatestValue",
        (
            Put("k", "v", 1, LATEST),
            Put("ko", "vo_old", 1, LATEST),
            Put("ko", "vo_new", HR + 12, LATEST),
            Get("k", 10, ("v", 1, None)),
            Get("ko", 10, None),
        ),
    ),
    Scenario(
        "shouldDistinguishEmptyAndNull",
        (
            *_puts(
                "k", *_NULLS_INTO_OLDER, ("", SI + 5, SI + 10), ("", SI - 5, SI - 1), ("", SI - 6, SI - 5)
            ),
            *_gets(
                "k",
                (None, None),
                (SI + 30, None),
                (SI + 15, None),
                (SI + 6, ("", SI + 5, SI + 10)),
                (SI + 2, None),
                (SI, None),
                (SI - 1, None),
                (SI - 5, ("", SI - 5, SI - 1)),
                (SI - 6, ("", SI - 6, SI - 5)),
                (SI - 8, None),
            ),
        ),
    ),
    Scenario(
        "shouldRestoreEvenIfRecordWouldBeExpiredByEndOfBatch",
        (
            Put("k2", "v2", 0, LATEST),
            Put("k", "v", HR + 10, LATEST),
            Get("k2", None, ("v2", 0, None)),
            Get("k", None, ("v", HR + 10, None)),
        ),
    ),
    Scenario(
        "shouldAllowZeroHistoryRetention",
        (
            Put("k", "v", B, LATEST),
            Get("k", None, ("v", B, None)),
            Put("k", "v2", B, LATEST),
            Get("k", B, ("v2", B, None)),
            Put("k", "v3", B + 2, LATEST),
            Get("k", B + 1, None),
            Put("ko", "vo", B + 3, LATEST),
            Put("k2", "v", B + 2, NOT_PUT),
            Get("k2", None, None),
        ),
        history_retention=0,
        segment_interval=2_000,
    ),
]
