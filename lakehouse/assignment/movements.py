"""High availability (KIP-441): keep tasks on caught-up clients while their balanced targets warm up.

A target client that would have to restore a task while another client is caught up for it does not
get the task yet. Instead:

* **Active**: the task stays on a caught-up client: its previous owner, else a caught-up client the
  standby placement chose (a *swap*: the target takes that standby slot and restores as a standby),
  else the least-loaded caught-up client. Without a swap the target gets a **warm-up** replica.
* **Standby**: the standby goes to a caught-up client that holds nothing of the task (the most diverse
  in tags), and the target gets a warm-up unless, once every move is made, the client keeping the
  standby is within its share of replicas, the target at its floor, and the target no more diverse in
  tags: then the next assignment plans no such move, and it is no deferral. Before that, a *trade* is
  tried: a caught-up client that holds a standby it must restore anyway (every caught-up client holds
  that task) swaps it for this one, so the target restores that one instead and loads stay.
* **Idle clients**: a client that a deferral left under the floor of its active share takes actives it
  is caught up for from clients over theirs. A deferred target that reaches its floor that way, while the
  task's client stays within its ceiling, is balanced: it gets no warm-up and asks for no probing.
* **Shedding**: a client that standbys kept on it pushed over the ceiling of its share of replicas gives
  standbys it must restore anyway to clients with room (:func:`lakehouse.assignment.standby.shed_restoring`),
  so that no later restore, bounded by ``max_warmup_replicas`` a round, has to undo the excess.
* **Throttle** (issue 12): a standby that must restore while a caught-up client holds nothing of the
  task is a restore like a warm-up, and counts against the same ``max_warmup_replicas``. Once nothing
  else moves, such standbys restore in place while the budget lasts; the rest go to a caught-up client
  lacking the task, over its share if need be.

Warm-ups are granted while ``max_warmup_replicas`` lasts, active deferrals first, tasks with the fewest
caught-up clients first; throttled standby restores take what is left. Every deferral asks for a probing
rebalance; once a warm-up has caught up, the balanced target is caught up and the next assignment places
the task there without a deferral.

The throttle is preferred to fewer rounds: a balance that needs K restores while caught-up clients lack
the tasks takes at least ``ceil(K / max_warmup_replicas)`` rounds before the converged one, where
restoring them all at once (as this assignor did before issue 12) may converge sooner. Kafka likewise
moves such a standby to a caught-up client and warms its target up within the same budget. A restore no
caught-up client could spare (none lacks the task) is not throttled.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from lakehouse.assignment._balance import Band
from lakehouse.assignment._context import Context
from lakehouse.assignment._standby_moves import StandbyMoves, WarmupBudget, warm_up_standby_targets
from lakehouse.assignment.standby import fill_under_floor, shed_restoring
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


def realize(
    ctx: Context, active_targets: Mapping[str, str], standby_targets: Mapping[str, tuple[str, ...]]
) -> Placement:
    """Apply availability to the balanced targets (phase 3), in named steps:

    1. Active deferrals: a target that must restore while a caught-up client exists leaves the task on a
       caught-up client (a swap with a planned standby where possible); idle clients take actives they are
       caught up for (:func:`_relieve_idle`); targets still needed get warm-ups (:func:`_warm_up_targets`).
    2. Standby deferrals and trades (:class:`StandbyMoves`), repeated with shedding and floor filling
       until nothing moves.
    3. Warm-ups for swapped targets whose standby slot went to a caught-up client, then for the planned
       clients of standbys kept elsewhere, where balance or tag diversity still needs them
       (:func:`warm_up_standby_targets`).
    4. The throttle on standbys that still restore while a caught-up client lacks the task
       (:meth:`StandbyMoves.throttle`).
    """
    order = sorted(ctx.stateful, key=lambda t: (len(ctx.caught_up[t]), task_sort_key(t)))
    budget = WarmupBudget(ctx.config.max_warmup_replicas)
    active_load = Counter(active_targets.values())
    active: dict[str, str] = {}
    standby = {task: list(standby_targets[task]) for task in ctx.stateful}
    warmup: dict[str, list[str]] = {task: [] for task in ctx.stateful}
    deferred = 0
    waiting: list[tuple[str, str]] = []
    swapped: list[tuple[str, str]] = []
    for task in order:
        target = active_targets[task]
        better = ctx.better_clients(task, target)
        if not better:
            active[task] = target
            continue
        source = _source(ctx, task, better, standby[task], active_load)
        active[task] = source
        active_load[target] -= 1
        active_load[source] += 1
        if source in standby[task]:
            standby[task][standby[task].index(source)] = target
            swapped.append((task, target))
        else:
            waiting.append((task, target))
    _relieve_idle(ctx, active, standby, active_load)
    deferred += _warm_up_targets(ctx, waiting, active, active_load, warmup, budget)
    kept: list[tuple[str, str, str]] = []
    standby_moves = StandbyMoves(ctx, active, standby, warmup, kept)
    for task in order:
        standby_moves.realize(task)
    # Moves above change loads: room may open up, clients may go over the ceiling or under the floor. Each
    # pass lowers (restoring standbys, replicas over ceilings, replicas under floors), so the loop ends.
    while True:
        standby_moves = StandbyMoves(ctx, active, standby, warmup, kept)
        moved = sum(standby_moves.realize(task, first=False) for task in order)
        shed = shed_restoring(ctx, active, standby, warmup)
        if not fill_under_floor(ctx, active, standby) and not moved and not shed:
            break
    # A swapped target restores in its standby slot. If the slot went elsewhere and no standby of the task
    # restores (nothing of it catches up by the next round), it needs a warm-up like a deferral without a
    # swap; else the next assignment would repeat this one.
    lost = [
        (task, target)
        for task, target in swapped
        if target not in standby[task] and all(ctx.is_caught_up(task, p) for p in standby[task])
    ]
    deferred += len(swapped) - len(lost)
    deferred += _warm_up_targets(ctx, lost, active, active_load, warmup, budget)
    deferred += warm_up_standby_targets(ctx, kept, active, standby, warmup, budget)
    deferred += StandbyMoves(ctx, active, standby, warmup, kept).throttle(order, budget)
    return Placement(
        active=active,
        standby={task: tuple(pids) for task, pids in standby.items()},
        warmup={task: tuple(pids) for task, pids in warmup.items() if pids},
        deferred=deferred,
    )


def _warm_up_targets(
    ctx: Context,
    waiting: list[tuple[str, str]],
    active: Mapping[str, str],
    active_load: Counter[str],
    warmup: dict[str, list[str]],
    budget: WarmupBudget,
) -> int:
    """Warm-ups for the (task, target) pairs of deferred actives without a swap, in order, and how many of
    them are still deferrals.

    Idle clients took actives after the deferrals: a target now at the floor of its active share, with the
    task's client within its ceiling, is balanced without the task. That is no deferral: no warm-up is
    spent on it (the next assignment would not move the task there) and no probing rebalance is needed.
    """
    band = Band(len(ctx.stateful), ctx.capacity)
    deferred = 0
    for task, target in waiting:
        if active_load[target] >= band.lo[target] and active_load[active[task]] <= band.hi[active[task]]:
            continue
        deferred += 1
        if budget.take():
            warmup[task].append(target)
    return deferred


def _source(
    ctx: Context, task: str, better: tuple[str, ...], planned_standbys: list[str], active_load: Counter[str]
) -> str:
    """The caught-up client that keeps an active task whose target must warm up first."""
    owner = ctx.prev_owner.get(task)
    if owner in better:
        return owner
    pool = [pid for pid in better if pid in planned_standbys] or list(better)
    return min(pool, key=lambda p: (active_load[p] / ctx.capacity[p], ctx.lag(task, p), p))


def _relieve_idle(
    ctx: Context, active: dict[str, str], standby: dict[str, list[str]], active_load: Counter[str]
) -> None:
    """A client left under the floor of its active share (its target was deferred) takes tasks it is
    caught up for from clients over their floor, standby swaps first: a move that costs no restoration."""
    floor = Band(len(ctx.stateful), ctx.capacity).lo
    idle = [pid for pid in ctx.pids if active_load[pid] < floor[pid]]
    if not idle:
        return
    caught_up: dict[str, list[str]] = {pid: [] for pid in idle}
    for task in ctx.stateful:
        for pid in ctx.caught_up[task]:
            if pid in caught_up:
                caught_up[pid].append(task)
    for pid in idle:
        for task in sorted(caught_up[pid], key=lambda t: (pid not in standby[t], task_sort_key(t))):
            source = active[task]
            if active_load[pid] >= floor[pid]:
                break
            if source == pid or active_load[source] <= floor[source]:
                continue
            active[task] = pid
            active_load[source] -= 1
            active_load[pid] += 1
            if pid in standby[task]:
                standby[task][standby[task].index(pid)] = source


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
