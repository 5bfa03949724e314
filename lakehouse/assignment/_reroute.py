"""Active targets: make room for a task on a caught-up client by shifting tasks between caught-up clients.

When every client caught up for a task is full (at its balanced share), the task would have to target a
client that must restore it first (a warm-up and a probing rebalance). Often one of those full clients
holds a task that another caught-up client could take instead: the chain of such shifts that ends at a
caught-up client with room is an *augmenting path* (bipartite matching), and following it places the task
on a caught-up client while every shifted task stays on a caught-up client too. No restoration is needed,
so this is a move balance and availability force, not churn: it happens only for tasks that would
otherwise be deferred.
"""

from __future__ import annotations

from collections import defaultdict, deque

from lakehouse.assignment._balance import Band
from lakehouse.assignment._context import Context
from lakehouse.assignment.state import task_sort_key


def reroute_to_caught_up(ctx: Context, band: Band, targets: dict[str, str]) -> None:
    """Place each unplaced task that has caught-up clients by an augmenting path, scarcest tasks first.

    Clients from which no path reached room are not searched again: later placements only use up room,
    so they cannot reach room later either (as in Kuhn's matching algorithm).
    """
    pending = [t for t in ctx.stateful if t not in targets and ctx.caught_up[t]]
    if not pending:
        return
    pending.sort(key=lambda t: (len(ctx.caught_up[t]), task_sort_key(t)))
    shiftable: dict[str, list[str]] = defaultdict(list)
    for task in sorted(targets, key=task_sort_key):
        pid = targets[task]
        if len(ctx.caught_up[task]) > 1 and ctx.is_caught_up(task, pid):
            shiftable[pid].append(task)
    exhausted: set[str] = set()
    for task in pending:
        parent = _search(ctx, band, shiftable, task, exhausted)
        if parent is not None:
            _shift(ctx, band, targets, shiftable, parent)


Parents = dict[str, tuple[str | None, str]]


def _search(
    ctx: Context, band: Band, shiftable: dict[str, list[str]], task: str, exhausted: set[str]
) -> tuple[Parents, str] | None:
    """Breadth-first: client -> (the client its incoming task comes from, that task), and the client with
    room the path ends at; None (and the searched clients marked exhausted) when there is none."""
    parent: Parents = {}
    queue: deque[str] = deque()
    for pid in ctx.caught_up[task]:
        if pid not in exhausted:
            parent[pid] = (None, task)
            queue.append(pid)
    while queue:
        pid = queue.popleft()
        if band.can_take(pid):
            return parent, pid
        for moved in shiftable[pid]:
            for nxt in ctx.caught_up[moved]:
                if nxt not in parent and nxt not in exhausted:
                    parent[nxt] = (pid, moved)
                    queue.append(nxt)
    exhausted.update(parent)
    return None


def _shift(
    ctx: Context,
    band: Band,
    targets: dict[str, str],
    shiftable: dict[str, list[str]],
    found: tuple[Parents, str],
) -> None:
    """Apply the path: each client on it takes its incoming task; the last one had room."""
    parent, end = found
    band.take(end)
    pid: str | None = end
    while pid is not None:
        source, moved = parent[pid]
        targets[moved] = pid
        if source is not None:
            shiftable[source].remove(moved)
        if len(ctx.caught_up[moved]) > 1:
            shiftable[pid].append(moved)
        pid = source
