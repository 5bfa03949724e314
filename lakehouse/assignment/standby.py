"""Rack-aware standby placement (KIP-708) on the least-loaded clients.

For each stateful task, in task order, standbys are chosen one at a time. A candidate's *gain* is, for
each rack-aware tag key in precedence order, whether its value is new among the task's replicas so far
(the active and the standbys already chosen). The next standby goes to a client with the
lexicographically greatest gain, least-loaded first (load = replicas / capacity, ties to the smaller id).

That is KIP-708's algorithm with its fallback made gradual:

* Absolute preference: a client differing from every replica on every tag key (gain all ones).
* A key whose values are all used cannot distinguish clients any more (Kafka: "exhausted"), so the
  remaining keys decide: the partially preferred distribution.
* When no client differs on every remaining key, the lowest-precedence key is given up first (Kafka
  falls back to least-loaded at once); when nothing differs at all, the least-loaded client wins
  (the least preferred distribution).

Stickiness: among the clients of the best gain, a client that already has state for the task (the
previous active or a standby, most caught-up first) is kept while it stays within its balanced share of
replicas or is less loaded than the least-loaded candidate. A client that held the task as a standby in the
previous generation is also kept beyond its share when every client of that tier is at or beyond its
share (tags forced the placement; moving it would be churn without better balance), up to the number of
replicas it held then.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from itertools import groupby

from lakehouse.assignment._balance import Band
from lakehouse.assignment._context import Context
from lakehouse.assignment.state import AssignmentResult, ClientState, task_sort_key

Seen = tuple[bool, ...]
TagValues = tuple[str, ...]


def place_standby_targets(
    ctx: Context, active_targets: Mapping[str, str], per_task: int
) -> dict[str, tuple[str, ...]]:
    """Stateful task -> its standby clients (phase 2), ``per_task`` of them, in the order chosen.

    Tasks are placed grouped by active client, as Kafka does, so that the standbys of one client's tasks
    spread over many least-loaded clients: when it fails, its load is shared rather than moved to one.
    """
    if per_task == 0:
        return {task: () for task in ctx.stateful}
    placer = _Placer(ctx, active_targets, per_task)
    by_active = sorted(ctx.stateful, key=lambda t: (active_targets[t], task_sort_key(t)))
    placed = {task: placer.place(task, active_targets[task], per_task) for task in by_active}
    return {task: placed[task] for task in ctx.stateful}


class _Placer:
    """Clients grouped by their rack-aware tag values; each group a least-loaded heap.

    A client holding the task already has only used values, so it can only be in the tier without any
    gain: every other tier picks from the group minimums directly.
    """

    def __init__(self, ctx: Context, active_targets: Mapping[str, str], per_task: int) -> None:
        self.ctx = ctx
        self.load = dict.fromkeys(ctx.pids, 0)
        for pid in active_targets.values():
            self.load[pid] += 1
        self.ratio = {pid: self.load[pid] / ctx.capacity[pid] for pid in ctx.pids}
        self.share = Band(len(ctx.stateful) * (1 + per_task), ctx.capacity).hi
        self.heaps: dict[TagValues, list[tuple[float, str]]] = {}
        for pid in ctx.pids:
            self.heaps.setdefault(ctx.tags[pid], []).append((self.ratio[pid], pid))
        for heap in self.heaps.values():
            heapq.heapify(heap)
        self.group_min = {group: heap[0] for group, heap in self.heaps.items()}
        self._tiers: dict[tuple[frozenset[str], ...], list[tuple[Seen, list[TagValues]]]] = {}

    def place(self, task: str, active: str, count: int) -> tuple[str, ...]:
        holders = {active}
        used = [{value} for value in self.ctx.tags[active]]
        chosen: list[str] = []
        for _ in range(count):
            pid = self._pick(task, holders, used)
            chosen.append(pid)
            holders.add(pid)
            for values, value in zip(used, self.ctx.tags[pid], strict=True):
                values.add(value)
            self._add_replica(pid)
        return tuple(chosen)

    def _add_replica(self, pid: str) -> None:
        self.load[pid] += 1
        self.ratio[pid] = self.load[pid] / self.ctx.capacity[pid]
        group = self.ctx.tags[pid]
        heap = self.heaps[group]
        heapq.heappush(heap, (self.ratio[pid], pid))
        while heap[0][0] != self.ratio[heap[0][1]]:
            heapq.heappop(heap)
        self.group_min[group] = heap[0]

    def _pick(self, task: str, holders: set[str], used: list[set[str]]) -> str:
        for seen, groups in self._tiers_for(used):
            if not all(seen):
                head: tuple[float, str] | None = min(map(self.group_min.__getitem__, groups))
            else:
                head = min(filter(None, (self._head(group, holders) for group in groups)), default=None)
            if head is not None:
                return self._sticky(task, holders, used, seen, head) or head[1]
        raise AssertionError(f"no client left for a standby of {task}")

    def _sticky(
        self, task: str, holders: set[str], used: list[set[str]], seen: Seen, head: tuple[float, str]
    ) -> str | None:
        least, least_pid = head
        tier_is_full = self.load[least_pid] >= self.share[least_pid]
        for pid in self.ctx.state_holders[task]:
            if pid in holders or _seen(self.ctx.tags[pid], used) != seen:
                continue
            if self.load[pid] < self.share[pid] or self.ratio[pid] < least:
                return pid
            # A previous standby beyond its share keeps the standby when even the least-loaded client of
            # the tier has no room (tags forced it there; a move would not improve balance), up to the
            # replicas it held before.
            if (
                tier_is_full
                and task in self.ctx.prev_standby[pid]
                and self.load[pid] < self.ctx.prev_load[pid]
            ):
                return pid
        return None

    def _head(self, group: TagValues, holders: set[str]) -> tuple[float, str] | None:
        """The least-loaded client of ``group`` that does not hold the task yet."""
        if self.group_min[group][1] not in holders:
            return self.group_min[group]
        valid = (entry for entry in self.heaps[group] if entry[0] == self.ratio[entry[1]])
        return min((entry for entry in valid if entry[1] not in holders), default=None)

    def _tiers_for(self, used: list[set[str]]) -> list[tuple[Seen, list[TagValues]]]:
        """Groups by descending gain (ascending :func:`_seen`) for these used values.

        Cached: many tasks share the same used values.
        """
        signature = tuple(frozenset(values) for values in used)
        tiers = self._tiers.get(signature)
        if tiers is None:
            ranked = sorted((_seen(group, used), group) for group in self.heaps)
            tiers = [
                (seen, [group for _, group in members])
                for seen, members in groupby(ranked, key=lambda ranked_group: ranked_group[0])
            ]
            self._tiers[signature] = tiers
        return tiers


def _seen(values: TagValues, used: Sequence[set[str]]) -> Seen:
    """Per tag key, whether the value is used by the task's replicas already. Gain is its negation:
    a lexicographically smaller ``_seen`` is a greater gain."""
    return tuple(map(set.__contains__, used, values))


def tag_diversity(
    result: AssignmentResult, clients: Mapping[str, ClientState], keys: Sequence[str]
) -> dict[str, tuple[int, ...]]:
    """Stateful task -> number of distinct values of each tag key among its active and standbys.

    Tasks without standbys are left out.
    """
    replicas: dict[str, list[str]] = {}
    for pid, held in result.clients.items():
        for task in held.standby:
            replicas.setdefault(task, []).append(pid)
    for task, pid in result.active_owners().items():
        if task in replicas:
            replicas[task].append(pid)
    return {
        task: tuple(len({clients[pid].tags[key] for pid in pids}) for key in keys)
        for task, pids in replicas.items()
    }
