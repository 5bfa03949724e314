"""Task assignment: a sticky high-availability assignor with rack-aware standbys (KIP-441, KIP-708).

:func:`assign` is a pure function from the clients' reported state to an :class:`AssignmentResult`;
:func:`validate_assignment` checks a result against the contract before it is committed.
"""

from __future__ import annotations

from lakehouse.assignment.assignor import assign
from lakehouse.assignment.errors import (
    AssignmentInputError,
    ClientIdMismatchError,
    DuplicateTaskError,
    InvalidAssignmentConfigError,
    InvalidCapacityError,
    InvalidTaskIdError,
    NegativeLagError,
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
from lakehouse.assignment.validate import AssignmentError, AssignmentErrorKind, validate_assignment

__all__ = [
    "AssignmentConfig",
    "AssignmentError",
    "AssignmentErrorKind",
    "AssignmentInputError",
    "AssignmentResult",
    "ClientAssignment",
    "ClientIdMismatchError",
    "ClientState",
    "DuplicateTaskError",
    "InvalidAssignmentConfigError",
    "InvalidCapacityError",
    "InvalidTaskIdError",
    "NegativeLagError",
    "Role",
    "TaskMove",
    "UnknownTagKeyError",
    "assign",
    "sorted_tasks",
    "tag_diversity",
    "task_sort_key",
    "validate_assignment",
]
