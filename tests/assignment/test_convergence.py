"""Rebalance rounds to converge under issue 12's throttle on restoring standbys.

A *round* is one assignment; between rounds every replica a client held (active, standby or warm-up)
catches up, as in ``bench/bench_assignment.py``. The assignment has converged when it requests no probing
rebalance. A standby that must restore while a caught-up client holds nothing of the task counts against
``max_warmup_replicas`` (issue 12, reproduction C), so a balance that needs K such restores takes at least
``ceil(K / max_warmup_replicas)`` rounds before the converged one.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakehouse.assignment import AssignmentConfig, AssignmentResult, ClientState, Role, assign
from tests.assignment.test_kafka_parity import holder, replicas, restoring_standbys


def next_round(clients: Mapping[str, ClientState], result: AssignmentResult) -> dict[str, ClientState]:
    """The clients one probing interval later: every replica they held (active, standby or warm-up) is
    caught up (lag 0); other local state keeps its lag. Also the bench's model of a round."""
    states = {}
    for pid, client in clients.items():
        held = result.clients[pid]
        states[pid] = ClientState(
            pid,
            client.capacity,
            client.tags,
            held.active,
            held.standby | held.warmup,
            {**client.task_lags, **dict.fromkeys(held.active | held.standby | held.warmup, 0)},
        )
    return states


def rounds(
    clients: Mapping[str, ClientState], tasks: list[str], config: AssignmentConfig
) -> list[tuple[Mapping[str, ClientState], AssignmentResult]]:
    """Each round's input and assignment, up to the first that requests no probing rebalance."""
    played = []
    while len(played) < 10:
        result = assign(clients, tasks, config=config)
        played.append((clients, result))
        if not result.probing_rebalance_needed:
            break
        clients = next_round(clients, result)
    return played


def test_a_standby_restoring_anyway_goes_to_a_client_with_room_not_to_one_over_its_share() -> None:
    # 0_0 stays on c2, its standby on caught-up c0. Nobody is caught up for 0_1 (its owner c2 is 50 000
    # behind), so its standby restores wherever it goes: on c1, which has room, not on c0, whose share of
    # the 4 replicas is 1. Otherwise c0 would have to hand it over later, a restore while c0 is caught up:
    # one more round. With 0_1's standby c1 is within its share, so 0_0's standby, planned on c1, needs
    # no warm-up there.
    clients = {
        "c0": ClientState("c0", 1, prev_standby=frozenset({"0_0"}), task_lags={"0_0": 0}),
        "c1": ClientState("c1", 2),
        "c2": ClientState(
            "c2", 2, prev_active=frozenset({"0_0", "0_1"}), task_lags={"0_0": 0, "0_1": 50_000}
        ),
    }
    config = AssignmentConfig(1, max_warmup_replicas=1)
    played = rounds(clients, ["0_0", "0_1"], config)
    first = played[0][1]
    assert first.replicas("0_0", Role.STANDBY) == ["c0"]
    assert first.replicas("0_1", Role.STANDBY) == ["c1"]
    assert not any(held.warmup for held in first.clients.values())
    assert replicas(first, "c0") == 1
    assert len(played) == 2


def test_a_deferred_target_that_idle_relief_balanced_gets_no_warmup() -> None:
    # Balance wants 0_1 on c1 (4 threads), which must restore it while c2 is caught up: 0_1 stays on c2.
    # c1, idle, then takes 0_0, which it is caught up for, from c0. Every client is within its share of
    # the 2 actives, so warming 0_1 up on c1 would be spent on a move the next assignment does not make.
    clients = {
        "c0": ClientState(
            "c0",
            1,
            prev_active=frozenset({"0_0"}),
            prev_standby=frozenset({"0_1"}),
            task_lags={"0_0": 0, "0_1": 50_000},
        ),
        "c1": ClientState("c1", 4, task_lags={"0_0": 0}),
        "c2": ClientState("c2", 3, prev_standby=frozenset({"0_1"}), task_lags={"0_1": 0}),
    }
    played = rounds(clients, ["0_0", "0_1"], AssignmentConfig(0, max_warmup_replicas=1))
    result = played[0][1]
    assert result.active_owners() == {"0_0": "c1", "0_1": "c2"}
    assert not any(held.warmup for held in result.clients.values())
    assert len(played) == 1


def test_balancing_off_a_caught_up_client_takes_a_round_per_warmup() -> None:
    # The trade-off of issue 12's throttle. Five one-thread clients, five tasks, 2 standbys: 15 replicas,
    # 3 per client. x is caught up for every task and holds 5 replicas; c and d hold 2. Balance needs two
    # standbys to leave x for c and d, which must restore them while x is caught up. The assignor before
    # issue 12 (7fa8619) does both at once and requests no probing rebalance: converged in 1 round, with
    # 2 standbys restoring while a caught-up client lacks the task, which reproduction C forbids beyond
    # max_warmup_replicas (1 here). Within the rule it takes a warm-up per round: 3 rounds. Fewer would
    # leave x at 5 replicas against a share of 3.
    clients = {
        "a": holder("a", 1, ["0_0"], ["0_3", "0_4"]),
        "b": holder("b", 1, ["0_1"], ["0_0", "0_4"]),
        "c": holder("c", 1, ["0_2"], ["0_1"]),
        "d": holder("d", 1, ["0_3"], ["0_2"]),
        "x": holder("x", 1, ["0_4"], ["0_0", "0_1", "0_2", "0_3"]),
    }
    config = AssignmentConfig(2, max_warmup_replicas=1)
    played = rounds(clients, [f"0_{p}" for p in range(5)], config)
    for states, result in played:
        warmups = sum(len(held.warmup) for held in result.clients.values())
        assert warmups + len(restoring_standbys(result, states, config.acceptable_recovery_lag)) <= 1
        assert all(move.role is not Role.ACTIVE for move in result.moves)
    assert len(played) == 3
    assert [replicas(played[-1][1], pid) for pid in clients] == [3, 3, 3, 3, 3]


def test_a_standby_that_would_restore_past_the_budget_stays_on_a_caught_up_client() -> None:
    # 2 tasks, 2 standbys, 1 warm-up. Balance wants 0_1's standbys off caught-up c1 onto c2 (empty) and
    # c4 (50 000 behind): two restores while c1 is caught up. The budget allows one, taken by c2's
    # warm-up, so c1 keeps its standby and c4 restores a round later. The assignor before this rule
    # restored on c4 at once as well: 2 rounds; within it, 3.
    clients = {
        "c0": ClientState("c0", 2, prev_standby=frozenset({"0_0"}), task_lags={"0_0": 0, "0_1": 0}),
        "c1": holder("c1", 2, ["0_0"], ["0_1"]),
        "c2": ClientState("c2", 4),
        "c3": holder("c3", 4, ["0_1"], ["0_0"]),
        "c4": ClientState("c4", 2, prev_standby=frozenset({"0_1"}), task_lags={"0_1": 50_000}),
    }
    config = AssignmentConfig(2, max_warmup_replicas=1)
    played = rounds(clients, ["0_0", "0_1"], config)
    first = played[0][1]
    assert sorted(first.replicas("0_1", Role.STANDBY)) == ["c0", "c1"]
    assert first.replicas("0_1", Role.WARMUP) == ["c2"]
    for states, result in played:
        warmups = sum(len(held.warmup) for held in result.clients.values())
        assert warmups + len(restoring_standbys(result, states, config.acceptable_recovery_lag)) <= 1
    assert len(played) == 3


def test_a_standby_its_client_must_restore_anyway_trades_places_with_one_it_is_caught_up_for() -> None:
    # c0 (1 thread) holds standbys of 0_0 (caught up) and 0_1 (50 000 behind); balance plans 0_0's
    # standby on c2, which would restore it while c0 is caught up: a warm-up and a second round. The only
    # client caught up for 0_1 is its active c1, so 0_1's standby restores wherever it goes: c0 keeps
    # 0_0 and c2 takes 0_1 instead (from scratch rather than from 50 000 behind). Loads stay, one round.
    clients = {
        "c0": ClientState(
            "c0", 1, prev_standby=frozenset({"0_0", "0_1"}), task_lags={"0_0": 0, "0_1": 50_000}
        ),
        "c1": holder("c1", 4, ["0_1"]),
        "c2": ClientState("c2", 2),
        "c3": holder("c3", 1, ["0_0"]),
    }
    played = rounds(clients, ["0_0", "0_1"], AssignmentConfig(1, max_warmup_replicas=1))
    result = played[0][1]
    assert result.replicas("0_0", Role.STANDBY) == ["c0"]
    assert result.replicas("0_1", Role.STANDBY) == ["c2"]
    assert len(played) == 1
