"""KIP-708 rack-aware standby placement: Kafka's ClientTagAwareStandbyTaskAssignorTest scenarios
(kafka-semantics.md §3.5) and the three worked topologies of the KIP.

Standbys are placed for fixed actives, as in Kafka's test, through the placement phase itself. Where
Kafka's exact pick is an artifact of its iteration order, the scenario's property is asserted, plus
membership in the set of picks Kafka's test accepts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from lakehouse.assignment import AssignmentConfig, ClientState, Role, assign
from lakehouse.assignment._context import build_context
from lakehouse.assignment.standby import place_standby_targets

ZONE_CLUSTER = ("zone", "cluster")


def grid_clients(capacity: int = 2, clusters: int = 3) -> dict[str, ClientState]:
    """PID_1..PID_9 (or PID_1..PID_6): cluster c = (n - 1) // 3 + 1, zone z = (n - 1) % 3 + 1."""
    return {
        f"PID_{n}": ClientState(
            f"PID_{n}",
            capacity,
            tags={"zone": f"zone{(n - 1) % 3 + 1}", "cluster": f"cluster{(n - 1) // 3 + 1}"},
        )
        for n in range(1, 3 * clusters + 1)
    }


def place(
    clients: Mapping[str, ClientState], actives: Mapping[str, str], per_task: int, keys: Sequence[str]
) -> dict[str, set[str]]:
    config = AssignmentConfig(num_standby_replicas=per_task, rack_aware_assignment_tags=tuple(keys))
    ctx = build_context(clients, actives, (), config)
    return {task: set(pids) for task, pids in place_standby_targets(ctx, actives, per_task).items()}


def standby_counts(placed: Mapping[str, set[str]]) -> Counter[str]:
    return Counter(pid for pids in placed.values() for pid in pids)


def differ_everywhere(clients: Mapping[str, ClientState], pids: Sequence[str], keys: Sequence[str]) -> bool:
    return all(len({clients[pid].tags[key] for pid in pids}) == len(pids) for key in keys)


def ids(*numbers: int) -> set[str]:
    return {f"PID_{n}" for n in numbers}


def on(pid: str, *tasks: str) -> dict[str, str]:
    return dict.fromkeys(tasks, pid)


def test_actives_located_on_same_zone_get_standbys_on_other_zones_and_clusters() -> None:
    clients = grid_clients()
    actives = on("PID_1", "0_0", "1_0") | on("PID_4", "0_1", "1_1") | on("PID_7", "0_2", "1_2")
    placed = place(clients, actives, 2, ZONE_CLUSTER)
    counts = standby_counts(placed)
    assert [counts[pid] for pid in ("PID_1", "PID_4", "PID_7")] == [0, 0, 0]
    assert all(counts[pid] == 2 for pid in clients if pid not in actives.values())
    accepted = {
        "PID_1": [ids(9, 5), ids(6, 8)],
        "PID_4": [ids(2, 9), ids(3, 8)],
        "PID_7": [ids(5, 3), ids(2, 6)],
    }
    for task, pids in placed.items():
        assert pids in accepted[actives[task]]
        assert differ_everywhere(clients, [actives[task], *pids], ZONE_CLUSTER)


def test_actives_located_on_same_cluster_get_standbys_on_other_zones_and_clusters() -> None:
    clients = grid_clients()
    actives = on("PID_1", "0_0", "1_0") | on("PID_2", "0_1", "1_1") | on("PID_3", "0_2", "1_2")
    placed = place(clients, actives, 2, ZONE_CLUSTER)
    accepted = {
        "PID_1": [ids(9, 5), ids(6, 8)],
        "PID_2": [ids(4, 9), ids(6, 7)],
        "PID_3": [ids(5, 7), ids(4, 8)],
    }
    for task, pids in placed.items():
        assert pids in accepted[actives[task]]


def test_single_rack_tag_keeps_standbys_off_the_actives_rack() -> None:
    clients = {
        f"PID_{n}": ClientState(f"PID_{n}", 2, tags={"rack": f"rack{(n - 1) // 3 + 1}"}) for n in range(1, 10)
    }
    actives = on("PID_1", "0_0", "1_0") | on("PID_4", "0_1", "1_1") | on("PID_7", "0_2", "1_2")
    placed = place(clients, actives, 2, ["rack"])
    counts = standby_counts(placed)
    assert all(counts[pid] == (0 if pid in actives.values() else 2) for pid in clients)
    for task, pids in placed.items():
        racks = {clients[pid].tags["rack"] for pid in pids}
        assert clients[actives[task]].tags["rack"] not in racks
        assert len(racks) == 2


def test_partial_rack_awareness_gives_up_the_exhausted_cluster_for_the_second_standby() -> None:
    clients = grid_clients(capacity=1, clusters=2)
    placed = place(clients, on("PID_1", "0_0") | on("PID_6", "1_0"), 2, ("cluster", "zone"))
    assert placed["0_0"] in [ids(5, 3), ids(5, 6)]
    assert placed["1_0"] in [ids(2, 4), ids(2, 1)]
    counts = standby_counts(placed)
    assert (counts["PID_2"], counts["PID_5"], sum(counts.values())) == (1, 1, 4)


def test_clients_at_capacity_still_get_standbys_on_other_zones() -> None:
    clients = {
        f"PID_{n}": ClientState(f"PID_{n}", 1, tags={"zone": f"zone{(n - 1) % 3 + 1}", "cluster": "cluster1"})
        for n in range(1, 7)
    }
    actives = {f"0_{n - 1}": f"PID_{n}" for n in range(1, 7)}
    placed = place(clients, actives, 1, ZONE_CLUSTER)
    assert standby_counts(placed) == Counter(dict.fromkeys(clients, 1))
    for task, (pid,) in placed.items():
        assert clients[pid].tags["zone"] != clients[actives[task]].tags["zone"]


def test_tags_outside_the_awareness_list_are_ignored() -> None:
    clients = {
        "PID_1": ClientState("PID_1", 1, tags={"cluster": "cluster1", "zone": "zone1"}),
        "PID_2": ClientState("PID_2", 2, tags={"cluster": "cluster1", "zone": "zone2"}),
        "PID_3": ClientState("PID_3", 1, tags={"cluster": "cluster2", "zone": "zone1"}),
    }
    assert place(clients, on("PID_1", "0_0"), 1, ["cluster"]) == {"0_0": ids(3)}


def test_tag_entries_are_key_value_pairs_so_equal_values_under_other_keys_do_not_clash() -> None:
    clients = {
        "PID_1": ClientState("PID_1", tags={"zone": "zone1", "cluster": "cluster1"}),
        "PID_2": ClientState("PID_2", tags={"zone": "cluster1", "cluster": "cluster3"}),
        "PID_3": ClientState("PID_3", tags={"zone": "zone1", "cluster": "cluster3"}),
    }
    assert place(clients, on("PID_1", "0_0"), 1, ZONE_CLUSTER) == {"0_0": ids(2)}


def test_clients_without_distinguishing_tags_fall_back_to_least_loaded() -> None:
    clients = {
        f"PID_{n}": ClientState(f"PID_{n}", 3, tags={"zone": "z", "cluster": "c"}) for n in range(1, 5)
    }
    actives = {f"0_{n - 1}": f"PID_{n}" for n in range(1, 5)}
    assert standby_counts(place(clients, actives, 1, ZONE_CLUSTER)) == Counter(dict.fromkeys(clients, 1))


def test_standbys_are_capped_by_the_number_of_other_clients() -> None:
    clients = {
        f"PID_{n}": ClientState(f"PID_{n}", 2, tags={"zone": "zone1", "cluster": f"cluster{n}"})
        for n in (1, 2, 3)
    }
    actives = {"0_0": "PID_1", "0_1": "PID_2", "0_2": "PID_3"}
    for requested in (2, 3):
        result = assign(
            clients, actives, config=AssignmentConfig(requested, rack_aware_assignment_tags=ZONE_CLUSTER)
        )
        assert all(len(result.replicas(task, Role.STANDBY)) == 2 for task in actives)
    lone = assign({"PID_1": clients["PID_1"]}, ["0_0"], config=AssignmentConfig(num_standby_replicas=1))
    assert lone.clients["PID_1"].standby == frozenset()
    assert not lone.probing_rebalance_needed


def test_stateless_tasks_never_get_standbys() -> None:
    clients = grid_clients()
    config = AssignmentConfig(num_standby_replicas=2, rack_aware_assignment_tags=ZONE_CLUSTER)
    result = assign(clients, ["1_0", "1_1", "1_2"], ["0_0", "0_1", "0_2"], config)
    held = {task for c in result.clients.values() for task in c.standby | c.warmup}
    assert held == {"1_0", "1_1", "1_2"}


@pytest.mark.parametrize(
    ("clusters", "zones", "accepted", "diversity"),
    [
        # Absolute preferred: 3 clusters x 3 zones.
        (3, 3, None, (3, 3)),
        # Partially preferred: 2 clusters x 3 zones; Node-5 or Node-6 first, then a third zone.
        (2, 3, [ids(5, 3), ids(5, 6), ids(6, 2), ids(6, 5)], (3, 2)),
        # Least preferred: 2 clusters x 2 zones; Node-4, then the least loaded of Node-2, Node-3.
        (2, 2, [ids(4, 2), ids(4, 3)], (2, 2)),
    ],
)
def test_kip708_worked_topologies(
    clusters: int, zones: int, accepted: list[set[str]] | None, diversity: tuple[int, int]
) -> None:
    nodes = {
        f"PID_{n}": ClientState(
            f"PID_{n}", tags={"cluster": f"K8s_Cluster{(n - 1) // zones + 1}", "zone": f"az{(n - 1) % zones}"}
        )
        for n in range(1, clusters * zones + 1)
    }
    first = place(nodes, {"0_0": "PID_1"}, 2, ZONE_CLUSTER)["0_0"]
    if accepted is not None:
        assert first in accepted
    every_node_active = {f"0_{i}": pid for i, pid in enumerate(sorted(nodes) * 2)}
    placed = place(nodes, every_node_active, 2, ZONE_CLUSTER)
    for task, pids in placed.items():
        replicas = [every_node_active[task], *pids]
        assert tuple(len({nodes[p].tags[key] for p in replicas}) for key in ZONE_CLUSTER) == diversity
