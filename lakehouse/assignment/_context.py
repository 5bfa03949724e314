"""The validated, sorted snapshot every phase of the assignor reads (built once per assignment)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakehouse.assignment.errors import ClientIdMismatchError, DuplicateTaskError, UnknownTagKeyError
from lakehouse.assignment.state import AssignmentConfig, ClientState, sorted_tasks

#: Sorts clients without local state for a task after every client with some.
NO_STATE = float("inf")
#: An ``acceptable_recovery_lag`` this large (Kafka's ``Long.MAX_VALUE``) counts every client as caught
#: up, with or without state: warm-ups are never needed.
UNLIMITED_RECOVERY_LAG = 2**63 - 1


@dataclass(frozen=True)
class Context:
    """Input of one assignment, validated, in deterministic order.

    Attributes:
        pids: Client ids, sorted.
        capacity: Client id -> capacity.
        tags: Client id -> its values of the rack-aware tag keys, in precedence order.
        stateful: Stateful tasks in task order.
        stateless: Stateless tasks in task order.
        lags: Stateful task -> {client id -> lag} for clients with local state.
        state_holders: Stateful task -> clients with local state (or a previous standby), by (lag, id).
        caught_up: Stateful task -> clients with lag <= acceptable_recovery_lag, by (lag, id).
        prev_owner: Task -> its previous active client (the most caught-up one if several claim it).
        prev_standby: Client id -> the stateful tasks it held as standby (or warm-up) before.
        config: The configuration.
    """

    pids: tuple[str, ...]
    capacity: Mapping[str, int]
    tags: Mapping[str, tuple[str, ...]]
    stateful: tuple[str, ...]
    stateless: tuple[str, ...]
    lags: Mapping[str, Mapping[str, int]]
    state_holders: Mapping[str, tuple[str, ...]]
    caught_up: Mapping[str, tuple[str, ...]]
    prev_owner: Mapping[str, str]
    prev_standby: Mapping[str, frozenset[str]]
    config: AssignmentConfig

    def lag(self, task: str, pid: str) -> float:
        """The lag of ``pid`` for ``task``; :data:`NO_STATE` without local state."""
        return self.lags.get(task, {}).get(pid, NO_STATE)

    def is_caught_up(self, task: str, pid: str) -> bool:
        """Whether ``pid``'s lag for ``task`` is within ``acceptable_recovery_lag``."""
        bound = self.config.acceptable_recovery_lag
        return bound >= UNLIMITED_RECOVERY_LAG or self.lag(task, pid) <= bound

    def better_clients(self, task: str, pid: str) -> tuple[str, ...]:
        """Clients that should hold ``task`` rather than ``pid`` for availability, best first.

        The caught-up clients when ``pid`` is not one of them. When no client is caught up (KAFKA-13600),
        the most caught-up clients, if they are strictly ahead of ``pid``. Otherwise empty.
        """
        if self.is_caught_up(task, pid):
            return ()
        if self.caught_up[task]:
            return self.caught_up[task]
        holders = self.state_holders[task]
        if not holders or self.lag(task, holders[0]) >= self.lag(task, pid):
            return ()
        best = self.lag(task, holders[0])
        return tuple(h for h in holders if self.lag(task, h) == best)


def build_context(
    clients: Mapping[str, ClientState],
    stateful_tasks: Iterable[str],
    stateless_tasks: Iterable[str],
    config: AssignmentConfig,
) -> Context:
    """Validate the input and index it.

    Raises:
        ClientIdMismatchError: A key of ``clients`` is not its client's ``process_id``.
        DuplicateTaskError: A task id occurs twice.
        InvalidTaskIdError: A task id is malformed.
        UnknownTagKeyError: A rack-aware tag key is missing from a client's tags.
    """
    stateful = _unique_sorted(stateful_tasks, ())
    stateless = _unique_sorted(stateless_tasks, stateful)
    pids = tuple(sorted(clients))
    for pid in pids:
        if clients[pid].process_id != pid:
            raise ClientIdMismatchError(pid, clients[pid].process_id)
    lags, holder_sets = _index_local_state(clients, pids, stateful)
    prev_standby = {pid: clients[pid].prev_standby & frozenset(stateful) for pid in pids}
    holders = {
        task: tuple(sorted(holder_sets[task], key=lambda p, t=task: (lags[t].get(p, NO_STATE), p)))
        for task in stateful
    }
    return Context(
        pids=pids,
        capacity={pid: clients[pid].capacity for pid in pids},
        tags=_tag_values(clients, pids, config.rack_aware_assignment_tags),
        stateful=stateful,
        stateless=stateless,
        lags=lags,
        state_holders=holders,
        caught_up=_caught_up(pids, stateful, lags, holders, config.acceptable_recovery_lag),
        prev_owner=_previous_owners(clients, pids, lags),
        prev_standby=prev_standby,
        config=config,
    )


def _unique_sorted(tasks: Iterable[str], taken: Iterable[str]) -> tuple[str, ...]:
    seen = set(taken)
    listed = list(tasks)
    for task in listed:
        if task in seen:
            raise DuplicateTaskError(task)
        seen.add(task)
    return tuple(sorted_tasks(listed))


def _index_local_state(
    clients: Mapping[str, ClientState], pids: tuple[str, ...], stateful: tuple[str, ...]
) -> tuple[dict[str, dict[str, int]], dict[str, set[str]]]:
    """Task -> {client -> lag}, and task -> clients with local state or a previous standby."""
    lags: dict[str, dict[str, int]] = {task: {} for task in stateful}
    holders: dict[str, set[str]] = {task: set() for task in stateful}
    for pid in pids:
        client = clients[pid]
        for task in client.prev_active | client.prev_standby | client.task_lags.keys():
            if task not in lags:
                continue
            holders[task].add(pid)
            lag = client.lag(task)
            if lag is not None:
                lags[task][pid] = lag
    return lags, holders


def _caught_up(
    pids: tuple[str, ...],
    stateful: tuple[str, ...],
    lags: Mapping[str, Mapping[str, int]],
    holders: Mapping[str, tuple[str, ...]],
    bound: int,
) -> dict[str, tuple[str, ...]]:
    if bound >= UNLIMITED_RECOVERY_LAG:
        return {
            t: (*holders[t], *(p for p in pids if p not in lags[t] and p not in holders[t])) for t in stateful
        }
    return {t: tuple(p for p in holders[t] if lags[t].get(p, NO_STATE) <= bound) for t in stateful}


def _tag_values(
    clients: Mapping[str, ClientState], pids: tuple[str, ...], keys: tuple[str, ...]
) -> dict[str, tuple[str, ...]]:
    for pid in pids:
        for key in keys:
            if key not in clients[pid].tags:
                raise UnknownTagKeyError(key, pid, sorted(clients[pid].tags))
    return {pid: tuple(clients[pid].tags[key] for key in keys) for pid in pids}


def _previous_owners(
    clients: Mapping[str, ClientState], pids: tuple[str, ...], lags: Mapping[str, Mapping[str, int]]
) -> dict[str, str]:
    owners: dict[str, str] = {}
    for pid in pids:
        for task in clients[pid].prev_active:
            rival = owners.get(task)
            if rival is None or _lag_of(lags, task, pid) < _lag_of(lags, task, rival):
                owners[task] = pid
    return owners


def _lag_of(lags: Mapping[str, Mapping[str, int]], task: str, pid: str) -> float:
    return lags.get(task, {}).get(pid, NO_STATE)
