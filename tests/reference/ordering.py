"""Reference model of Kafka Streams' task processing order (pure Python, for tests only).

A task holds one queue per source partition. It repeatedly takes the head record of the queue whose
partition time (the largest timestamp seen in that partition, the head included) is smallest, ties going
to the lower partition number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    ts: int


def processing_order(records: Sequence[Record]) -> list[Record]:
    """The records in the order a Kafka Streams task would process them."""
    queues = {
        p: sorted((r for r in records if r.partition == p), key=lambda r: r.offset)
        for p in {r.partition for r in records}
    }
    partition_time = {p: None for p in queues}
    processed: list[Record] = []
    while any(queues.values()):

        def head_time(p: int) -> int:
            seen = partition_time[p]
            head = queues[p][0].ts
            return head if seen is None else max(seen, head)

        chosen = min((p for p in queues if queues[p]), key=lambda p: (head_time(p), p))
        partition_time[chosen] = head_time(chosen)
        processed.append(queues[chosen].pop(0))
    return processed
