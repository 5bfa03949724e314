"""Balance primitives: a capacity-proportional band of task counts and a lazy least-loaded queue."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping


class Band:
    """Counts of tasks per client that are balanced: each client ends at the floor or ceiling of its share.

    The share of client c is ``total * capacity[c] / sum(capacity)``. Holding every client at
    ``floor(share)`` or ``ceil(share)`` keeps the per-thread load ``count / capacity`` of any two clients
    within 1 of each other (Kafka's balance criterion). ``spare`` counts the clients that may still go to the
    ceiling.
    """

    def __init__(self, total: int, capacity: Mapping[str, int]) -> None:
        threads = sum(capacity.values())
        self.capacity = capacity
        self.lo = {pid: total * cap // threads for pid, cap in capacity.items()}
        self.hi = {pid: self.lo[pid] + (total * cap % threads > 0) for pid, cap in capacity.items()}
        self.spare = total - sum(self.lo.values())
        self.count = dict.fromkeys(capacity, 0)

    def can_take(self, pid: str) -> bool:
        """Whether one more task keeps ``pid`` within the band. Once False it stays False."""
        count = self.count[pid]
        return count < self.lo[pid] or (count < self.hi[pid] and self.spare > 0)

    def take(self, pid: str) -> None:
        """Count one more task on ``pid`` (the caller checked :meth:`can_take`)."""
        if self.count[pid] >= self.lo[pid]:
            self.spare -= 1
        self.count[pid] += 1

    def load(self, pid: str) -> float:
        """Tasks per thread on ``pid`` so far."""
        return self.count[pid] / self.capacity[pid]


class LeastLoaded:
    """Clients by ascending ``key(pid)`` then id, where keys only ever grow.

    Entries are repaired lazily: a popped entry whose key is out of date is pushed back with its current
    key, so updating a client's load costs nothing until it reaches the top.
    """

    def __init__(self, pids: Iterable[str], key: Callable[[str], float]) -> None:
        self._key = key
        self._heap = [(key(pid), pid) for pid in pids]
        heapq.heapify(self._heap)

    def least(self, eligible: Callable[[str], bool] = lambda _pid: True) -> str | None:
        """The least-loaded eligible client, or None. Ineligible clients are dropped for good."""
        heap = self._heap
        while heap:
            stored, pid = heap[0]
            current = self._key(pid)
            if stored != current:
                heapq.heapreplace(heap, (current, pid))
            elif not eligible(pid):
                heapq.heappop(heap)
            else:
                return pid
        return None
