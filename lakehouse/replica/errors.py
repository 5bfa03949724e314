"""Errors of standby replicas. Each names the table and what to do."""

from __future__ import annotations

from lakehouse.errors import LakehouseError


class ReplicaError(LakehouseError):
    """Base class of the replica errors."""


class ChangeDataFeedDisabledError(ReplicaError, ValueError):
    """The source table does not record its changes (Delta's Change Data Feed is off)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"the table at {path} has no Change Data Feed, so a replica cannot follow it: run "
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true) "
            "(or Replica.create(..., enable_change_data_feed=True)); changes before that are never replayed"
        )


class NotAReplicaError(ReplicaError, ValueError):
    """``Replica.open`` was given a path that holds no replica (or another source's)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__(f"no replica at {path}: {problem}")
