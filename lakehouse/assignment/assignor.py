"""The sticky high-availability assignor (KIP-441 as Kafka implemented it, with fewer moves).

The assignment is computed in four phases:

1. **Active targets**: a balanced placement of the stateful tasks (each client holds the floor or ceiling
   of its capacity share) that keeps previous owners where balance allows, then prefers caught-up
   clients (making room on a full caught-up client by moving one of its tasks on to another caught-up
   client, :mod:`lakehouse.assignment._reroute`), then clients with the most state.
2. **Standby targets**: previous standbys kept, the rest placed rack-aware (KIP-708), then standbys
   balanced over clients by capacity without losing tag diversity (:mod:`lakehouse.assignment.standby`).
3. **Availability** (:mod:`lakehouse.assignment.movements`): a target that would have to restore while a
   caught-up client exists is deferred. The task stays on a caught-up client, the target warms up, and a
   probing rebalance is requested. Standbys that restore while a caught-up client lacks the task count
   against the warm-up budget (issue 12's throttle, preferred to fewer rounds).
4. **Stateless tasks** go to previous owners within balance, then to the least-loaded clients.

Kafka first round-robins every task (ignoring history) and then moves tasks back; here history is kept
from the start, so a stable input (membership and lags) yields the previous assignment again, standbys
included, and a membership change moves only what balance requires.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from lakehouse.assignment._balance import Band, LeastLoaded
from lakehouse.assignment._context import Context, build_context
from lakehouse.assignment._reroute import reroute_to_caught_up
from lakehouse.assignment.errors import AssignmentInputError
from lakehouse.assignment.movements import Placement, realize, task_moves
from lakehouse.assignment.standby import place_standby_targets
from lakehouse.assignment.state import (
    AssignmentConfig,
    AssignmentResult,
    ClientAssignment,
    ClientState,
    task_sort_key,
)


def assign(
    clients: Mapping[str, ClientState],
    stateful_tasks: Iterable[str],
    stateless_tasks: Iterable[str] = (),
    config: AssignmentConfig | None = None,
) -> AssignmentResult:
    """Assign every task an active client, and stateful tasks standbys and warm-ups.

    A pure, deterministic function: the same input gives an identical result.

    Guarantees:
        * Every task has exactly one active client; no client holds two roles for one task.
        * Every stateful task has ``min(num_standby_replicas, len(clients) - 1)`` standbys; stateless
          tasks have none. At most ``max_warmup_replicas`` warm-ups in total.
        * A stateful task is active on a caught-up client (lag <= ``acceptable_recovery_lag``, the
          previous owner first) whenever one exists; the same holds for each standby while caught-up
          clients remain. If none is caught up, on a most caught-up client.
        * Without such deferrals, stateful actives per client are the floor or ceiling of its capacity
          share. Deferrals set ``probing_rebalance_needed``.
        * Standbys on a client that is not caught up while a caught-up client holds nothing of the task,
          plus warm-ups, number at most ``max_warmup_replicas``; any of them sets
          ``probing_rebalance_needed`` (:mod:`lakehouse.assignment.movements`).
        * Standbys differ from the active and from each other in rack-aware tag values, by precedence
          (:func:`lakehouse.assignment.standby.place_standby_targets`).

    Args:
        clients: process id -> client state. Must not be empty if there are tasks.
        stateful_tasks: Task ids (``"<subtopology>_<partition>"``) that own state.
        stateless_tasks: Task ids without state (no standbys, no warm-ups).
        config: Assignor settings; defaults to ``AssignmentConfig()``.

    Returns:
        The assignment, with the moves it implies relative to the clients' previous roles.

    Raises:
        AssignmentInputError: Duplicate or malformed task ids, rack-aware tag keys a client lacks,
            a key of ``clients`` that differs from the client's ``process_id``, or tasks without clients.
            (Bad capacities and negative lags are refused when ``ClientState`` is built.)

    Examples:
        >>> result = assign({"a": ClientState("a"), "b": ClientState("b")}, ["0_0", "0_1"])
        >>> sorted(result.active_owners().items())
        [('0_0', 'a'), ('0_1', 'b')]
    """
    ctx = build_context(clients, stateful_tasks, stateless_tasks, config or AssignmentConfig())
    if not ctx.pids:
        if ctx.stateful or ctx.stateless:
            raise AssignmentInputError("there are tasks to assign but no clients")
        return AssignmentResult({}, False, None, ())
    active_targets = place_active_targets(ctx)
    standby_targets = place_standby_targets(ctx, active_targets, standbys_per_task(ctx))
    placement = realize(ctx, active_targets, standby_targets)
    stateless = assign_stateless(ctx, placement.active)
    return _result(ctx, clients, placement, stateless)


def standbys_per_task(ctx: Context) -> int:
    """``min(num_standby_replicas, clients - 1)``."""
    return min(ctx.config.num_standby_replicas, len(ctx.pids) - 1)


def place_active_targets(ctx: Context) -> dict[str, str]:
    """Stateful task -> the client balance wants it on (phase 1)."""
    band = Band(len(ctx.stateful), ctx.capacity)
    targets: dict[str, str] = {}
    _keep_previous_owners(ctx, band, targets)
    _fill_caught_up(ctx, band, targets)
    reroute_to_caught_up(ctx, band, targets)
    _fill_remaining(ctx, band, targets)
    return targets


def _keep_previous_owners(ctx: Context, band: Band, targets: dict[str, str]) -> None:
    """Each caught-up previous owner keeps up to its floor share, then the spare ceilings are granted.

    An owner over its share gives up first the tasks for which another caught-up client will have room:
    they can move without a warm-up.
    """
    owned: dict[str, list[str]] = defaultdict(list)
    for task in ctx.stateful:
        owner = ctx.prev_owner.get(task)
        if owner is not None and ctx.is_caught_up(task, owner):
            owned[owner].append(task)
    has_room = {pid for pid in ctx.pids if len(owned[pid]) < band.hi[pid]}

    def movable(task: str) -> bool:
        return any(pid in has_room for pid in ctx.caught_up[task])

    surplus: dict[str, list[str]] = {}
    for pid, tasks in owned.items():
        tasks.sort(key=lambda t: (movable(t), len(ctx.caught_up[t]), task_sort_key(t)))
        keep = min(len(tasks), band.lo[pid])
        for task in tasks[:keep]:
            targets[task] = pid
            band.take(pid)
        surplus[pid] = tasks[keep:]
    for pid in sorted(surplus, key=lambda p: (-len(surplus[p]), p)):
        if surplus[pid] and band.can_take(pid):
            targets[surplus[pid][0]] = pid
            band.take(pid)


def _fill_caught_up(ctx: Context, band: Band, targets: dict[str, str]) -> None:
    """Unplaced tasks with caught-up clients go to the least-loaded one with room, scarcest tasks first."""
    pending = [t for t in ctx.stateful if t not in targets and ctx.caught_up[t]]
    pending.sort(key=lambda t: (len(ctx.caught_up[t]), task_sort_key(t)))
    for task in pending:
        room = [pid for pid in ctx.caught_up[task] if band.can_take(pid)]
        if room:
            pid = min(room, key=lambda p: (band.load(p), ctx.lag(task, p), p))
            targets[task] = pid
            band.take(pid)


def _fill_remaining(ctx: Context, band: Band, targets: dict[str, str]) -> None:
    """The rest go to the client with the least to restore, else the least-loaded one with room."""
    least_loaded = LeastLoaded(ctx.pids, band.load)
    for task in ctx.stateful:
        if task in targets:
            continue
        with_state = [pid for pid in ctx.lags[task] if band.can_take(pid)]
        if with_state:
            pid = min(with_state, key=lambda p: (ctx.lag(task, p), band.load(p), p))
        else:
            found = least_loaded.least(band.can_take)
            if found is None:
                raise AssertionError(f"balance band has no room for task {task}")
            pid = found
        targets[task] = pid
        band.take(pid)


def assign_stateless(ctx: Context, stateful_active: Mapping[str, str]) -> dict[str, str]:
    """Stateless task -> client: the previous owner while under its floor share of all active tasks, else
    the client whose per-thread active load stays lowest."""
    count = Counter(stateful_active.values())
    floor = Band(len(ctx.stateful) + len(ctx.stateless), ctx.capacity).lo
    owners: dict[str, str] = {}
    for task in ctx.stateless:
        owner = ctx.prev_owner.get(task)
        if owner is not None and count[owner] < floor[owner]:
            owners[task] = owner
            count[owner] += 1
    least_loaded = LeastLoaded(ctx.pids, lambda p: (count[p] + 1) / ctx.capacity[p])
    for task in ctx.stateless:
        if task not in owners:
            pid = least_loaded.least()
            assert pid is not None
            owners[task] = pid
            count[pid] += 1
    return owners


def _result(
    ctx: Context, clients: Mapping[str, ClientState], placement: Placement, stateless: Mapping[str, str]
) -> AssignmentResult:
    roles: dict[str, dict[str, set[str]]] = {
        pid: {"active": set(), "standby": set(), "warmup": set()} for pid in ctx.pids
    }
    for task, pid in (*placement.active.items(), *stateless.items()):
        roles[pid]["active"].add(task)
    for role, by_task in (("standby", placement.standby), ("warmup", placement.warmup)):
        for task, pids in by_task.items():
            for pid in pids:
                roles[pid][role].add(task)
    needed = placement.deferred > 0
    return AssignmentResult(
        clients={
            pid: ClientAssignment(*(frozenset(roles[pid][r]) for r in ("active", "standby", "warmup")))
            for pid in ctx.pids
        },
        probing_rebalance_needed=needed,
        probing_rebalance_after=ctx.config.probing_rebalance_interval if needed else None,
        moves=task_moves(ctx, clients, {**placement.active, **stateless}, placement.standby),
    )
