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

Stickiness and balance, in three steps:

1. **Keep**: every previous standby of a task stays (up to the standbys per task, greatest gain first),
   whatever its load.
2. **Fill and improve**: the remaining slots are placed as above; among the clients of the best gain, a
   client that already has state for the task (most caught-up first) is preferred while it stays within
   its balanced share of replicas or is less loaded than the least-loaded candidate. Then, while some
   standby of the task could be replaced by a client that gains more (its tag diversity is not locally
   optimal), it is replaced.
3. **Balance** (:func:`balance_standbys`): standbys move from clients over their capacity-proportional
   share of all replicas to clients under it, only where the task's diversity stays locally optimal and
   at least as high.

A result fed back (same clients and actives, every standby caught up) is therefore a fixed point: the
keep step keeps every standby, nothing is left to fill or improve, and balancing had stopped there.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    tiers = _Tiers(ctx.tags.values())
    placer = _Placer(ctx, active_targets, per_task, tiers)
    by_active = sorted(ctx.stateful, key=lambda t: (active_targets[t], task_sort_key(t)))
    kept = {task: placer.keep(task, active_targets[task], per_task) for task in by_active}
    placed = {task: placer.place(task, active_targets[task], kept[task], per_task) for task in by_active}
    return balance_standbys(
        ctx, active_targets, {task: placed[task] for task in ctx.stateful}, per_task, tiers
    )


class _Tiers:
    """The groups of clients (their rack-aware tag values), ranked by gain for a task's used values.

    Cached: many tasks share the same used values.
    """

    def __init__(self, groups: Iterable[TagValues]) -> None:
        self.groups = sorted(set(groups))
        self._cache: dict[tuple[frozenset[str], ...], list[tuple[Seen, list[TagValues]]]] = {}

    def ranked(self, used: Sequence[set[str]]) -> list[tuple[Seen, list[TagValues]]]:
        """Groups by descending gain (ascending :func:`_seen`)."""
        signature = tuple(frozenset(values) for values in used)
        tiers = self._cache.get(signature)
        if tiers is None:
            ranked = sorted((_seen(group, used), group) for group in self.groups)
            tiers = [
                (seen, [group for _, group in members])
                for seen, members in groupby(ranked, key=lambda ranked_group: ranked_group[0])
            ]
            self._cache[signature] = tiers
        return tiers

    def improvable(self, tags: Mapping[str, TagValues], active: str, standbys: Sequence[str]) -> int | None:
        """The index of the first standby that another client would replace with more tag diversity.

        A standby is in the best tier for the task's other replicas unless some client (holding nothing
        of the task, necessarily) gains more. None when every standby is (the task's placement is
        locally optimal: no single move increases its diversity).
        """
        replicas = (active, *standbys)
        if all(
            len(set(values)) == len(replicas) for values in zip(*map(tags.__getitem__, replicas), strict=True)
        ):
            return None  # every replica has its own value of every key: nothing can gain more
        for index, pid in enumerate(standbys):
            used = used_values(tags, [other for other in replicas if other != pid])
            seen = _seen(tags[pid], used)
            if any(seen) and seen != self.ranked(used)[0][0]:
                return index
        return None


class _Placer:
    """Clients grouped by their rack-aware tag values; each group a least-loaded heap.

    A client holding the task already has only used values, so it can only be in the tier without any
    gain: every other tier picks from the group minimums directly.
    """

    def __init__(self, ctx: Context, active_targets: Mapping[str, str], per_task: int, tiers: _Tiers) -> None:
        self.ctx = ctx
        self.tiers = tiers
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

    def keep(self, task: str, active: str, count: int) -> tuple[str, ...]:
        """The previous standbys of ``task`` (up to ``count``, greatest gain first, then most caught up),
        whatever their load: balancing comes later. A previous standby that is not caught up is kept only
        while no caught-up client is free to take its place (it is a warm-up nothing else needs)."""
        ctx = self.ctx
        free = any(p != active and task not in ctx.prev_standby[p] for p in ctx.caught_up[task])
        candidates = [
            p
            for p in ctx.state_holders[task]
            if p != active and task in ctx.prev_standby[p] and (ctx.is_caught_up(task, p) or not free)
        ]
        used = [{value} for value in self.ctx.tags[active]]
        kept: list[str] = []
        while candidates and len(kept) < count:
            pid = min(candidates, key=lambda p: _seen(self.ctx.tags[p], used))
            candidates.remove(pid)
            kept.append(pid)
            for values, value in zip(used, self.ctx.tags[pid], strict=True):
                values.add(value)
            self._change_load(pid, 1)
        return tuple(kept)

    def place(self, task: str, active: str, kept: tuple[str, ...], count: int) -> tuple[str, ...]:
        """``kept`` and the standbys chosen to fill ``task``'s remaining slots, then improved until no
        single standby could move to a client that adds tag diversity."""
        holders = {active, *kept}
        chosen = list(kept)
        used = used_values(self.ctx.tags, [active, *chosen])
        for _ in range(count - len(kept)):
            pid = self._pick(task, holders, used)
            chosen.append(pid)
            holders.add(pid)
            for values, value in zip(used, self.ctx.tags[pid], strict=True):
                values.add(value)
            self._change_load(pid, 1)
        while (index := self.tiers.improvable(self.ctx.tags, active, chosen)) is not None:
            dropped = chosen[index]
            others = [active, *chosen[:index], *chosen[index + 1 :]]
            self._change_load(dropped, -1)
            chosen[index] = self._pick(task, {*others, dropped}, used_values(self.ctx.tags, others))
            self._change_load(chosen[index], 1)
        return tuple(chosen)

    def _change_load(self, pid: str, delta: int) -> None:
        self.load[pid] += delta
        self.ratio[pid] = self.load[pid] / self.ctx.capacity[pid]
        group = self.ctx.tags[pid]
        heap = self.heaps[group]
        heapq.heappush(heap, (self.ratio[pid], pid))
        while heap[0][0] != self.ratio[heap[0][1]]:
            heapq.heappop(heap)
        self.group_min[group] = heap[0]

    def _pick(self, task: str, holders: set[str], used: list[set[str]]) -> str:
        for seen, groups in self.tiers.ranked(used):
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
        least = head[0]
        for pid in self.ctx.state_holders[task]:
            if pid in holders or _seen(self.ctx.tags[pid], used) != seen:
                continue
            if self.load[pid] < self.share[pid] or self.ratio[pid] < least:
                return pid
        return None

    def _head(self, group: TagValues, holders: set[str]) -> tuple[float, str] | None:
        """The least-loaded client of ``group`` that does not hold the task yet."""
        if self.group_min[group][1] not in holders:
            return self.group_min[group]
        valid = (entry for entry in self.heaps[group] if entry[0] == self.ratio[entry[1]])
        return min((entry for entry in valid if entry[1] not in holders), default=None)


def balance_standbys(
    ctx: Context,
    active_targets: Mapping[str, str],
    standbys: Mapping[str, tuple[str, ...]],
    per_task: int,
    tiers: _Tiers | None = None,
) -> dict[str, tuple[str, ...]]:
    """Move standbys from clients over their share of all replicas to clients under it.

    A client's share is the ceiling of its capacity-proportional share of the actives and standbys of
    all stateful tasks. A standby moves only to a client under its share that holds nothing of the task,
    gains at least what the source gains (the task's tag diversity does not drop, in precedence order)
    and leaves no standby of the task that another client would replace with more diversity; the
    least-loaded such client takes it. Moves to caught-up clients (finished warm-ups) are made first, so
    a warm-up is not wasted on a client another move fills. Then the same at the floor of the share (at
    least 1): a client under it takes standbys it is caught up for from clients over it, a move that costs
    no restoration, so no client stays empty while another holds more than its share. Passes repeat
    until nothing can move, so a result fed back (same clients, same actives, every standby kept) moves
    nothing: it is a fixed point.
    """
    balancer = _Balancer(ctx, active_targets, standbys, per_task, tiers or _Tiers(ctx.tags.values()))
    while (
        balancer.run_pass(balancer.ceiling, caught_up_only=True)
        or balancer.run_pass(balancer.ceiling, caught_up_only=False)
        or balancer.run_pass(balancer.floor, caught_up_only=True)
    ):
        pass
    return {task: tuple(pids) for task, pids in balancer.placed.items()}


def fill_under_floor(ctx: Context, active: Mapping[str, str], standbys: dict[str, list[str]]) -> bool:
    """The floor pass of :func:`balance_standbys` alone, in place: after availability moved standbys, a
    client under the floor of its share takes standbys it is caught up for from clients over it.

    Returns:
        Whether a standby moved.
    """
    per_task = max((len(pids) for pids in standbys.values()), default=0)
    balancer = _Balancer(ctx, active, standbys, per_task, _Tiers(ctx.tags.values()))
    moved = False
    while balancer.run_pass(balancer.floor, caught_up_only=True):
        moved = True
    for task, pids in balancer.placed.items():
        standbys[task][:] = pids
    return moved


def shed_restoring(
    ctx: Context, active: Mapping[str, str], standbys: dict[str, list[str]], warmups: Mapping[str, list[str]]
) -> bool:
    """In place, after availability kept standbys on caught-up clients: a client over the ceiling of its
    share of replicas gives a standby it must restore itself to the least-loaded client under the ceiling
    that has the same tag values, holds nothing of the task and is no further behind. The standby restores
    there instead: no more restoration, the same tag diversity, and no later restore to undo the excess.

    Returns:
        Whether a standby moved.
    """
    per_task = max((len(pids) for pids in standbys.values()), default=0)
    ceiling = Band(len(ctx.stateful) * (1 + per_task), ctx.capacity).hi
    load = Counter(active.values())
    restoring: dict[str, list[str]] = {pid: [] for pid in ctx.pids}
    for task in ctx.stateful:
        for pid in standbys[task]:
            load[pid] += 1
            if not ctx.is_caught_up(task, pid):
                restoring[pid].append(task)
    groups: dict[TagValues, list[str]] = {}
    for pid in ctx.pids:
        if load[pid] < ceiling[pid]:
            groups.setdefault(ctx.tags[pid], []).append(pid)
    moved = False
    for source in ctx.pids:
        group = groups.get(ctx.tags[source], [])
        for task in restoring[source]:
            if load[source] <= ceiling[source] or not group:
                break
            holders = {active[task], *standbys[task], *warmups.get(task, ())}
            lag = ctx.lag(task, source)
            room = [p for p in group if p not in holders and ctx.lag(task, p) <= lag]
            if not room:
                continue
            target = min(room, key=lambda p: (load[p] / ctx.capacity[p], p))
            standbys[task][standbys[task].index(source)] = target
            load[source] -= 1
            load[target] += 1
            if load[target] >= ceiling[target]:
                group.remove(target)
            moved = True
    return moved


class _Balancer:
    """Replica counts per client against their shares, and the clients with room, least loaded first."""

    def __init__(
        self,
        ctx: Context,
        active_targets: Mapping[str, str],
        standbys: Mapping[str, tuple[str, ...]],
        per_task: int,
        tiers: _Tiers,
    ) -> None:
        self.ctx = ctx
        self.tiers = tiers
        self.active = active_targets
        self.order = {task: index for index, task in enumerate(ctx.stateful)}
        band = Band(len(ctx.stateful) * (1 + per_task), ctx.capacity)
        self.ceiling = band.hi
        self.floor = {pid: max(lo, 1) for pid, lo in band.lo.items()}
        self.load = Counter(active_targets.values())
        self.placed = {task: list(pids) for task, pids in standbys.items()}
        self.held: dict[str, set[str]] = {pid: set() for pid in ctx.pids}
        for task, pids in self.placed.items():
            for pid in pids:
                self.load[pid] += 1
                self.held[pid].add(task)

    def _rank(self, pid: str) -> tuple[float, str]:
        return self.load[pid] / self.ctx.capacity[pid], pid

    def run_pass(self, share: Mapping[str, int], caught_up_only: bool) -> bool:
        """Move what can move from each client over ``share`` to clients under it, in client then task
        order."""
        load = self.load
        under = _Under(self.ctx, (p for p in self.ctx.pids if load[p] < share[p]), self._rank)
        moved = False
        for source in [p for p in self.ctx.pids if load[p] > share[p]]:
            for task in sorted(self.held[source], key=self.order.__getitem__):
                if load[source] <= share[source] or not under.pids:
                    break
                target = self._destination(task, source, under, caught_up_only)
                if target is None:
                    continue
                self.placed[task][self.placed[task].index(source)] = target
                self.held[source].discard(task)
                self.held[target].add(task)
                load[source] -= 1
                load[target] += 1
                under.update(target, load[target] < share[target])
                moved = True
        return moved

    def _destination(self, task: str, source: str, under: _Under, caught_up_only: bool) -> str | None:
        """The first client with room that may take ``task``'s standby from ``source``."""
        active, placed, tags = self.active[task], self.placed[task], self.ctx.tags
        others = [active, *(pid for pid in placed if pid != source)]
        if tags[source]:
            first = {tags[pid][0] for pid in others}
            if tags[source][0] not in first and under.first_values.keys() <= first:
                return None  # the source's first tag value is new, and every client with room repeats one
        used = used_values(tags, others)
        source_rank = tag_rank(tags, source, used, active)
        caught_up = set(self.ctx.caught_up[task]) if caught_up_only else None
        for pid in under.pids:
            if caught_up is not None and pid not in caught_up:
                continue  # checked first: it is cheap, and excludes most clients
            if pid == active or pid in placed or tag_rank(tags, pid, used, active) > source_rank:
                continue  # less diverse, or as diverse but sharing more with the active (KIP-708)
            moved = [pid if other == source else other for other in placed]
            if self.tiers.improvable(tags, active, moved) is None:
                return pid
        return None


class _Under:
    """Clients under their share, least loaded first, and how many have each value of the first tag key."""

    def __init__(self, ctx: Context, pids: Iterable[str], rank: Callable[[str], tuple[float, str]]) -> None:
        self.tags = ctx.tags
        self.rank = rank
        self.pids = sorted(pids, key=rank)
        self.first_values = Counter(self._first(pid) for pid in self.pids)

    def _first(self, pid: str) -> str | None:
        return self.tags[pid][0] if self.tags[pid] else None

    def update(self, pid: str, has_room: bool) -> None:
        """Re-rank ``pid`` after it took a standby, or drop it when it has no room left."""
        self.pids.remove(pid)
        if has_room:
            insort(self.pids, pid, key=self.rank)
        else:
            self.first_values[self._first(pid)] -= 1
            if not self.first_values[self._first(pid)]:
                del self.first_values[self._first(pid)]


def used_values(tags: Mapping[str, TagValues], pids: Sequence[str]) -> list[set[str]]:
    """Per tag key, the values the clients ``pids`` have."""
    return [set(values) for values in zip(*(tags[pid] for pid in pids), strict=True)]


def _seen(values: TagValues, used: Sequence[set[str]]) -> Seen:
    """Per tag key, whether the value is used by the task's replicas already. Gain is its negation:
    a lexicographically smaller ``_seen`` is a greater gain."""
    return tuple(map(set.__contains__, used, values))


def tag_rank(
    tags: Mapping[str, TagValues], pid: str, used: Sequence[set[str]], active: str
) -> tuple[Seen, Seen]:
    """How good a standby ``pid`` is next to the task's other replicas, whose values are ``used`` (the
    active is one of them); smaller is better: which tag values it repeats from them, then which it shares
    with the active (KIP-708: differ from the active first)."""
    return _seen(tags[pid], used), tuple(map(str.__eq__, tags[pid], tags[active]))


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
