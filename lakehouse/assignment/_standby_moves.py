"""Standbys under availability: keep a standby off a client that must restore it while a caught-up client
lacks the task, trade restores that no caught-up client could spare, warm planned clients up where balance
still needs them, and bound what restores (issue 12's throttle). Used by
:func:`lakehouse.assignment.movements.realize`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import cached_property

from lakehouse.assignment._balance import Band
from lakehouse.assignment._context import Context
from lakehouse.assignment.standby import tag_rank, used_values


class WarmupBudget:
    """The ``max_warmup_replicas`` of one assignment: warm-ups and throttled standby restores take from it."""

    def __init__(self, size: int) -> None:
        self.remaining = size

    def take(self) -> bool:
        if self.remaining == 0:
            return False
        self.remaining -= 1
        return True


def warm_up_standby_targets(
    ctx: Context,
    kept: list[tuple[str, str, str]],
    active: Mapping[str, str],
    standby: Mapping[str, list[str]],
    warmup: dict[str, list[str]],
    budget: WarmupBudget,
) -> int:
    """Warm-ups for the planned clients of standbys kept on caught-up clients, given as (task, client
    keeping it, planned client) in order, and how many of them are still deferrals.

    Moves after a deferral change loads: when the client keeping the standby is within the ceiling of its
    share of replicas and the planned client at its floor or above, balance holds without the move. That
    is no deferral: no warm-up is spent on it and no probing rebalance is needed.
    """
    per_task = max((len(pids) for pids in standby.values()), default=0)
    band = Band(len(ctx.stateful) * (1 + per_task), ctx.capacity)
    load = Counter(active.values())
    load.update(pid for pids in standby.values() for pid in pids)
    deferred = 0
    for task, source, target in kept:
        balanced = load[source] <= band.hi[source] and load[target] >= band.lo[target]
        if (
            balanced
            and source in standby[task]
            and not _more_diverse(ctx, active[task], _others(standby[task], source), target, source)
        ):
            continue
        deferred += 1
        holders = {active[task], *standby[task], *warmup[task]}
        if target not in holders and budget.take():
            warmup[task].append(target)
    return deferred


def _more_diverse(ctx: Context, active: str, others: list[str], pid: str, than: str) -> bool:
    """Whether a standby on ``pid`` repeats fewer tag values of the task's other replicas (``active`` and
    the standbys ``others``) than one on ``than`` would (KIP-708 precedence)."""
    used = used_values(ctx.tags, [active, *others])
    return tag_rank(ctx.tags, pid, used, active) < tag_rank(ctx.tags, than, used, active)


def _others(standbys: list[str], pid: str) -> list[str]:
    return [p for p in standbys if p != pid]


class StandbyMoves:
    """Moves standbys that would restore onto caught-up clients, counting replicas against each client's
    ceiling share of all replicas."""

    def __init__(
        self,
        ctx: Context,
        active: Mapping[str, str],
        standby: dict[str, list[str]],
        warmup: dict[str, list[str]],
        kept: list[tuple[str, str, str]],
    ) -> None:
        self.ctx = ctx
        self.kept = kept
        self.active = active
        self.standby = standby
        self.warmup = warmup
        per_task = max((len(pids) for pids in standby.values()), default=0)
        self.share = Band(len(ctx.stateful) * (1 + per_task), ctx.capacity).hi
        self.load = Counter(active.values())
        self.load.update(pid for pids in standby.values() for pid in pids)

    @cached_property
    def restoring(self) -> dict[str, list[str]]:
        """Client -> the tasks of standbys it holds but is not caught up for (built when first needed)."""
        found: dict[str, list[str]] = {pid: [] for pid in self.ctx.pids}
        for task in self.ctx.stateful:
            for pid in self.standby[task]:
                if not self.ctx.is_caught_up(task, pid):
                    found[pid].append(task)
        return found

    def realize(self, task: str, first: bool = True) -> int:
        """Keep each planned standby of ``task`` unless it would restore while a better client holds
        nothing of the task, and return how many moved.

        Such a standby first trades places with one a better client must restore anyway
        (:meth:`_trade`). Otherwise, on the ``first`` visit the task's first such standby moves to the
        better client (the one adding most tag diversity, then one with room under its share, then the
        most caught up), as in Kafka; other ones move only to a better client with room, else they
        restore in place (bounded later by :meth:`throttle`). Each move is appended to ``kept`` as
        (task, client keeping the standby, planned client): :func:`warm_up_standby_targets` decides on
        the planned client's warm-up once loads are final.
        """
        active, planned, warmups = self.active[task], self.standby[task], self.warmup[task]
        holders = {active, *planned, *warmups}
        moved = 0
        for index, target in enumerate(planned):
            better = self._better(task, index, holders)
            if better and self._trade(task, index, better):
                holders.discard(target)
                holders.add(planned[index])
                continue
            if moved or not first:
                better = [p for p in better if self.load[p] < self.share[p]]
            if not better:
                continue
            chosen = better[0]
            planned[index] = chosen
            holders.add(chosen)
            self.load[chosen] += 1
            self.load[target] -= 1
            moved += 1
            holders.discard(target)
            self.kept.append((task, chosen, target))
        self._diversify(task, holders)
        return moved

    def throttle(self, order: list[str], budget: WarmupBudget) -> int:
        """Issue 12's throttle, once nothing else moves: a standby that must restore while a caught-up
        client holds nothing of its task is a restore ``max_warmup_replicas`` bounds, like a warm-up.

        In ``order`` (scarcest tasks first), such a standby first trades places (:meth:`_trade`).
        Otherwise it restores in place while the budget lasts; after that it goes to the caught-up client
        that lacks the task with the best rank (most tag diversity, then room under its share), over its
        share if need be: the balance it was placed for waits for a later round. Each of the last two is
        a deferral (a probing rebalance), and how many there were is returned.
        """
        deferred = 0
        for task in order:
            planned = self.standby[task]
            for index, pid in enumerate(planned):
                holders = {self.active[task], *planned, *self.warmup[task]}
                better = self._better(task, index, holders)
                if not better or not self.ctx.caught_up[task] or self._trade(task, index, better):
                    continue
                deferred += 1
                if budget.take():
                    continue
                planned[index] = better[0]
                self.load[better[0]] += 1
                self.load[pid] -= 1
        return deferred

    def _better(self, task: str, index: int, holders: set[str]) -> list[str]:
        """The clients that should hold ``task``'s standby ``index`` rather than its planned client for
        availability and hold nothing of the task, best rank first."""
        active, planned = self.active[task], self.standby[task]
        better = [p for p in self.ctx.better_clients(task, planned[index]) if p not in holders]
        if better:
            used = used_values(self.ctx.tags, [active, *planned[:index], *planned[index + 1 :]])
            better.sort(key=lambda p: self._rank(task, p, used))
        return better

    def _trade(self, task: str, index: int, better: list[str]) -> bool:
        """Swap ``task``'s standby ``index`` (its client must restore it) with a standby that a client of
        ``better`` must restore anyway, as no caught-up client lacks that task, where the planned client
        holds nothing of that task and is as diverse in tags for it. Loads stay; neither restore is
        throttled. Whether it did."""
        pid = self.standby[task][index]
        for source in better:
            if not self.restoring[source]:
                continue
            if _more_diverse(self.ctx, self.active[task], _others(self.standby[task], pid), pid, source):
                break
            for other in self.restoring[source]:
                if not self._unspared(other, source, pid):
                    continue
                planned = self.standby[other]
                planned[planned.index(source)] = pid
                self.standby[task][index] = source
                self.restoring[source].remove(other)
                if not self.ctx.is_caught_up(other, pid):
                    self.restoring[pid].append(other)
                return True
        return False

    def _unspared(self, task: str, source: str, pid: str) -> bool:
        """Whether ``source`` still holds a standby of ``task`` (which it must restore) that can go to
        ``pid`` instead: every caught-up client holds ``task``, ``pid`` holds nothing of it and is as
        diverse in tags."""
        planned = self.standby[task]
        holders = {self.active[task], *planned, *self.warmup[task]}
        if source not in planned or pid in holders or any(p not in holders for p in self.ctx.caught_up[task]):
            return False
        return not _more_diverse(self.ctx, self.active[task], _others(planned, source), source, pid)

    def _diversify(self, task: str, holders: set[str]) -> None:
        """Replace a standby by a caught-up client with room that holds nothing of the task and adds more
        tag diversity, while there is one (moves above, or a deferred active, change what the task's other
        replicas use). It costs no restoration; the replaced client just drops its copy."""
        if not self.ctx.config.rack_aware_assignment_tags:
            return
        active, planned = self.active[task], self.standby[task]
        free = [p for p in self.ctx.caught_up[task] if p not in holders]
        improved = True
        while improved and free:
            improved = False
            for index, pid in enumerate(planned):
                used = used_values(self.ctx.tags, [active, *planned[:index], *planned[index + 1 :]])
                roomy = [p for p in free if self.load[p] < self.share[p]]
                best = min(roomy, key=lambda p: self._rank(task, p, used), default=None)
                if best is None or self._rank(task, best, used)[0] >= self._rank(task, pid, used)[0]:
                    continue
                planned[index] = best
                free.remove(best)
                if self.ctx.is_caught_up(task, pid):
                    free.append(pid)
                self.load[best] += 1
                self.load[pid] -= 1
                improved = True

    def _rank(self, task: str, pid: str, used: list[set[str]]) -> tuple[object, ...]:
        tags = tag_rank(self.ctx.tags, pid, used, self.active[task])
        return (*tags, self.load[pid] >= self.share[pid], self.ctx.lag(task, pid), pid)
