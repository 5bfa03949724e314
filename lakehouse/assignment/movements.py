"""High availability (KIP-441): keep tasks on caught-up clients while their balanced targets warm up.

A target client that would have to restore a task while another client is caught up for it does not
get the task yet. Instead:

* **Active**: the task stays on a caught-up client: its previous owner, else a caught-up client the
  standby placement chose (a *swap*: the target takes that standby slot and restores as a standby),
  else the least-loaded caught-up client. Without a swap the target gets a **warm-up** replica.
* **Standby**: unless another standby of the task is caught up, the standby goes to the most caught-up
  client that holds nothing of the task, and the target gets a warm-up.

Warm-ups are granted while ``max_warmup_replicas`` lasts, active deferrals first, tasks with the fewest
caught-up clients first. Every deferral asks for a probing rebalance; once a warm-up has caught up, the
balanced target is caught up and the next assignment places the task there without a deferral.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from lakehouse.assignment._context import Context
from lakehouse.assignment.state import ClientState, Role, TaskMove, task_sort_key


@dataclass(frozen=True)
class Placement:
    """Stateful placement after availability.

    Attributes:
        active: Stateful task -> active client.
        standby: Stateful task -> standby clients.
        warmup: Stateful task -> warm-up clients (only tasks that have some).
        deferred: How many actives and standbys were kept off their balanced targets.
    """

    active: dict[str, str]
    standby: dict[str, tuple[str, ...]]
    warmup: dict[str, tuple[str, ...]]
    deferred: int


class _WarmupBudget:
    def __init__(self, size: int) -> None:
        self.remaining = size

    def take(self) -> bool:
        if self.remaining == 0:
            return False
        self.remaining -= 1
        return True


def realize(
    ctx: Context, active_targets: Mapping[str, str], standby_targets: Mapping[str, tuple[str, ...]]
) -> Placement:
    """Apply availability to the balanced targets (phase 3)."""
    order = sorted(ctx.stateful, key=lambda t: (len(ctx.caught_up[t]), task_sort_key(t)))
    budget = _WarmupBudget(ctx.config.max_warmup_replicas)
    active_load = Counter(active_targets.values())
    active: dict[str, str] = {}
    standby = {task: list(standby_targets[task]) for task in ctx.stateful}
    warmup: dict[str, list[str]] = {task: [] for task in ctx.stateful}
    deferred = 0
    for task in order:
        target = active_targets[task]
        better = ctx.better_clients(task, target)
        if not better:
            active[task] = target
            continue
        deferred += 1
        source = _source(ctx, task, better, standby[task], active_load)
        active[task] = source
        active_load[target] -= 1
        active_load[source] += 1
        if source in standby[task]:
            standby[task][standby[task].index(source)] = target
        elif budget.take():
            warmup[task].append(target)
    for task in order:
        standby[task], moved = _realize_standbys(ctx, task, active[task], standby[task], warmup[task], budget)
        deferred += moved
    return Placement(
        active=active,
        standby={task: tuple(pids) for task, pids in standby.items()},
        warmup={task: tuple(pids) for task, pids in warmup.items() if pids},
        deferred=deferred,
    )


def _source(
    ctx: Context, task: str, better: tuple[str, ...], planned_standbys: list[str], active_load: Counter[str]
) -> str:
    """The caught-up client that keeps an active task whose target must warm up first."""
    owner = ctx.prev_owner.get(task)
    if owner in better:
        return owner
    pool = [pid for pid in better if pid in planned_standbys] or list(better)
    return min(pool, key=lambda p: (active_load[p] / ctx.capacity[p], ctx.lag(task, p), p))


def _realize_standbys(
    ctx: Context, task: str, active: str, planned: list[str], warmups: list[str], budget: _WarmupBudget
) -> tuple[list[str], int]:
    """Keep each planned standby unless a more caught-up client holding nothing of the task exists.

    A standby may restore in place when another standby of the task is caught up already: the task
    keeps a caught-up standby either way.
    """
    holders = {active, *planned, *warmups}
    redundant = any(ctx.is_caught_up(task, pid) for pid in planned)
    kept: list[str] = []
    moved = 0
    for target in planned:
        better = [] if redundant else [p for p in ctx.better_clients(task, target) if p not in holders]
        if not better:
            kept.append(target)
            continue
        moved += 1
        kept.append(better[0])
        holders.add(better[0])
        redundant = ctx.is_caught_up(task, better[0])
        if budget.take():
            warmups.append(target)
        else:
            holders.discard(target)
    return kept, moved


def task_moves(
    ctx: Context,
    clients: Mapping[str, ClientState],
    active: Mapping[str, str],
    standby: Mapping[str, tuple[str, ...]],
) -> tuple[TaskMove, ...]:
    """Active roles on a client other than the previous owner, and standbys on clients with neither role
    for the task before (warm-ups are not moves)."""
    moves: list[TaskMove] = []
    for task in sorted(active, key=task_sort_key):
        owner = ctx.prev_owner.get(task)
        if active[task] != owner:
            moves.append(TaskMove(task, Role.ACTIVE, owner, active[task]))
        for pid in sorted(standby.get(task, ())):
            held = clients[pid]
            if task not in held.prev_standby and task not in held.prev_active:
                moves.append(TaskMove(task, Role.STANDBY, None, pid))
    return tuple(moves)
