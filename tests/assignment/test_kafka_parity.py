"""Issue 12's reproductions, where the assignor was worse than Kafka Streams' HighAvailabilityTaskAssignor
(4.3.1) on the same input: each asserts Kafka's result or better, with the issue's inputs verbatim.

Lag 0 is caught up in every case (``acceptable_recovery_lag`` 10 000, lag 50 000 is not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakehouse.assignment import AssignmentConfig, AssignmentResult, ClientState, Role, assign


def holder(
    pid: str,
    capacity: int = 1,
    active: Iterable[str] = (),
    standby: Iterable[str] = (),
    tags: Mapping[str, str] | None = None,
) -> ClientState:
    """A client that ran ``active`` and ``standby`` and is caught up (lag 0) on all of them."""
    held = [*active, *standby]
    return ClientState(
        pid, capacity, tags or {}, frozenset(active), frozenset(standby), dict.fromkeys(held, 0)
    )


def replicas(result: AssignmentResult, pid: str) -> int:
    held = result.clients[pid]
    return len(held.active | held.standby | held.warmup)


def restoring_standbys(result: AssignmentResult, clients: Mapping[str, ClientState], bound: int) -> list:
    """(task, client) of standbys on a client that is not caught up while a caught-up one lacks the task."""
    found = []
    for pid, held in result.clients.items():
        for task in held.standby:
            if _caught_up(clients[pid], task, bound):
                continue
            holders = {p for p, h in result.clients.items() if task in h.active | h.standby | h.warmup}
            if any(_caught_up(c, task, bound) for p, c in clients.items() if p not in holders):
                found.append((task, pid))
    return sorted(found)


def _caught_up(client: ClientState, task: str, bound: int) -> bool:
    lag = client.lag(task)
    return lag is not None and lag <= bound


def test_a_standby_goes_to_the_caught_up_client_in_another_zone_without_a_warmup() -> None:
    # Tags zone, 1 standby, max 2 warm-ups. Kafka: standby on c, no warm-up, no probing.
    clients = {
        "a": ClientState("a", tags={"zone": "z0"}, prev_active=frozenset({"0_0"})),
        "b": ClientState("b", tags={"zone": "z0"}, task_lags={"0_0": 0}),
        "c": ClientState("c", tags={"zone": "z2"}, task_lags={"0_0": 0}),
        "d": ClientState(
            "d", tags={"zone": "z1"}, prev_standby=frozenset({"0_0"}), task_lags={"0_0": 50_000}
        ),
    }
    config = AssignmentConfig(1, max_warmup_replicas=2, rack_aware_assignment_tags=("zone",))
    result = assign(clients, ["0_0"], config=config)
    assert result.replicas("0_0", Role.ACTIVE) == ["a"]
    assert result.replicas("0_0", Role.STANDBY) == ["c"]
    assert not any(held.warmup for held in result.clients.values())
    assert not result.probing_rebalance_needed


def test_b_no_caught_up_client_is_left_empty() -> None:
    # No tags, 1 standby. Kafka: loads 2/1/1.
    clients = {
        "a": ClientState(
            "a", prev_active=frozenset({"0_0"}), prev_standby=frozenset({"0_1"}), task_lags={"0_1": 0}
        ),
        "b": ClientState(
            "b", prev_active=frozenset({"0_1"}), prev_standby=frozenset({"0_0"}), task_lags={"0_0": 0}
        ),
        "c": ClientState("c", task_lags={"0_0": 0, "0_1": 0}),
    }
    result = assign(clients, ["0_0", "0_1"], config=AssignmentConfig(1))
    loads = sorted(replicas(result, pid) for pid in clients)
    assert loads == [1, 1, 2]
    assert result.active_owners() == {"0_0": "a", "0_1": "b"}
    assert restoring_standbys(result, clients, 10_000) == []
    assert not result.probing_rebalance_needed


def test_c_standbys_that_must_restore_are_bounded_by_max_warmup_replicas() -> None:
    # No tags, 2 standbys, max 2 warm-ups, capacities 1/4/4/2, every replica caught up, nothing changed.
    # Kafka: 0 standbys restoring, 2 warm-ups, probing.
    clients = {
        "a": holder("a", 1, ["0_0"], ["0_1", "0_2"]),
        "b": holder("b", 4, [], ["0_1", "0_2"]),
        "c": holder("c", 4, [], ["0_0"]),
        "d": holder("d", 2, ["0_1", "0_2"], ["0_0"]),
    }
    config = AssignmentConfig(2, max_warmup_replicas=2)
    result = assign(clients, ["0_0", "0_1", "0_2"], config=config)
    assert restoring_standbys(result, clients, config.acceptable_recovery_lag) == []
    assert sum(len(held.warmup) for held in result.clients.values()) <= 2
    assert result.probing_rebalance_needed
    caught_up = {pid: set(c.task_lags) for pid, c in clients.items()}
    assert all(task in caught_up[pid] for pid, held in result.clients.items() for task in held.active)


def test_d_actives_move_to_a_caught_up_standby_instead_of_piling_up() -> None:
    # 3 clients, 6 tasks, 1 standby, c2 leaves. Kafka: 3/3 with one move to a caught-up standby.
    clients = {
        "c0": holder("c0", 1, ["0_0", "0_3"], ["0_2", "0_5"]),
        "c1": holder("c1", 1, ["0_1", "0_4"], ["0_0", "0_3"]),
    }
    tasks = [f"0_{p}" for p in range(6)]
    result = assign(clients, tasks, config=AssignmentConfig(1))
    assert [len(result.clients[pid].active) for pid in ("c0", "c1")] == [3, 3]
    moved = [m for m in result.moves if m.role is Role.ACTIVE and m.source is not None]
    assert len(moved) == 1
    assert moved[0].task in clients[moved[0].destination].prev_standby
    assert not result.probing_rebalance_needed


def test_kip708_least_preferred_example_keeps_the_fully_different_node() -> None:
    # 4 nodes = 2 clusters x 2 zones, 2 standbys, tags zone,cluster, 18 tasks. KIP-708: active on
    # Node-1 -> one standby on Node-4 (different cluster and zone), the other on the least loaded of
    # Node-2 / Node-3.
    layout = {
        "Node-1": ("K8s_Cluster1", "eu-central-1a"),
        "Node-2": ("K8s_Cluster1", "eu-central-1b"),
        "Node-3": ("K8s_Cluster2", "eu-central-1a"),
        "Node-4": ("K8s_Cluster2", "eu-central-1b"),
    }
    nodes = {pid: ClientState(pid, tags={"cluster": c, "zone": z}) for pid, (c, z) in layout.items()}
    config = AssignmentConfig(2, rack_aware_assignment_tags=("zone", "cluster"))
    result = assign(nodes, [f"0_{p}" for p in range(18)], config=config)
    for task, active in result.active_owners().items():
        opposite = next(
            p for p, (c, z) in layout.items() if c != layout[active][0] and z != layout[active][1]
        )
        assert opposite in result.replicas(task, Role.STANDBY), task
    loads = [replicas(result, pid) for pid in nodes]
    assert max(loads) - min(loads) <= 1
