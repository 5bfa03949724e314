"""The assignment job: read the latest subscriptions, assign, validate, write the generation, summarise.

:func:`run_assignment` is what ``jobs/assign.py`` and the CLI call; :func:`write_demo_subscriptions` is
the demo's cluster (the pipeline's ``assign`` stage assigns it). The assignor itself stays pure: reading and
writing are the store's.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.assignment.assignor import assign
from lakehouse.assignment.state import (
    AssignmentConfig,
    AssignmentResult,
    ClientAssignment,
    ClientState,
    Role,
    task_sort_key,
)
from lakehouse.assignment.store import AssignmentStore, Subscription

#: How many moves and warm-ups the summary lists one by one.
SHOWN = 10
DEMO_ZONES = 3
DEMO_CLIENTS = 6
DEMO_TASKS = tuple(f"0_{partition}" for partition in range(12))
DEMO_CONFIG = AssignmentConfig(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))


@dataclass(frozen=True)
class GenerationOutcome:
    """What one run of the job did.

    Attributes:
        subscription: The subscriptions assigned.
        result: The (validated) assignment.
        written: False when the generation had been assigned already (a replay wrote nothing).
        previous: Who held what in the generation assigned before this one (empty for the first).
    """

    subscription: Subscription
    result: AssignmentResult
    written: bool
    previous: Mapping[str, ClientAssignment] = field(default_factory=dict)

    @property
    def departed(self) -> dict[tuple[str, Role], str]:
        """(task, role) -> the client that held it in the previous generation and is no longer subscribed.

        A warm-up held by a departed client counts as its standby.
        """
        gone = {pid: held for pid, held in self.previous.items() if pid not in self.subscription.clients}
        return {
            (task, Role.STANDBY if role is Role.WARMUP else role): pid
            for pid, held in sorted(gone.items())
            for task, role in held.roles().items()
        }

    @property
    def warmups(self) -> list[tuple[str, str]]:
        """(task, client) of every warm-up replica, in task then client order."""
        return sorted(
            ((task, pid) for pid, held in self.result.clients.items() for task in held.warmup),
            key=lambda pair: (task_sort_key(pair[0]), pair[1]),
        )


def assign_generation(
    store: AssignmentStore, generation: int | None = None, at: datetime | None = None
) -> GenerationOutcome:
    """Assign the subscriptions of ``generation`` (default: the latest) and write the assignment.

    Idempotent: a generation that is assigned already is recomputed (the assignor is deterministic) but
    not written again.

    Raises:
        NoSubscriptionsError: there are no subscriptions (of that generation).
        InvalidAssignmentError: the assignment failed validation; nothing was written.
    """
    subscription = store.subscription(generation)
    result = assign(
        subscription.clients, subscription.stateful_tasks, subscription.stateless_tasks, store.config
    )
    before = _generation_before(store, subscription.generation)
    previous = {} if before is None else store.held(before)
    written = store.write_assignment(subscription, result, at)
    return GenerationOutcome(subscription, result, written, previous)


def _generation_before(store: AssignmentStore, generation: int) -> int | None:
    """The latest generation assigned before ``generation``, or None: the latest assigned one when it is
    older (from the table's log, no Spark job), else one small aggregate (a replay, or an older
    generation assigned again)."""
    latest = store.latest_assigned_generation()
    if latest is None or latest < generation:
        return latest
    row = (
        store.assignment_table()
        .where(F.col("generation") < generation)
        .agg(F.max("generation").alias("g"))
        .first()
    )
    return None if row is None else row["g"]


def summary_lines(outcome: GenerationOutcome) -> list[str]:
    """Printable lines: the generation, its moves, warm-ups and whether a probing rebalance is needed."""
    sub, result = outcome.subscription, outcome.result
    moves = result.moves
    active_moves = sum(move.role is Role.ACTIVE for move in moves)
    lines = [
        f"generation {sub.generation}: {len(sub.clients)} clients, {len(sub.stateful_tasks)} stateful and "
        f"{len(sub.stateless_tasks)} stateless tasks"
        + ("" if outcome.written else " (assigned already: nothing written)"),
        f"  moves: {len(moves)} ({active_moves} active, {len(moves) - active_moves} standby)",
    ]
    departed = outcome.departed
    for move in moves[:SHOWN]:
        gone = departed.get((move.task, move.role))
        source = move.source or (f"{gone} (left)" if gone else "-")
        lines.append(f"    {move.task} {move.role.value}: {source} -> {move.destination}")
    if len(moves) > SHOWN:
        lines.append(f"    ... and {len(moves) - SHOWN} more")
    warmups = outcome.warmups
    shown = ", ".join(f"{task} on {pid}" for task, pid in warmups[:SHOWN])
    lines.append(f"  warm-ups: {len(warmups)}" + (f" ({shown})" if warmups else ""))
    if result.probing_rebalance_needed:
        lines.append(f"  probing rebalance needed: yes, in {_minutes(result.probing_rebalance_after)}")
    else:
        lines.append("  probing rebalance needed: no")
    return lines


def run_assignment(
    spark: SparkSession, root: str, config: AssignmentConfig | None = None, at: datetime | None = None
) -> list[str]:
    """Assign the latest subscriptions of the store at ``root`` and write the generation.

    Args:
        root: Folder of the store's tables.
        config: Assignor settings; the store is created with them (or checked against them). None opens
            the existing store with its own settings.
        at: Time of the generation (default: now, UTC).

    Returns:
        The summary lines of :func:`summary_lines`.

    Raises:
        NoSubscriptionsError: the store holds no subscriptions.
        InvalidAssignmentError: the assignment failed validation; nothing was written.
        StoreSettingsConflictError: the store exists with other settings than ``config``.
    """
    store = AssignmentStore.create(spark, root, config) if config else AssignmentStore.open(spark, root)
    return summary_lines(assign_generation(store, at=at))


def feed_back(
    clients: Mapping[str, ClientState],
    held: Mapping[str, ClientAssignment],
    leave: Iterable[str] = (),
    lag: int = 0,
) -> dict[str, ClientState]:
    """The next generation's client states after each client ran what it held (a converged cluster).

    Every client reports its previous roles (warm-ups count as standbys) with ``lag`` for each task it
    held; ``leave`` are left out.
    """
    gone = set(leave)
    states = {}
    for pid, client in sorted(clients.items()):
        if pid in gone:
            continue
        mine = held.get(pid, ClientAssignment())
        states[pid] = ClientState(
            pid,
            client.capacity,
            client.tags,
            prev_active=mine.active,
            prev_standby=mine.standby | mine.warmup,
            task_lags=dict.fromkeys(mine.active | mine.standby | mine.warmup, lag),
        )
    return states


def demo_clients() -> dict[str, ClientState]:
    """The demo's cluster: ``c0``..``c5``, round-robin over zones ``z0``..``z2``, without local state."""
    return {f"c{n}": ClientState(f"c{n}", tags={"zone": f"z{n % DEMO_ZONES}"}) for n in range(DEMO_CLIENTS)}


def write_demo_subscriptions(
    store: AssignmentStore, generation: int, leave: Iterable[str] = (), at: datetime | None = None
) -> dict[str, ClientState]:
    """Subscribe the demo's cluster for ``generation`` (:data:`DEMO_TASKS`); returns the clients subscribed.

    Generation 1 is the fresh cluster of :func:`demo_clients`; a later one has each client of the
    generation before report what it held there (:func:`feed_back`, a converged cluster), ``leave`` left
    out. A generation subscribed before is not written again.
    """
    if generation == 1:
        clients = demo_clients()
    else:
        before = store.subscription(generation - 1)
        clients = feed_back(before.clients, store.held(generation - 1), leave)
    store.write_subscriptions(generation, clients, DEMO_TASKS, at=at)
    return clients


# ---------------------------------------------------------------------- command line
def config_from_args(args: argparse.Namespace) -> AssignmentConfig | None:
    """The configuration the options give, or None (open the store as it is) without ``--standbys``."""
    if args.standbys is None:
        return None
    return AssignmentConfig(
        num_standby_replicas=args.standbys,
        acceptable_recovery_lag=args.acceptable_recovery_lag,
        max_warmup_replicas=args.max_warmup_replicas,
        probing_rebalance_interval=timedelta(minutes=args.probing_interval_minutes),
        rack_aware_assignment_tags=tuple(key.strip() for key in args.tags.split(",") if key.strip()),
    )


def _minutes(interval: timedelta | None) -> str:
    return "-" if interval is None else f"{interval / timedelta(minutes=1):g} min"
