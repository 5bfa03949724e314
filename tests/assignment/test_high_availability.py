"""KIP-441 high availability: Kafka's HighAvailabilityTaskAssignorTest scenarios (kafka-semantics.md §4.3).

Acceptable lag 100 and at most 2 warm-ups unless a test says otherwise; one thread per client. Kafka
round-robins first and moves back, so some of its probing flags and warm-ups are artifacts; those tests
assert the property and say where ours differs.
"""

from __future__ import annotations

from lakehouse.assignment import AssignmentConfig, AssignmentResult, ClientState, Role, assign

LAG_OK = 100
NINE = [f"0_{p}" for p in range(9)]
FOUR = [f"0_{p}" for p in range(4)]


def config(standbys: int = 0, lag: int = LAG_OK, warmups: int = 2) -> AssignmentConfig:
    return AssignmentConfig(
        num_standby_replicas=standbys, acceptable_recovery_lag=lag, max_warmup_replicas=warmups
    )


def owner(tasks: list[str], lag: int = 0) -> dict[str, object]:
    return {"prev_active": frozenset(tasks), "task_lags": dict.fromkeys(tasks, lag)}


def held(result: AssignmentResult, pid: str) -> int:
    client = result.clients[pid]
    return len(client.active | client.standby | client.warmup)


def test_sticky_for_active_and_standby_tasks_while_warming_up() -> None:
    clients = {
        "c1": ClientState("c1", **owner(NINE)),  # type: ignore[arg-type]
        "c2": ClientState("c2", prev_standby=frozenset(NINE), task_lags=dict.fromkeys(NINE, 10)),
        "c3": ClientState("c3"),
    }
    result = assign(clients, NINE, config=config(standbys=1, lag=11))
    assert [held(result, pid) for pid in ("c1", "c2", "c3")] == [9, 9, 2]
    assert len(result.clients["c3"].warmup) == 2 and not result.clients["c3"].active
    assert result.probing_rebalance_needed


def test_no_warmups_when_any_lag_is_acceptable() -> None:
    clients = {"c1": ClientState("c1", **owner(NINE)), "c2": ClientState("c2"), "c3": ClientState("c3")}  # type: ignore[arg-type]
    result = assign(clients, NINE, config=config(standbys=1, lag=2**63 - 1))
    assert [len(result.clients[pid].active) for pid in ("c1", "c2", "c3")] == [3, 3, 3]
    assert sum(held(result, pid) for pid in clients) == 18
    assert not result.probing_rebalance_needed and not any(c.warmup for c in result.clients.values())
    # As in Kafka, standbys are balanced after placement: c1's state is kept as standbys first, then
    # the clients over their share of all replicas hand standbys to c3.
    assert [held(result, pid) for pid in ("c1", "c2", "c3")] == [6, 6, 6]


def test_active_moves_to_the_caught_up_client_when_its_owner_is_behind() -> None:
    clients = {
        "c1": ClientState("c1", prev_active=frozenset({"0_0"}), task_lags={"0_0": 500}),
        "c2": ClientState("c2", task_lags={"0_0": 0}),
    }
    result = assign(clients, ["0_0", "0_1"], config=config())
    assert result.clients["c1"].active == {"0_1"} and result.clients["c2"].active == {"0_0"}
    # Kafka also asks for a probing rebalance here: its round-robin put 0_0 on c1 first. Ours is balanced.
    assert not result.probing_rebalance_needed


def test_most_caught_up_client_gets_the_active_when_none_is_caught_up() -> None:
    clients = {
        "c1": ClientState("c1", task_lags={"0_0": 2**62}),
        "c2": ClientState("c2", task_lags={"0_0": 1000}),
        "c3": ClientState("c3", task_lags={"0_0": 500}),
    }
    result = assign(clients, ["0_0"], config=config(standbys=1))
    assert result.replicas("0_0", Role.ACTIVE) == ["c3"]
    assert result.replicas("0_0", Role.STANDBY) == ["c2"]
    # Kafka's c1 warm-up comes from its round-robin target c1; here the target is c3 from the start.
    assert not result.probing_rebalance_needed


def test_warmups_are_assigned_even_without_standby_replicas() -> None:
    clients = {"c1": ClientState("c1", **owner(["0_0", "0_1"])), "c2": ClientState("c2")}  # type: ignore[arg-type]
    result = assign(clients, ["0_0", "0_1"], config=config())
    assert result.clients["c1"].active == {"0_0", "0_1"}
    assert len(result.clients["c2"].warmup) == 1
    assert (
        result.probing_rebalance_needed
        and result.probing_rebalance_after == config().probing_rebalance_interval
    )


def test_no_more_than_max_warmup_replicas() -> None:
    clients = {"c1": ClientState("c1", **owner(FOUR)), "c2": ClientState("c2")}  # type: ignore[arg-type]
    result = assign(clients, FOUR, config=config(warmups=1))
    assert result.clients["c1"].active == set(FOUR)
    assert len(result.clients["c2"].warmup) == 1 and not result.clients["c2"].standby
    assert result.probing_rebalance_needed


def test_warmup_and_standby_never_share_a_client() -> None:
    clients = {"c1": ClientState("c1", **owner(FOUR)), "c2": ClientState("c2")}  # type: ignore[arg-type]
    result = assign(clients, FOUR, config=config(standbys=1, warmups=1))
    assert result.clients["c1"].active == set(FOUR)
    assert result.clients["c2"].standby == set(FOUR) and not result.clients["c2"].warmup
    assert result.probing_rebalance_needed


def test_single_client_gets_no_standbys_and_needs_no_probing() -> None:
    result = assign({"c1": ClientState("c1")}, FOUR, config=config(standbys=1))
    assert result.clients["c1"].active == set(FOUR) and not result.clients["c1"].standby
    assert not result.probing_rebalance_needed


def test_actives_go_to_clients_without_state_when_none_has_any() -> None:
    clients = {pid: ClientState(pid) for pid in ("c1", "c2", "c3")}
    result = assign(clients, NINE, config=config(standbys=1))
    assert [len(result.clients[pid].active) for pid in clients] == [3, 3, 3]
    assert not result.probing_rebalance_needed


def test_previous_balanced_assignment_is_reused_unchanged() -> None:
    clients = {
        "c1": ClientState("c1", **owner(["0_0", "0_2"])),  # type: ignore[arg-type]
        "c2": ClientState("c2", **owner(["0_1", "0_3"])),  # type: ignore[arg-type]
    }
    result = assign(clients, FOUR, config=config())
    assert result.clients["c1"].active == {"0_0", "0_2"} and result.clients["c2"].active == {"0_1", "0_3"}
    assert not result.probing_rebalance_needed and result.moves == ()


def test_a_caught_up_standby_takes_over_without_a_warmup_when_the_owner_leaves() -> None:
    clients = {
        "c2": ClientState("c2", prev_standby=frozenset(FOUR), task_lags=dict.fromkeys(FOUR, 3)),
        "c3": ClientState("c3"),
    }
    result = assign(clients, FOUR, config=config(standbys=1))
    assert result.clients["c2"].active | result.clients["c3"].active == set(FOUR)
    assert all(result.replicas(task, Role.ACTIVE) == ["c2"] for task in FOUR)
    assert result.probing_rebalance_needed and len(result.clients["c3"].warmup) == 0
