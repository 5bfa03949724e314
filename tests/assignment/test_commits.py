"""Assignment generations are Delta's own idempotent-write record: they survive log cleanup."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.sql import SparkSession

from lakehouse.assignment.job import demo_clients
from lakehouse.assignment.store import AssignmentStore
from lakehouse.errors import InvalidInputError
from tests.durability import age_log, deleted_since, enable_fast_cleanup

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TASKS = [f"0_{p}" for p in range(4)]


def test_generations_survive_log_cleanup(spark: SparkSession, tmp_path: object) -> None:
    store = AssignmentStore.create(spark, str(tmp_path))
    clients = demo_clients()
    enable_fast_cleanup(spark, store.subscriptions_path)
    for generation in (1, 2):
        assert store.write_subscriptions(generation, clients, TASKS, at=T0)
    before = age_log(store.subscriptions_path)
    assert store.write_subscriptions(4, clients, TASKS, at=T0)
    assert store.write_subscriptions(5, clients, TASKS, at=T0)
    assert deleted_since(store.subscriptions_path, before)  # the oldest commits are gone
    assert store.write_subscriptions(5, clients, TASKS, at=T0) is False  # a replay writes nothing
    with pytest.raises(InvalidInputError, match="generations must increase"):
        store.write_subscriptions(3, clients, TASKS, at=T0)
    assert store.subscriptions_table().count() == 4 * len(clients)
