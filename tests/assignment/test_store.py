"""AssignmentStore on real Delta tables: generations, idempotence, validation, the SQL questions, the job.

One module-scoped store holds the demo's two generations (6 clients in 3 zones, 12 tasks, 1 standby;
``c5`` leaves before generation 2) and their summaries; most tests only read it, so the module writes few
Delta commits.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.assign import main as assign_job
from lakehouse import delta_ops
from lakehouse.assignment import (
    AssignmentConfig,
    AssignmentInputError,
    AssignmentResult,
    ClientAssignment,
    ClientState,
    Role,
    assign,
)
from lakehouse.assignment.errors import InvalidAssignmentError, NoSubscriptionsError
from lakehouse.assignment.job import (
    DEMO_CONFIG,
    assign_generation,
    demo_clients,
    feed_back,
    run_assignment,
    summary_lines,
    write_demo_subscriptions,
)
from lakehouse.assignment.queries import statement
from lakehouse.assignment.store import APP_ID, AssignmentStore
from lakehouse.commit_log import CommitLog
from lakehouse.errors import InvalidInputError, LakehouseError, StoreSettingsConflictError

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = T0 + DEMO_CONFIG.probing_rebalance_interval
TASKS = [f"0_{p}" for p in range(12)]
PREFIX = "assign_test"


@pytest.fixture(scope="module")
def demo(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[AssignmentStore, list[str]]:
    store = AssignmentStore.create(spark, str(tmp_path_factory.mktemp("assignment_demo")), DEMO_CONFIG)
    lines: list[str] = []
    for generation, leave, at in ((1, (), T0), (2, ("c5",), T1)):
        write_demo_subscriptions(store, generation, leave, at=at)
        lines += summary_lines(assign_generation(store, generation, at=at))
    store.register(PREFIX)
    return store, lines


@pytest.fixture(scope="module")
def results(demo: tuple[AssignmentStore, list[str]]) -> dict[int, AssignmentResult]:
    """The two generations' assignments, recomputed by the pure assignor from the stored subscriptions."""
    store, _ = demo
    out = {}
    for generation in (1, 2):
        sub = store.subscription(generation)
        out[generation] = assign(sub.clients, sub.stateful_tasks, sub.stateless_tasks, store.config)
    return out


def sql(spark: SparkSession, name: str, **values: object) -> list[tuple]:
    return [tuple(row) for row in spark.sql(statement(name, PREFIX, **values)).collect()]


# ---------------------------------------------------------------------- tables and round trips
def test_subscriptions_round_trip_as_client_states(demo: tuple[AssignmentStore, list[str]]) -> None:
    store, _ = demo
    first = store.subscription(1)
    assert first.clients == demo_clients()
    assert first.stateful_tasks == tuple(TASKS) and first.stateless_tasks == ()
    assert first.time == T0
    latest = store.latest_subscriptions()
    assert sorted(latest) == ["c0", "c1", "c2", "c3", "c4"]
    held = store.held(1)
    assert latest["c0"].prev_active == held["c0"].active
    assert latest["c0"].task_lags == dict.fromkeys(held["c0"].active | held["c0"].standby, 0)
    assert latest["c0"].tags == {"zone": "z0"}


def test_stored_assignment_is_the_assignors_result(
    demo: tuple[AssignmentStore, list[str]], results: dict[int, AssignmentResult]
) -> None:
    store, _ = demo
    for generation in (1, 2):
        assert store.held(generation) == dict(results[generation].clients)
    rows = store.assignment().collect()
    assert {row["generation"] for row in rows} == {2}
    assert Counter(row["role"] for row in rows) == {"active": 12, "standby": 12}
    assert {row["time"].replace(tzinfo=UTC) for row in rows} == {T1}
    assert {row["probing_rebalance_at"] for row in rows} == {None}


def test_one_commit_per_table_per_generation_partitioned_by_generation(
    spark: SparkSession, demo: tuple[AssignmentStore, list[str]]
) -> None:
    store, _ = demo
    for path in (store.subscriptions_path, store.assignment_path):
        commits = CommitLog(spark, path, APP_ID).commits().orderBy("version").collect()
        assert [row["batch_id"] for row in commits] == [1, 2]
        assert delta_ops.table_metadata(spark, path).partition_columns == ("generation",)
        assert delta_ops.table_properties(spark, path)["lakehouse.num_standby_replicas"] == "1"
    assert store.config == DEMO_CONFIG


def test_a_replayed_generation_writes_nothing(demo: tuple[AssignmentStore, list[str]]) -> None:
    store, _ = demo
    sub = store.subscription(2)
    before = DeltaTable.forPath(store.spark, store.assignment_path).history().count()
    assert store.write_subscriptions(2, sub.clients, TASKS) is False
    assert store.write_assignment(sub, assign(sub.clients, TASKS, (), store.config)) is False
    assert DeltaTable.forPath(store.spark, store.assignment_path).history().count() == before
    with pytest.raises(InvalidInputError, match="generations must increase"):
        store.write_subscriptions(0, sub.clients, TASKS)


def test_an_invalid_assignment_is_refused_before_writing(demo: tuple[AssignmentStore, list[str]]) -> None:
    store, _ = demo
    sub = replace(store.subscription(2), generation=3)
    good = assign(sub.clients, TASKS, (), store.config)
    broken = dict(good.clients)
    broken["c0"] = ClientAssignment(active=frozenset(), standby=broken["c0"].standby)
    with pytest.raises(InvalidAssignmentError, match="generation 3 is invalid") as raised:
        store.write_assignment(sub, replace(good, clients=broken))
    assert {e.kind.value for e in raised.value.errors} == {"missing_active"}
    assert isinstance(raised.value, LakehouseError) and isinstance(raised.value, ValueError)
    assert store.latest_assigned_generation() == 2


@pytest.mark.parametrize(
    ("clients", "tasks", "match"),
    [
        ({}, TASKS, "generation 3 has no clients"),
        ({"x": ClientState("x", tags={"zone": "z0"})}, ["0_0", "0_0"], "0_0"),
        ({"x": ClientState("x")}, TASKS, "zone"),
    ],
    ids=["no clients", "duplicate task", "client without the rack-aware tag"],
)
def test_subscriptions_that_could_never_be_assigned_are_refused(
    demo: tuple[AssignmentStore, list[str]], clients: dict[str, ClientState], tasks: list[str], match: str
) -> None:
    store, _ = demo
    with pytest.raises(AssignmentInputError, match=match):
        store.write_subscriptions(3, clients, tasks)
    with pytest.raises(AssignmentInputError, match="no clients"):
        store.write_assignment(
            replace(store.subscription(2), generation=3, clients={}), AssignmentResult({}, False, None, ())
        )
    assert store.latest_generation() == 2


def test_creating_with_other_settings_conflicts(
    spark: SparkSession, demo: tuple[AssignmentStore, list[str]]
) -> None:
    store, _ = demo
    with pytest.raises(StoreSettingsConflictError, match="num_standby_replicas"):
        AssignmentStore.create(
            spark,
            None,
            AssignmentConfig(num_standby_replicas=2),
            subscriptions_path=store.subscriptions_path,
            assignment_path=store.assignment_path,
        )


def test_assignment_input_errors_are_lakehouse_errors() -> None:
    assert issubclass(AssignmentInputError, LakehouseError)
    with pytest.raises(ValueError, match="capacity"):
        ClientState("c0", capacity=0)


# ---------------------------------------------------------------------- the SQL questions
def test_who_owns_a_task_now(spark: SparkSession, demo: object, results: dict[int, AssignmentResult]) -> None:
    owner = results[2].active_owners()["0_5"]
    assert sql(spark, "owner_now", task="0_5") == [(2, owner)]


def test_who_owned_a_task_at_a_time_by_generation_time(
    spark: SparkSession, demo: object, results: dict[int, AssignmentResult]
) -> None:
    task = next(m.task for m in results[2].moves if m.role.value == "active")
    assert sql(spark, "owner_at", task=task, at=T1 - timedelta(seconds=1)) == [
        (1, results[1].active_owners()[task])
    ]
    assert sql(spark, "owner_at", task=task, at=T1) == [(2, results[2].active_owners()[task])]
    assert sql(spark, "owner_at", task=task, at=T0 - timedelta(seconds=1)) == []


def test_who_owned_a_task_as_of_a_delta_commit_time(
    spark: SparkSession, demo: tuple[AssignmentStore, list[str]], results: dict[int, AssignmentResult]
) -> None:
    store, _ = demo
    history = DeltaTable.forPath(spark, store.assignment_path).history()
    committed = {
        row[0]: datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=row[1])
        for row in history.select("version", F.unix_micros("timestamp")).collect()
    }
    found = CommitLog(spark, store.assignment_path, APP_ID).batch_commit(1)
    first = None if found is None else found[0]
    task = next(m.task for m in results[2].moves if m.role.value == "active")
    assert first is not None
    assert sql(spark, "owner_as_of", task=task, at=committed[first]) == [
        (1, results[1].active_owners()[task])
    ]
    assert sql(spark, "owner_as_of", task=task, at=max(committed.values())) == [
        (2, results[2].active_owners()[task])
    ]


def test_what_moved_between_two_generations(
    spark: SparkSession, demo: object, results: dict[int, AssignmentResult]
) -> None:
    expected = []
    for task in TASKS:
        for role in ("active", "standby"):
            before = {p for p, held in results[1].clients.items() if task in getattr(held, role)}
            after = {p for p, held in results[2].clients.items() if task in getattr(held, role)}
            if before != after:
                expected.append((task, role, sorted(before - after), sorted(after - before)))
    rows = sql(spark, "moves_between", from_generation=1, to_generation=2)
    assert rows == expected
    c5_held = results[1].clients["c5"].active | results[1].clients["c5"].standby
    assert rows and {row[0] for row in rows} == c5_held  # only the tasks c5 held moved


def test_how_many_tasks_each_zone_holds(
    spark: SparkSession, demo: tuple[AssignmentStore, list[str]], results: dict[int, AssignmentResult]
) -> None:
    store, _ = demo
    zones = {pid: c.tags["zone"] for pid, c in store.latest_subscriptions().items()}
    expected: dict[str, Counter[str]] = {}
    for pid, held in results[2].clients.items():
        counts = expected.setdefault(zones[pid], Counter())
        counts["active"] += len(held.active)
        counts["standby"] += len(held.standby)
    assert sql(spark, "tasks_per_tag", tag="zone") == [
        (zone, c["active"], c["standby"], 0, c["active"] + c["standby"])
        for zone, c in sorted(expected.items())
    ]


# ---------------------------------------------------------------------- the job
def test_summary_says_what_moved(
    demo: tuple[AssignmentStore, list[str]], results: dict[int, AssignmentResult]
) -> None:
    _, lines = demo
    text = "\n".join(lines)
    assert "generation 1: 6 clients, 12 stateful and 0 stateless tasks" in text
    assert f"moves: {len(results[2].moves)} (" in text
    c5 = results[1].clients["c5"]
    held_by_c5 = {(t, Role.ACTIVE) for t in c5.active} | {(t, Role.STANDBY) for t in c5.standby | c5.warmup}
    for move in results[2].moves:
        source = move.source or ("c5 (left)" if (move.task, move.role) in held_by_c5 else "-")
        assert f"{move.task} {move.role.value}: {source} -> {move.destination}" in text
    # The departed client's active tasks moved away from it, and the summary says so.
    assert any(f"{task} active: c5 (left) -> " in text for task in c5.active)


def test_run_assignment_writes_the_latest_generation_once(spark: SparkSession, tmp_path: Path) -> None:
    root = str(tmp_path)
    config = AssignmentConfig(max_warmup_replicas=1)
    store = AssignmentStore.create(spark, root, config)
    with pytest.raises(NoSubscriptionsError):
        run_assignment(spark, root)
    clients = {pid: ClientState(pid) for pid in ("a", "b")}
    previous = {"a": ClientAssignment(active=frozenset(TASKS[:3])), "b": ClientAssignment()}
    store.write_subscriptions(7, feed_back(clients, previous), TASKS[:3], at=T0)
    lines = run_assignment(spark, root, config, at=T0)
    assert lines[0] == "generation 7: 2 clients, 3 stateful and 0 stateless tasks"
    assert "  probing rebalance needed: yes, in 10 min" in lines
    assert any(line.startswith("  warm-ups: 1 (") for line in lines)
    rows = store.assignment().select("probing_rebalance_at").distinct().collect()
    assert [row[0].replace(tzinfo=UTC) for row in rows] == [T0 + timedelta(minutes=10)]
    again = run_assignment(spark, root, at=T0)
    assert again[0].endswith("(assigned already: nothing written)")
    assert store.latest_assigned_generation() == 7


def test_job_exits_2_with_one_line_when_there_is_no_store(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert assign_job(["--root", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no subscriptions in") and err.count("\n") == 1
