"""Value types of the assignor: what a client reports, the configuration, and the result.

A task id is ``"<subtopology>_<partition>"`` (``"0_3"``); ids order numerically by
:func:`task_sort_key` (``"0_2" < "0_10" < "1_0"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType

from lakehouse.assignment.errors import (
    InvalidAssignmentConfigError,
    InvalidCapacityError,
    InvalidTaskIdError,
    NegativeLagError,
)

MIN_PROBING_REBALANCE_INTERVAL = timedelta(minutes=1)


def task_sort_key(task: str) -> tuple[int, int]:
    """The numeric order of a task id: ``(subtopology, partition)``.

    Raises:
        InvalidTaskIdError: ``task`` is not two non-negative integers joined by ``_``.
    """
    subtopology, sep, partition = task.partition("_")
    if not (sep and subtopology.isdigit() and partition.isdigit()):
        raise InvalidTaskIdError(task)
    return int(subtopology), int(partition)


def sorted_tasks(tasks: Iterable[str]) -> list[str]:
    """``tasks`` in numeric task order."""
    return sorted(tasks, key=task_sort_key)


@dataclass(frozen=True)
class ClientState:
    """What one client (a job runner, a pod) reports when it joins a rebalance.

    Attributes:
        process_id: Stable id of the client; ties between equally good clients go to the smaller id.
        capacity: Number of processing threads; tasks are balanced in proportion to it. Must be >= 1.
        tags: Instance tags (``zone``, ``cluster``, ...) for rack-aware standby placement.
        prev_active: Tasks the client ran actively in the previous generation.
        prev_standby: Tasks it held as standby (or warm-up) replicas in the previous generation.
        task_lags: How far its local copy of each task's state is behind the changelog end, in
            offsets. Absent = no local state. A task in ``prev_active`` without an entry counts as lag 0
            (the running active reports 0).

    Raises:
        InvalidCapacityError: ``capacity`` < 1 or not an integer.
        NegativeLagError: A lag is negative.
    """

    process_id: str
    capacity: int = 1
    tags: Mapping[str, str] = field(default_factory=dict)
    prev_active: frozenset[str] = frozenset()
    prev_standby: frozenset[str] = frozenset()
    task_lags: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1:
            raise InvalidCapacityError(self.process_id, self.capacity)
        for task, lag in self.task_lags.items():
            if lag < 0:
                raise NegativeLagError(self.process_id, task, lag)
        object.__setattr__(self, "tags", MappingProxyType(dict(self.tags)))
        object.__setattr__(self, "prev_active", frozenset(self.prev_active))
        object.__setattr__(self, "prev_standby", frozenset(self.prev_standby))
        object.__setattr__(self, "task_lags", MappingProxyType(dict(self.task_lags)))

    def lag(self, task: str) -> int | None:
        """The client's lag for ``task``; 0 for a previous active without a report; None = no state."""
        lag = self.task_lags.get(task)
        if lag is None and task in self.prev_active:
            return 0
        return lag


@dataclass(frozen=True)
class AssignmentConfig:
    """Assignor settings (Kafka Streams' names and defaults).

    Attributes:
        num_standby_replicas: Standby replicas per stateful task (capped at clients - 1).
        acceptable_recovery_lag: A client whose lag for a task is <= this is *caught up* for it.
        max_warmup_replicas: Warm-up replicas allowed in one assignment, in total (>= 1).
        probing_rebalance_interval: When a probing rebalance is needed, how long after this one
            (>= 1 minute).
        rack_aware_assignment_tags: Tag keys, highest precedence first, over which standbys are spread
            (KIP-708's ``standby.task.assignment.awareness``).

    Raises:
        InvalidAssignmentConfigError: A value is out of range.
    """

    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    probing_rebalance_interval: timedelta = timedelta(minutes=10)
    rack_aware_assignment_tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        tags = tuple(self.rack_aware_assignment_tags)
        object.__setattr__(self, "rack_aware_assignment_tags", tags)
        checks = [
            ("num_standby_replicas", self.num_standby_replicas >= 0, ">= 0"),
            ("acceptable_recovery_lag", self.acceptable_recovery_lag >= 0, ">= 0"),
            ("max_warmup_replicas", self.max_warmup_replicas >= 1, ">= 1"),
            (
                "probing_rebalance_interval",
                self.probing_rebalance_interval >= MIN_PROBING_REBALANCE_INTERVAL,
                f">= {MIN_PROBING_REBALANCE_INTERVAL}",
            ),
            ("rack_aware_assignment_tags", len(set(tags)) == len(tags), "free of duplicates"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise InvalidAssignmentConfigError(name, getattr(self, name), expected)


class Role(StrEnum):
    """The role a client holds for a task."""

    ACTIVE = "active"
    STANDBY = "standby"
    WARMUP = "warmup"


@dataclass(frozen=True)
class TaskMove:
    """A role for a task placed on a client that did not hold that role for it before.

    Attributes:
        task: The task.
        role: ``Role.ACTIVE`` or ``Role.STANDBY``.
        source: For an active move, the previous active client if it is still a member; else None.
        destination: The client that now holds the role.
    """

    task: str
    role: Role
    source: str | None
    destination: str


@dataclass(frozen=True)
class ClientAssignment:
    """The tasks one client holds in each role. A task is in at most one of the three sets."""

    active: frozenset[str] = frozenset()
    standby: frozenset[str] = frozenset()
    warmup: frozenset[str] = frozenset()

    def roles(self) -> dict[str, Role]:
        """Task -> role for every task the client holds."""
        held = {task: Role.ACTIVE for task in self.active}
        held.update({task: Role.STANDBY for task in self.standby})
        held.update({task: Role.WARMUP for task in self.warmup})
        return held


@dataclass(frozen=True)
class AssignmentResult:
    """The assignment of one generation.

    Attributes:
        clients: process id -> its tasks, for every client of the input, in process-id order.
        probing_rebalance_needed: True when some task (or standby) was kept on a caught-up client although
            balance wants it elsewhere; a later assignment moves it once the destination has caught up.
        probing_rebalance_after: ``config.probing_rebalance_interval`` when a probing rebalance is
            needed, else None.
        moves: Active and standby roles placed on clients that did not hold them, in task order.
    """

    clients: Mapping[str, ClientAssignment]
    probing_rebalance_needed: bool
    probing_rebalance_after: timedelta | None
    moves: tuple[TaskMove, ...]

    def active_owners(self) -> dict[str, str]:
        """Task -> the client running it actively."""
        return {task: pid for pid, held in self.clients.items() for task in held.active}

    def replicas(self, task: str, role: Role) -> list[str]:
        """The clients holding ``task`` in ``role``, in process-id order."""
        return [pid for pid, held in self.clients.items() if task in getattr(held, role.value)]
