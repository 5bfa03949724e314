"""Task assignment: a sticky high-availability assignor with rack-aware standbys (KIP-441, KIP-708).

:func:`assign` is a pure function from the clients' reported state to an :class:`AssignmentResult`;
:func:`validate_assignment` checks a result against the contract before it is committed;
:class:`AssignmentStore` keeps every generation's subscriptions and assignment in Delta.
"""

from __future__ import annotations

from lakehouse.assignment.assignor import assign
from lakehouse.assignment.errors import (
    AssignmentInputError,
    ClientIdMismatchError,
    DuplicateTaskError,
    InconsistentTopologyError,
    InvalidAssignmentConfigError,
    InvalidAssignmentError,
    InvalidCapacityError,
    InvalidTaskIdError,
    NegativeLagError,
    NoSubscriptionsError,
    UnknownTagKeyError,
)
from lakehouse.assignment.standby import tag_diversity
from lakehouse.assignment.state import (
    AssignmentConfig,
    AssignmentResult,
    ClientAssignment,
    ClientState,
    Role,
    TaskMove,
    sorted_tasks,
    task_sort_key,
)
from lakehouse.assignment.store import AssignmentStore, Subscription
from lakehouse.assignment.validate import AssignmentError, AssignmentErrorKind, validate_assignment

__all__ = [
    "AssignmentConfig",
    "AssignmentError",
    "AssignmentErrorKind",
    "AssignmentInputError",
    "AssignmentResult",
    "AssignmentStore",
    "ClientAssignment",
    "ClientIdMismatchError",
    "ClientState",
    "DuplicateTaskError",
    "InconsistentTopologyError",
    "InvalidAssignmentConfigError",
    "InvalidAssignmentError",
    "InvalidCapacityError",
    "InvalidTaskIdError",
    "NegativeLagError",
    "NoSubscriptionsError",
    "Role",
    "Subscription",
    "TaskMove",
    "UnknownTagKeyError",
    "assign",
    "sorted_tasks",
    "tag_diversity",
    "task_sort_key",
    "validate_assignment",
]
