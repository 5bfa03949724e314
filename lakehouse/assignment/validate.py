"""Checks an assignment against the assignor's contract; used before committing one and in tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from lakehouse.assignment._context import Context, build_context
from lakehouse.assignment.state import AssignmentConfig, AssignmentResult, ClientState


class AssignmentErrorKind(StrEnum):
    """What is wrong with an assignment (after Kafka's ``AssignmentError``)."""

    UNKNOWN_CLIENT = "unknown_client"
    MISSING_CLIENT = "missing_client"
    UNKNOWN_TASK = "unknown_task"
    MISSING_ACTIVE = "missing_active"
    ACTIVE_ASSIGNED_MULTIPLE_TIMES = "active_assigned_multiple_times"
    MULTIPLE_ROLES = "multiple_roles"
    INVALID_STANDBY = "invalid_standby"
    WRONG_STANDBY_COUNT = "wrong_standby_count"
    TOO_MANY_WARMUPS = "too_many_warmups"
    WARMUP_WITHOUT_PROBING = "warmup_without_probing"
    ACTIVE_NOT_CAUGHT_UP = "active_not_caught_up"


@dataclass(frozen=True)
class AssignmentError:
    """One violation: its kind, the task and client concerned (if any), and a readable detail."""

    kind: AssignmentErrorKind
    task: str | None
    client: str | None
    detail: str


def validate_assignment(
    clients: Mapping[str, ClientState],
    stateful_tasks: Iterable[str],
    stateless_tasks: Iterable[str],
    config: AssignmentConfig,
    result: AssignmentResult,
) -> list[AssignmentError]:
    """Every way ``result`` breaks the contract of :func:`lakehouse.assignment.assign` for this input.

    Checked: the result covers exactly the input's clients and tasks; every task has exactly one active;
    no client holds two roles for a task; stateless tasks have no standbys or warm-ups; every stateful task
    has ``min(num_standby_replicas, clients - 1)`` standbys; at most ``max_warmup_replicas`` warm-ups, and
    only with a probing rebalance; a stateful task's active is caught up whenever some client is.

    Returns:
        The violations, empty for a valid assignment.

    Raises:
        AssignmentInputError: The input itself is invalid (as for ``assign``).
    """
    ctx = build_context(clients, stateful_tasks, stateless_tasks, config)
    errors = _membership_errors(ctx, result)
    errors += _role_errors(ctx, result)
    errors += _replica_errors(ctx, result)
    return errors


def _membership_errors(ctx: Context, result: AssignmentResult) -> list[AssignmentError]:
    known = set(ctx.stateful) | set(ctx.stateless)
    errors = [
        AssignmentError(AssignmentErrorKind.UNKNOWN_CLIENT, None, pid, "not among the input's clients")
        for pid in sorted(set(result.clients) - set(ctx.pids))
    ]
    errors += [
        AssignmentError(AssignmentErrorKind.MISSING_CLIENT, None, pid, "input client absent from result")
        for pid in ctx.pids
        if pid not in result.clients
    ]
    for pid, held in sorted(result.clients.items()):
        errors += [
            AssignmentError(AssignmentErrorKind.UNKNOWN_TASK, task, pid, "not among the input's tasks")
            for task in sorted(held.roles().keys() - known)
        ]
    return errors


def _role_errors(ctx: Context, result: AssignmentResult) -> list[AssignmentError]:
    actives = Counter(task for held in result.clients.values() for task in held.active)
    errors = []
    for task in (*ctx.stateful, *ctx.stateless):
        if actives[task] == 0:
            errors.append(AssignmentError(AssignmentErrorKind.MISSING_ACTIVE, task, None, "no active client"))
        elif actives[task] > 1:
            kind = AssignmentErrorKind.ACTIVE_ASSIGNED_MULTIPLE_TIMES
            errors.append(AssignmentError(kind, task, None, f"{actives[task]} active clients"))
    for pid, held in sorted(result.clients.items()):
        overlap = (held.active & held.standby) | (held.active & held.warmup) | (held.standby & held.warmup)
        errors += [
            AssignmentError(AssignmentErrorKind.MULTIPLE_ROLES, task, pid, "holds the task in two roles")
            for task in sorted(overlap)
        ]
        errors += [
            AssignmentError(AssignmentErrorKind.INVALID_STANDBY, task, pid, "replica of a stateless task")
            for task in sorted((held.standby | held.warmup) & set(ctx.stateless))
        ]
    return errors


def _replica_errors(ctx: Context, result: AssignmentResult) -> list[AssignmentError]:
    expected = min(ctx.config.num_standby_replicas, len(ctx.pids) - 1) if ctx.pids else 0
    standbys = Counter(task for held in result.clients.values() for task in held.standby)
    owners = {task: pid for pid, held in sorted(result.clients.items()) for task in held.active}
    errors = []
    for task in ctx.stateful:
        if standbys[task] != expected:
            detail = f"{standbys[task]} standbys, expected {expected}"
            errors.append(AssignmentError(AssignmentErrorKind.WRONG_STANDBY_COUNT, task, None, detail))
        owner = owners.get(task)
        if owner is not None and ctx.caught_up[task] and not ctx.is_caught_up(task, owner):
            detail = f"active is not caught up while {list(ctx.caught_up[task])} are"
            errors.append(AssignmentError(AssignmentErrorKind.ACTIVE_NOT_CAUGHT_UP, task, owner, detail))
    warmups = sum(len(held.warmup) for held in result.clients.values())
    if warmups > ctx.config.max_warmup_replicas:
        detail = f"{warmups} warm-ups, at most {ctx.config.max_warmup_replicas}"
        errors.append(AssignmentError(AssignmentErrorKind.TOO_MANY_WARMUPS, None, None, detail))
    if warmups and not result.probing_rebalance_needed:
        detail = "warm-ups were assigned but no probing rebalance is requested"
        errors.append(AssignmentError(AssignmentErrorKind.WARMUP_WITHOUT_PROBING, None, None, detail))
    return errors
