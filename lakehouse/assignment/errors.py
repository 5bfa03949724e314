"""Errors raised for bad assignor input. Each names the offending task, client or key.

They derive from ``ValueError``; they will be rebased on ``lakehouse.errors.LakehouseError``.
"""

from __future__ import annotations


class AssignmentInputError(ValueError):
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
