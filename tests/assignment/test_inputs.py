"""Input validation, task order, determinism and the validator's own checks."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from lakehouse.assignment import (
    AssignmentConfig,
    AssignmentErrorKind,
    AssignmentInputError,
    AssignmentResult,
    ClientAssignment,
    ClientIdMismatchError,
    ClientState,
    DuplicateTaskError,
    InvalidAssignmentConfigError,
    InvalidCapacityError,
    InvalidTaskIdError,
    NegativeLagError,
    UnknownTagKeyError,
    assign,
    sorted_tasks,
    validate_assignment,
)


def clients(*pids: str, **kwargs: object) -> dict[str, ClientState]:
    return {pid: ClientState(pid, **kwargs) for pid in pids}  # type: ignore[arg-type]


def test_task_ids_order_numerically() -> None:
    assert sorted_tasks(["1_0", "0_10", "0_2", "10_1"]) == ["0_2", "0_10", "1_0", "10_1"]


@pytest.mark.parametrize("bad", ["0-1", "a_1", "0_", "_1", "0_1_2", "-1_0"])
def test_malformed_task_id_is_refused(bad: str) -> None:
    with pytest.raises(InvalidTaskIdError) as caught:
        assign(clients("a"), [bad])
    assert caught.value.task == bad


def test_duplicate_task_within_and_across_task_sets_is_refused() -> None:
    with pytest.raises(DuplicateTaskError) as within:
        assign(clients("a"), ["0_1", "0_1"])
    with pytest.raises(DuplicateTaskError) as across:
        assign(clients("a"), ["0_1"], ["0_1"])
    assert within.value.task == across.value.task == "0_1"


def test_awareness_key_missing_from_a_client_is_refused() -> None:
    members = {"a": ClientState("a", tags={"zone": "z1"}), "b": ClientState("b", tags={"rack": "r1"})}
    config = AssignmentConfig(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    with pytest.raises(UnknownTagKeyError) as caught:
        assign(members, ["0_0"], config=config)
    assert (caught.value.key, caught.value.client, caught.value.client_tags) == ("zone", "b", ["rack"])


@pytest.mark.parametrize("capacity", [0, -2, True, 1.5])
def test_non_positive_capacity_is_refused(capacity: object) -> None:
    with pytest.raises(InvalidCapacityError) as caught:
        ClientState("a", capacity=capacity)  # type: ignore[arg-type]
    assert caught.value.capacity == capacity


def test_negative_lag_is_refused() -> None:
    with pytest.raises(NegativeLagError) as caught:
        ClientState("a", task_lags={"0_0": 5, "0_1": -1})
    assert (caught.value.client, caught.value.task, caught.value.lag) == ("a", "0_1", -1)


def test_client_key_must_match_process_id() -> None:
    with pytest.raises(ClientIdMismatchError):
        assign({"a": ClientState("b")}, ["0_0"])


def test_tasks_without_clients_are_refused_but_nothing_to_do_is_fine() -> None:
    with pytest.raises(AssignmentInputError):
        assign({}, ["0_0"])
    assert assign({}, []) == AssignmentResult({}, False, None, ())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_standby_replicas", -1),
        ("acceptable_recovery_lag", -1),
        ("max_warmup_replicas", 0),
        ("probing_rebalance_interval", timedelta(seconds=59)),
        ("rack_aware_assignment_tags", ("zone", "zone")),
    ],
)
def test_out_of_range_config_is_refused(field: str, value: object) -> None:
    with pytest.raises(InvalidAssignmentConfigError) as caught:
        AssignmentConfig(**{field: value})  # type: ignore[arg-type]
    assert caught.value.field == field


def test_input_errors_are_value_errors() -> None:
    assert issubclass(AssignmentInputError, ValueError)
    assert issubclass(NegativeLagError, AssignmentInputError)


def test_same_input_gives_identical_result_whatever_the_iteration_order() -> None:
    members = {
        pid: ClientState(pid, capacity=cap, tags={"zone": zone}, task_lags={"0_1": 20, "0_3": 50_000})
        for pid, cap, zone in [("c", 2, "z1"), ("a", 1, "z2"), ("b", 1, "z1")]
    }
    config = AssignmentConfig(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    tasks = [f"0_{p}" for p in range(7)]
    first = assign(members, tasks, ["1_0", "1_1"], config)
    reordered = dict(reversed(list(members.items())))
    assert assign(reordered, list(reversed(tasks)), ["1_1", "1_0"], config) == first
    assert list(first.clients) == ["a", "b", "c"]


def test_validator_reports_each_kind_of_violation() -> None:
    members = clients("a", "b")
    config = AssignmentConfig(num_standby_replicas=1, max_warmup_replicas=1)
    broken = AssignmentResult(
        clients={
            "a": ClientAssignment(active=frozenset({"0_0", "9_9"}), standby=frozenset({"0_0", "1_0"})),
            "b": ClientAssignment(active=frozenset({"0_0"}), warmup=frozenset({"0_1", "1_0"})),
            "x": ClientAssignment(),
        },
        probing_rebalance_needed=False,
        probing_rebalance_after=None,
        moves=(),
    )
    errors = validate_assignment(members, ["0_0", "0_1"], ["1_0"], config, broken)
    kinds = {(e.kind, e.task, e.client) for e in errors}
    assert kinds == {
        (AssignmentErrorKind.UNKNOWN_CLIENT, None, "x"),
        (AssignmentErrorKind.UNKNOWN_TASK, "9_9", "a"),
        (AssignmentErrorKind.ACTIVE_ASSIGNED_MULTIPLE_TIMES, "0_0", None),
        (AssignmentErrorKind.MISSING_ACTIVE, "0_1", None),
        (AssignmentErrorKind.MISSING_ACTIVE, "1_0", None),
        (AssignmentErrorKind.MULTIPLE_ROLES, "0_0", "a"),
        (AssignmentErrorKind.INVALID_STANDBY, "1_0", "a"),
        (AssignmentErrorKind.INVALID_STANDBY, "1_0", "b"),
        (AssignmentErrorKind.WRONG_STANDBY_COUNT, "0_1", None),
        (AssignmentErrorKind.TOO_MANY_WARMUPS, None, None),
        (AssignmentErrorKind.WARMUP_WITHOUT_PROBING, None, None),
    }


def test_validator_reports_active_that_must_restore_while_a_client_is_caught_up() -> None:
    members = {"a": ClientState("a", task_lags={"0_0": 0}), "b": ClientState("b")}
    result = assign(members, ["0_0"])
    assert result.active_owners() == {"0_0": "a"}
    moved = replace(
        result, clients={"a": ClientAssignment(), "b": ClientAssignment(active=frozenset({"0_0"}))}
    )
    errors = validate_assignment(members, ["0_0"], [], AssignmentConfig(), moved)
    assert [(e.kind, e.client) for e in errors] == [(AssignmentErrorKind.ACTIVE_NOT_CAUGHT_UP, "b")]
