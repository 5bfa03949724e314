"""``AssignmentStore``: rebalance generations (subscriptions in, assignment out) as two Delta tables.

Semantics (the contract):

- Each rebalance is a **generation** ``G`` (a non-negative integer that only grows). Its subscriptions (one
  row per client, as received) and its assignment (one row per client, task and role) are each written as
  **one atomic Delta commit**, tagged with ``txnAppId``/``txnVersion = G``: writing generation ``G`` again is
  a no-op (a replay) and returns False; writing a generation below the last one that was never written
  raises ``InvalidInputError``. A crash between the two commits leaves subscriptions without an
  assignment; running the job again assigns them (the assignor is deterministic).
- An assignment is checked with :func:`lakehouse.assignment.validate_assignment` against its
  subscriptions and the store's configuration before anything is written; an invalid one raises
  :class:`InvalidAssignmentError` and writes nothing.
- Both tables are append-only history partitioned by ``generation``: "now" is the largest generation,
  "at time T" is the largest generation whose ``time`` is ``<= T`` (or Delta's ``TIMESTAMP AS OF T``).
  Clients of a generation that hold nothing have subscription rows but no assignment rows.
- The assignor settings (:class:`AssignmentConfig`) are ``lakehouse.*`` table properties of both tables:
  ``open`` reads them back, and creating the store again with other settings raises
  ``StoreSettingsConflictError``.

One writer (the scheduled assignment job) at a time; readers may run concurrently (snapshot isolation).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.assignment._context import build_context
from lakehouse.assignment.errors import (
    AssignmentInputError,
    InconsistentTopologyError,
    InvalidAssignmentError,
    NoSubscriptionsError,
)
from lakehouse.assignment.state import (
    AssignmentConfig,
    AssignmentResult,
    ClientAssignment,
    ClientState,
    Role,
    sorted_tasks,
)
from lakehouse.assignment.validate import validate_assignment
from lakehouse.catalog import lakehouse_properties
from lakehouse.commit_log import CommitLog, append_to_table
from lakehouse.errors import InvalidInputError
from lakehouse.paths import resolve_path
from lakehouse.schemas import load_schema
from lakehouse.times import from_micros, micros

APP_ID = "lakehouse.assignment_store"
KIND = "assignment_store"
SUBSCRIPTIONS_SCHEMA = "assignment_subscriptions"
ASSIGNMENT_SCHEMA = "assignment"
GENERATION = "generation"


@dataclass(frozen=True)
class Subscription:
    """The subscriptions of one generation: every client's state as received, and the topology's tasks.

    Attributes:
        generation: The rebalance generation.
        time: When the subscriptions were received.
        clients: process id -> client state, in process-id order.
        stateful_tasks: Stateful tasks, in task order.
        stateless_tasks: Stateless tasks, in task order.
    """

    generation: int
    time: datetime
    clients: Mapping[str, ClientState]
    stateful_tasks: tuple[str, ...]
    stateless_tasks: tuple[str, ...]


def config_properties(config: AssignmentConfig) -> dict[str, str]:
    """The ``lakehouse.*`` table properties recording ``config``."""
    return delta_ops.settings_properties(
        KIND,
        {
            "num_standby_replicas": str(config.num_standby_replicas),
            "acceptable_recovery_lag": str(config.acceptable_recovery_lag),
            "max_warmup_replicas": str(config.max_warmup_replicas),
            "probing_rebalance_interval_us": str(micros(config.probing_rebalance_interval)),
            "rack_aware_assignment_tags": json.dumps(list(config.rack_aware_assignment_tags)),
        },
    )


def config_from_properties(path: str, properties: Mapping[str, str]) -> AssignmentConfig:
    """Read an :class:`AssignmentConfig` back from a table's properties.

    Raises:
        StoreSettingsConflictError: the table is not a lakehouse assignment store.
    """
    found = delta_ops.settings_from_properties(path, properties, KIND)
    return AssignmentConfig(
        num_standby_replicas=int(found["num_standby_replicas"]),
        acceptable_recovery_lag=int(found["acceptable_recovery_lag"]),
        max_warmup_replicas=int(found["max_warmup_replicas"]),
        probing_rebalance_interval=timedelta(microseconds=int(found["probing_rebalance_interval_us"])),
        rack_aware_assignment_tags=tuple(json.loads(found["rack_aware_assignment_tags"])),
    )


class AssignmentStore:
    """Subscriptions and assignments of every generation. Build with :meth:`create` or :meth:`open`.

    The tables live at ``<root>/subscriptions`` and ``<root>/assignment`` unless other paths are given.
    """

    def __init__(
        self, spark: SparkSession, subscriptions_path: str, assignment_path: str, config: AssignmentConfig
    ) -> None:
        self.spark = spark
        self.subscriptions_path = subscriptions_path
        self.assignment_path = assignment_path
        self.config = config
        # Generation -> its subscriptions as read: a generation is written once and never changes
        # (write_subscriptions refuses it again), so each is read once per store object.
        self._subscriptions: dict[int, Subscription] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        spark: SparkSession,
        root: str | None,
        config: AssignmentConfig | None = None,
        *,
        subscriptions_path: str | None = None,
        assignment_path: str | None = None,
    ) -> AssignmentStore:
        """Create both tables (or open them if they exist with the same settings).

        Args:
            root: Folder of the two tables; may be None when both paths are given.
            config: Assignor settings stored on the tables; default ``AssignmentConfig()``.
            subscriptions_path: Where the subscriptions table lives (default ``<root>/subscriptions``).
            assignment_path: Where the assignment table lives (default ``<root>/assignment``).

        Raises:
            StoreSettingsConflictError: a table exists with another schema, partitioning or config.
        """
        config = config or AssignmentConfig()
        subs, assigned = _paths(root, subscriptions_path, assignment_path)
        properties = config_properties(config)
        for path, schema in ((subs, SUBSCRIPTIONS_SCHEMA), (assigned, ASSIGNMENT_SCHEMA)):
            delta_ops.ensure_table(
                spark, path, load_schema(schema), partition_by=(GENERATION,), properties=properties
            )
        return cls(spark, subs, assigned, config)

    @classmethod
    def open(
        cls,
        spark: SparkSession,
        root: str | None,
        *,
        subscriptions_path: str | None = None,
        assignment_path: str | None = None,
    ) -> AssignmentStore:
        """Open an existing store; its configuration is read back from the assignment table's properties.

        Raises:
            NoSubscriptionsError: a table does not exist (nothing was ever subscribed there).
            NotALakehouseTableError: the assignment table is not a lakehouse assignment store.
            StoreSettingsConflictError: the two tables disagree.
        """
        subs, assigned = _paths(root, subscriptions_path, assignment_path)
        for path in (subs, assigned):
            if not DeltaTable.isDeltaTable(spark, path):
                raise NoSubscriptionsError(path)
        config = config_from_properties(assigned, lakehouse_properties(spark, assigned, KIND))
        delta_ops.check_table_settings(
            spark, subs, load_schema(SUBSCRIPTIONS_SCHEMA), (GENERATION,), config_properties(config)
        )
        return cls(spark, subs, assigned, config)

    # ------------------------------------------------------------------ writes
    def write_subscriptions(
        self,
        generation: int,
        clients: Mapping[str, ClientState],
        stateful_tasks: Iterable[str],
        stateless_tasks: Iterable[str] = (),
        at: datetime | None = None,
    ) -> bool:
        """Record the subscriptions of ``generation``: one row per client, one atomic commit.

        Args:
            generation: The generation; must be larger than every generation written before.
            clients: process id -> the state the client reported.
            stateful_tasks: Stateful tasks of the topology.
            stateless_tasks: Stateless tasks of the topology.
            at: When they were received (default: now, UTC).

        Returns:
            True if written; False if ``generation`` was written already (a replay: nothing is written).

        Raises:
            InvalidInputError: ``generation`` is negative, or below the last one without having been written.
            AssignmentInputError: what :func:`assign` would refuse (a malformed or duplicate task id, a
                client lacking a rack-aware tag, a key that is not the client's id), or no clients: a
                generation that could never be assigned is not written.
        """
        stateful = sorted_tasks(stateful_tasks)
        stateless = sorted_tasks(stateless_tasks)
        if not clients:
            raise AssignmentInputError(f"generation {generation} has no clients: nothing was written")
        for pid, client in sorted(clients.items()):
            bad = sorted(str(tag) for tag, value in client.tags.items() if not isinstance(value, str))
            if bad:
                raise AssignmentInputError(
                    f"client {pid}'s tag(s) {bad} have no string value: nothing was written"
                )
        build_context(clients, stateful, stateless, self.config)  # the assignor's own input checks
        log = CommitLog(self.spark, self.subscriptions_path, APP_ID)
        if not log.check_new(generation, log.last_batch_id(), "generation"):
            return False
        time = at or datetime.now(UTC)
        rows = [
            _subscription_row(generation, clients[pid], stateful, stateless, time) for pid in sorted(clients)
        ]
        frame = self.spark.createDataFrame(rows, load_schema(SUBSCRIPTIONS_SCHEMA)).coalesce(1)
        options = log.writer_options(generation, {}, clients=len(rows))
        append_to_table(frame, self.subscriptions_path, options)
        return True

    def write_assignment(
        self, subscription: Subscription, result: AssignmentResult, at: datetime | None = None
    ) -> bool:
        """Validate ``result`` against ``subscription`` and record it as that generation's assignment.

        One row per (client, task, role), one atomic commit. Nothing is written when the result is
        invalid or the generation was written already.

        Args:
            subscription: The subscriptions the result was computed from.
            result: The assignment.
            at: When the generation was assigned (default: now, UTC).

        Returns:
            True if written; False if the generation was written already (a replay).

        Raises:
            InvalidAssignmentError: ``result`` breaks the contract (lists every violation).
            AssignmentInputError: the subscription has no clients.
            InvalidInputError: the generation is below the last one written without having been written.
        """
        if not subscription.clients:
            raise AssignmentInputError(
                f"generation {subscription.generation} has no clients: nothing was written"
            )
        errors = validate_assignment(
            subscription.clients,
            subscription.stateful_tasks,
            subscription.stateless_tasks,
            self.config,
            result,
        )
        if errors:
            raise InvalidAssignmentError(subscription.generation, errors)
        generation = subscription.generation
        log = CommitLog(self.spark, self.assignment_path, APP_ID)
        if not log.check_new(generation, log.last_batch_id(), "generation"):
            return False
        self._require_stored(subscription)
        time = at or datetime.now(UTC)
        probing_at = time + result.probing_rebalance_after if result.probing_rebalance_after else None
        rows = [
            (generation, pid, task, role.value, time, probing_at)
            for pid, held in sorted(result.clients.items())
            for task, role in sorted(held.roles().items())
        ]
        frame = self.spark.createDataFrame(rows, load_schema(ASSIGNMENT_SCHEMA)).coalesce(1)
        options = log.writer_options(
            generation,
            {},
            moves=len(result.moves),
            warmups=sum(len(held.warmup) for held in result.clients.values()),
            probing_rebalance_needed=result.probing_rebalance_needed,
        )
        append_to_table(frame, self.assignment_path, options)
        return True

    def _require_stored(self, subscription: Subscription) -> None:
        """Raise ``AssignmentInputError`` if the store holds ``subscription``'s generation with other tasks
        or clients (an assignment of other subscriptions would take the generation: nothing is written)."""
        try:
            stored = self.subscription(subscription.generation)
        except NoSubscriptionsError:
            return
        differs = [
            what
            for what, mine, theirs in (
                ("stateful tasks", tuple(subscription.stateful_tasks), stored.stateful_tasks),
                ("stateless tasks", tuple(subscription.stateless_tasks), stored.stateless_tasks),
                ("clients", tuple(sorted(subscription.clients)), tuple(sorted(stored.clients))),
            )
            if mine != theirs
        ]
        if differs:
            raise AssignmentInputError(
                f"generation {subscription.generation}'s subscription differs from the stored one in its "
                f"{' and '.join(differs)}: assign the stored subscription (nothing was written)"
            )

    # ------------------------------------------------------------------ reads
    def subscriptions_table(self) -> DataFrame:
        """Every generation's subscriptions, as the table is now."""
        return self.spark.read.format("delta").load(self.subscriptions_path)

    def assignment_table(self) -> DataFrame:
        """Every generation's assignment rows, as the table is now."""
        return self.spark.read.format("delta").load(self.assignment_path)

    def latest_generation(self) -> int | None:
        """The largest generation with subscriptions, or None.

        The last generation :meth:`write_subscriptions` committed (generations only increase): read from
        the table's log (its idempotent-write record), no Spark job.
        """
        return CommitLog(self.spark, self.subscriptions_path, APP_ID).last_batch_id()

    def latest_assigned_generation(self) -> int | None:
        """The largest generation with a written assignment, or None.

        The last generation :meth:`write_assignment` committed (generations only increase): read from the
        table's log (its idempotent-write record), no Spark job.
        """
        return CommitLog(self.spark, self.assignment_path, APP_ID).last_batch_id()

    def subscription(self, generation: int | None = None) -> Subscription:
        """The subscriptions of ``generation`` (default: the latest).

        Raises:
            NoSubscriptionsError: there is no such generation.
            InconsistentTopologyError: its clients subscribed with different task sets.
        """
        if generation is None:
            generation = self.latest_generation()
            if generation is None:
                raise NoSubscriptionsError(self.subscriptions_path)
        if generation not in self._subscriptions:
            self._subscriptions[generation] = self._read_subscription(generation)
        return self._subscriptions[generation]

    def _read_subscription(self, generation: int) -> Subscription:
        table = self.subscriptions_table().where(F.col(GENERATION) == generation)
        rows = table.withColumn("time", F.unix_micros("time")).collect()
        if not rows:
            raise NoSubscriptionsError(self.subscriptions_path, generation)
        rows.sort(key=lambda row: row["process_id"])
        first = rows[0]
        for row in rows[1:]:
            same = row["stateful_tasks"] == first["stateful_tasks"]
            if not same or row["stateless_tasks"] != first["stateless_tasks"]:
                raise InconsistentTopologyError(generation, row["process_id"], first["process_id"])
        return Subscription(
            generation=generation,
            time=from_micros(first["time"]),
            clients={row["process_id"]: _client_state(row) for row in rows},
            stateful_tasks=tuple(first["stateful_tasks"]),
            stateless_tasks=tuple(first["stateless_tasks"]),
        )

    def latest_subscriptions(self) -> dict[str, ClientState]:
        """process id -> client state, of the latest generation.

        Raises:
            NoSubscriptionsError: nothing was subscribed yet.
        """
        return dict(self.subscription().clients)

    def assignment(self, generation: int | None = None) -> DataFrame:
        """The assignment rows of ``generation`` (default: the latest assigned one; empty if none).

        Lazy: no Spark job runs until the frame is used.
        """
        table = self.assignment_table()
        if generation is not None:
            return table.where(F.col(GENERATION) == generation)
        latest = table.agg(F.max(GENERATION).alias(GENERATION))
        return table.join(latest, on=GENERATION, how="left_semi")

    def held(self, generation: int | None = None) -> dict[str, ClientAssignment]:
        """Client -> the tasks it holds in ``generation`` (default: the latest assigned one).

        Every client subscribed in that generation is present, those holding nothing too. Empty when
        nothing was assigned yet. One Spark job: the generation's assignment rows and subscribed clients,
        read together (the latest assigned generation comes from the table's log).
        """
        if generation is None:
            generation = self.latest_assigned_generation()
            if generation is None:
                return {}
        assigned = self.assignment_table().where(F.col(GENERATION) == generation)
        subscribed = self.subscriptions_table().where(F.col(GENERATION) == generation)
        rows = (
            assigned.select("client", "task", "role")
            .unionByName(
                subscribed.select(
                    F.col("process_id").alias("client"),
                    F.lit(None).cast("string").alias("task"),
                    F.lit(None).cast("string").alias("role"),
                )
            )
            .collect()
        )
        clients = {row["client"] for row in rows if row["task"] is None}
        roles: dict[str, dict[Role, set[str]]] = {pid: {role: set() for role in Role} for pid in clients}
        for row in rows:
            if row["task"] is not None and row["client"] in roles:
                roles[row["client"]][Role(row["role"])].add(row["task"])
        return {
            pid: ClientAssignment(*(frozenset(by_role[r]) for r in (Role.ACTIVE, Role.STANDBY, Role.WARMUP)))
            for pid, by_role in sorted(roles.items())
        }

    # ------------------------------------------------------------------ SQL
    def register(self, prefix: str = "lakehouse") -> tuple[str, str]:
        """Make the tables SQL-queryable as ``<prefix>_subscriptions`` and ``<prefix>_assignment``.

        They are registered as external catalog tables over the store's paths (metadata only), so SQL can
        also time-travel them (``TIMESTAMP AS OF``). A name already registered for another location is
        re-pointed if it is an external table. See :mod:`lakehouse.assignment.queries` for the questions
        they answer.

        Returns:
            The two table names.

        Raises:
            InvalidInputError: ``prefix`` is not an SQL identifier.
            StoreSettingsConflictError: a managed table already has one of the names.
        """
        names = (f"{prefix}_subscriptions", f"{prefix}_assignment")
        for name, path in zip(names, (self.subscriptions_path, self.assignment_path), strict=True):
            delta_ops.register_table(self.spark, name, path, temporary=False)
        return names


def _paths(root: str | None, subscriptions: str | None, assignment: str | None) -> tuple[str, str]:
    if root is None and (subscriptions is None or assignment is None):
        raise InvalidInputError("give either root or both subscriptions_path and assignment_path")
    return (
        resolve_path(subscriptions or f"{root}/subscriptions"),
        resolve_path(assignment or f"{root}/assignment"),
    )


def _subscription_row(
    generation: int,
    client: ClientState,
    stateful: list[str],
    stateless: list[str],
    time: datetime,
) -> tuple[Any, ...]:
    return (
        generation,
        client.process_id,
        client.capacity,
        dict(client.tags),
        sorted_tasks(client.prev_active),
        sorted_tasks(client.prev_standby),
        dict(client.task_lags),
        stateful,
        stateless,
        time,
    )


def _client_state(row: Row) -> ClientState:
    return ClientState(
        process_id=row["process_id"],
        capacity=row["capacity"],
        tags=row["tags"],
        prev_active=frozenset(row["prev_active"]),
        prev_standby=frozenset(row["prev_standby"]),
        task_lags=row["task_lags"],
    )
