"""Errors of task assignment. Each names the offending task, client, key or generation.

Bad input derives from ``lakehouse.errors.LakehouseError`` and ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse.errors import LakehouseError

if TYPE_CHECKING:
    from lakehouse.assignment.validate import AssignmentError


class AssignmentInputError(LakehouseError, ValueError):
    """The clients, tasks or configuration given to the assignor violate its contract."""


class InvalidTaskIdError(AssignmentInputError):
    """A task id is not ``"<subtopology>_<partition>"`` with two non-negative integers."""

    def __init__(self, task: str) -> None:
        self.task = task
        super().__init__(f"task id {task!r} is not '<subtopology>_<partition>' (e.g. '0_3')")


class DuplicateTaskError(AssignmentInputError):
    """A task id occurs twice among the stateful and stateless tasks."""

    def __init__(self, task: str) -> None:
        self.task = task
        super().__init__(f"task {task!r} is listed more than once (stateful and stateless tasks together)")


class UnknownTagKeyError(AssignmentInputError):
    """A key of ``rack_aware_assignment_tags`` is not a tag of some client."""

    def __init__(self, key: str, client: str, client_tags: list[str]) -> None:
        self.key = key
        self.client = client
        self.client_tags = client_tags
        super().__init__(
            f"rack-aware tag key {key!r} is not a tag of client {client!r} (its tags: {client_tags})"
        )


class InvalidCapacityError(AssignmentInputError):
    """A client's capacity (its number of processing threads) is not a positive integer."""

    def __init__(self, client: str, capacity: object) -> None:
        self.client = client
        self.capacity = capacity
        super().__init__(f"client {client!r}: capacity must be a positive integer, got {capacity!r}")


class NegativeLagError(AssignmentInputError):
    """A client reports a negative lag for a task."""

    def __init__(self, client: str, task: str, lag: int) -> None:
        self.client = client
        self.task = task
        self.lag = lag
        super().__init__(f"client {client!r}: lag of task {task!r} must be >= 0, got {lag}")


class ClientIdMismatchError(AssignmentInputError):
    """The key of the clients mapping differs from the client's ``process_id``."""

    def __init__(self, key: str, process_id: str) -> None:
        self.key = key
        self.process_id = process_id
        super().__init__(f"clients[{key!r}] has process_id {process_id!r}; they must be equal")


class InvalidAssignmentConfigError(AssignmentInputError):
    """An ``AssignmentConfig`` field is out of range."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"AssignmentConfig.{field} must be {expected}, got {value!r}")


class InvalidAssignmentError(LakehouseError, ValueError):
    """An assignment breaks the contract for its subscriptions; it was not written.

    Attributes:
        generation: The generation it was computed for.
        errors: Every violation :func:`lakehouse.assignment.validate_assignment` found.
    """

    def __init__(self, generation: int, errors: Sequence[AssignmentError]) -> None:
        self.generation = generation
        self.errors = tuple(errors)
        shown = "; ".join(
            f"{e.kind.value} (task={e.task}, client={e.client}): {e.detail}" for e in self.errors[:5]
        )
        more = f"; and {len(self.errors) - 5} more" if len(self.errors) > 5 else ""
        super().__init__(
            f"assignment of generation {generation} is invalid, nothing written: "
            f"{len(self.errors)} violation(s): {shown}{more}"
        )


class NoSubscriptionsError(LakehouseError, LookupError):
    """The subscriptions table holds no generation (or not the one asked for)."""

    def __init__(self, path: str, generation: int | None = None) -> None:
        self.path = path
        self.generation = generation
        what = "no subscriptions" if generation is None else f"no subscriptions of generation {generation}"
        super().__init__(f"{what} in {path}; write them with AssignmentStore.write_subscriptions first")


class InconsistentTopologyError(LakehouseError, ValueError):
    """Clients of one generation subscribed with different task sets."""

    def __init__(self, generation: int, client: str, other: str) -> None:
        self.generation = generation
        self.client = client
        self.other = other
        super().__init__(
            f"generation {generation}: clients {other!r} and {client!r} subscribed with different "
            "stateful or stateless task sets"
        )
