"""Invariants over random clusters (hypothesis): 1-50 clients, 1-500 tasks, tags, capacities, lags."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.assignment import (
    AssignmentConfig,
    AssignmentResult,
    ClientState,
    assign,
    tag_diversity,
    validate_assignment,
)
from lakehouse.assignment.simulator import stateful_skew

KEYS = ("zone", "cluster")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, ClientState], list[str], list[str], AssignmentConfig]:
    count = draw(st.integers(1, 50))
    tasks = [f"{s}_{p}" for s in range(3) for p in range(draw(st.integers(0, 166)))] or ["0_0"]
    stateless = [f"9_{p}" for p in range(draw(st.integers(0, 20)))]
    with_lags = draw(st.booleans())
    clients = {}
    for n in range(count):
        pid = f"c{n:02d}"
        lags = (
            draw(st.dictionaries(st.sampled_from(tasks), st.integers(0, 30_000), max_size=8))
            if with_lags
            else {}
        )
        tags = {"zone": f"z{draw(st.integers(0, 3))}", "cluster": f"k{draw(st.integers(0, 2))}"}
        clients[pid] = ClientState(pid, draw(st.integers(1, 4)), tags, task_lags=lags)
    config = AssignmentConfig(
        num_standby_replicas=draw(st.integers(0, 3)),
        max_warmup_replicas=draw(st.integers(1, 3)),
        rack_aware_assignment_tags=draw(st.sampled_from([(), ("zone",), KEYS])),
    )
    return clients, tasks, stateless, config


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(clusters())
def test_every_assignment_satisfies_the_contract(case: tuple) -> None:
    clients, tasks, stateless, config = case
    result = assign(clients, tasks, stateless, config)
    assert validate_assignment(clients, tasks, stateless, config, result) == []
    assert assign(clients, tasks, stateless, config) == result
    if not result.probing_rebalance_needed:
        assert stateful_skew(result, clients, tasks) <= 1.0


@FAST
@given(clusters())
def test_stable_membership_and_lags_keep_every_active_and_need_no_probing(case: tuple) -> None:
    clients, tasks, stateless, config = case
    fresh = {pid: ClientState(pid, c.capacity, c.tags) for pid, c in clients.items()}
    first = assign(fresh, tasks, stateless, config)
    again = {
        pid: ClientState(
            pid,
            c.capacity,
            c.tags,
            prev_active=first.clients[pid].active,
            prev_standby=first.clients[pid].standby,
            task_lags=dict.fromkeys(first.clients[pid].active | first.clients[pid].standby, 0),
        )
        for pid, c in fresh.items()
    }
    second = assign(again, tasks, stateless, config)
    assert {pid: c.active for pid, c in second.clients.items()} == {
        pid: c.active for pid, c in first.clients.items()
    }
    assert not second.probing_rebalance_needed and not any(c.warmup for c in second.clients.values())
    assert second.clients == first.clients and second.moves == ()


@FAST
@given(clusters())
def test_a_result_fed_back_is_a_fixed_point_when_no_probing_is_pending(case: tuple) -> None:
    clients, tasks, stateless, config = case
    result = assign(clients, tasks, stateless, config)
    if result.probing_rebalance_needed:
        return
    again = assign(feed_back(clients, result), tasks, stateless, config)
    assert again.clients == result.clients
    assert not again.probing_rebalance_needed and again.moves == ()
    assert assign(feed_back(clients, again), tasks, stateless, config).clients == result.clients


@FAST
@given(clusters())
def test_rack_aware_diversity_is_at_least_a_least_loaded_baseline(case: tuple) -> None:
    clients, tasks, _, config = case
    config = AssignmentConfig(
        num_standby_replicas=max(1, config.num_standby_replicas), rack_aware_assignment_tags=KEYS
    )
    fresh = {pid: ClientState(pid, c.capacity, c.tags) for pid, c in clients.items()}
    ours = tag_diversity(assign(fresh, tasks, (), config), fresh, KEYS)
    blind = tag_diversity(
        assign(fresh, tasks, (), AssignmentConfig(config.num_standby_replicas)), fresh, KEYS
    )
    # Tag keys count in precedence order (KIP-708): more distinct zones beats more distinct clusters.
    assert _totals(ours) >= _totals(blind)
    assert sum(d[0] for d in ours.values()) >= sum(d[0] for d in blind.values())


def feed_back(clients: Mapping[str, ClientState], result: AssignmentResult) -> dict[str, ClientState]:
    """The next generation's states after every client ran what it held and caught up (lag 0)."""
    return {
        pid: ClientState(
            pid,
            c.capacity,
            c.tags,
            prev_active=result.clients[pid].active,
            prev_standby=result.clients[pid].standby | result.clients[pid].warmup,
            task_lags=dict.fromkeys(result.clients[pid].active | result.clients[pid].standby, 0),
        )
        for pid, c in clients.items()
    }


def _totals(diversity: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(sum(d[i] for d in diversity.values()) for i in range(len(KEYS)))


def test_scale_out_spreads_standbys_onto_the_new_clients() -> None:
    tasks = [f"0_{p}" for p in range(24)]
    config = AssignmentConfig(2, acceptable_recovery_lag=2**63 - 1, rack_aware_assignment_tags=("zone",))
    zones = {f"c{n}": {"zone": f"z{n % 3}"} for n in range(6)}
    first = assign({pid: ClientState(pid, 1, zones[pid]) for pid in ("c0", "c1", "c2")}, tasks, (), config)
    held = {pid: first.clients.get(pid) for pid in zones}
    grown = {
        pid: ClientState(
            pid,
            1,
            zones[pid],
            prev_active=held[pid].active if held[pid] else frozenset(),
            prev_standby=held[pid].standby if held[pid] else frozenset(),
        )
        for pid in zones
    }
    second = assign(grown, tasks, (), config)
    assert [(len(c.active), len(c.standby)) for c in second.clients.values()] == [(4, 8)] * 6
