"""The rules that make the assignor at least Kafka's HighAvailabilityTaskAssignor's equal (issue 12),
over random clusters with random previous assignments, departed owners and lags.

A client is *caught up* for a task when its lag is <= ``acceptable_recovery_lag``; *holding* a task means
any role for it (active, standby or warm-up). A client's *share* of replicas (stateful actives and
standbys) or of actives is proportional to its capacity; "floor" and "ceiling" are the integer bounds of
the balance band around it (:class:`lakehouse.assignment._balance.Band`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.assignment import AssignmentConfig, AssignmentResult, ClientState, assign, validate_assignment
from lakehouse.assignment._balance import Band
from tests.assignment.test_convergence import next_round

BOUND = 10_000
LAGS = (0, 0, 0, 50_000)
Case = tuple[dict[str, ClientState], list[str], AssignmentConfig]


@st.composite
def histories(draw: st.DrawFn) -> Case:
    """Sizes and configuration drawn by hypothesis, the rest by :func:`history` from a drawn seed."""
    config = AssignmentConfig(
        num_standby_replicas=draw(st.integers(0, 2)),
        acceptable_recovery_lag=BOUND,
        max_warmup_replicas=draw(st.integers(1, 3)),
        rack_aware_assignment_tags=draw(st.sampled_from([(), ("zone",), ("zone", "cluster")])),
    )
    return history(draw(st.integers(2, 10)), draw(st.integers(1, 40)), draw(st.integers(0, 2**32)), config)


def history(count: int, task_count: int, seed: int, config: AssignmentConfig) -> Case:
    """``count`` clients (capacity 1-4, zone and cluster tags), ``task_count`` tasks and a random previous
    generation: each task's previous active and standbys (some on clients that have left), each with lag
    0 or a lag beyond the bound, plus stray local state.

    The details come from a seeded ``random.Random``: drawing them one by one through hypothesis would
    cost far more than the assignments checked.
    """
    rng = random.Random(seed)
    tasks = [f"0_{p}" for p in range(task_count)]
    pids = [f"c{n}" for n in range(count)]
    active: dict[str, set[str]] = {pid: set() for pid in pids}
    standby: dict[str, set[str]] = {pid: set() for pid in pids}
    lags: dict[str, dict[str, int]] = {pid: {} for pid in pids}
    for task in tasks:
        owner = rng.randrange(count + 2)  # count and count + 1: the owner has left
        if owner < count:
            active[pids[owner]].add(task)
            lags[pids[owner]][task] = rng.choice(LAGS)
        for pid in rng.sample(pids, rng.randrange(min(3, count + 1))):
            if task not in active[pid]:
                standby[pid].add(task)
                lags[pid][task] = rng.choice(LAGS)
        if rng.random() < 0.3:
            lags[rng.choice(pids)].setdefault(task, rng.choice(LAGS))
    clients = {
        pid: ClientState(
            pid,
            rng.randint(1, 4),
            {"zone": f"z{rng.randrange(3)}", "cluster": f"k{rng.randrange(2)}"},
            frozenset(active[pid]),
            frozenset(standby[pid]),
            lags[pid],
        )
        for pid in pids
    }
    return clients, tasks, config


MANY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class View:
    """An assignment seen from outside: who holds what, who is caught up, replica counts and shares."""

    def __init__(self, case: Case, result: AssignmentResult) -> None:
        self.clients, self.tasks, self.config = case
        self.result = result
        self.active = result.active_owners()
        self.standbys = {t: [p for p, h in result.clients.items() if t in h.standby] for t in self.tasks}
        self.holders = {t: {p for p, h in result.clients.items() if t in h.roles()} for t in self.tasks}
        self.replicas = Counter({p: len(h.active) + len(h.standby) for p, h in result.clients.items()})
        per_task = min(self.config.num_standby_replicas, len(self.clients) - 1)
        capacity = {p: c.capacity for p, c in self.clients.items()}
        self.replica_band = Band(len(self.tasks) * (1 + per_task), capacity)
        self.active_band = Band(len(self.tasks), capacity)

    def caught_up(self, pid: str, task: str) -> bool:
        lag = self.clients[pid].lag(task)
        return lag is not None and lag <= BOUND

    def free_caught_up(self, task: str) -> list[str]:
        """Clients caught up for ``task`` that hold nothing of it."""
        return [p for p in self.clients if p not in self.holders[task] and self.caught_up(p, task)]

    def seen(self, pid: str, others: Sequence[str]) -> tuple[bool, ...]:
        """Per rack-aware key, whether ``pid``'s value repeats one of ``others``' (lexicographically
        smaller = the task gains more diversity with ``pid``)."""
        keys = self.config.rack_aware_assignment_tags
        return tuple(any(self.clients[pid].tags[k] == self.clients[o].tags[k] for o in others) for k in keys)


def check(case: Case) -> View:
    clients, tasks, config = case
    result = assign(clients, tasks, (), config)
    assert validate_assignment(clients, tasks, (), config, result) == []
    return View(case, result)


@MANY
@given(histories())
def test_no_standby_shares_the_actives_tags_while_a_more_diverse_caught_up_client_has_room(
    case: Case,
) -> None:
    view = check(case)
    for task, standbys in view.standbys.items():
        active = view.active[task]
        for pid in standbys:
            if not any(view.seen(pid, [active])):
                continue
            others = [active, *(p for p in standbys if p != pid)]
            for other in view.free_caught_up(task):
                if view.replicas[other] < view.replica_band.hi[other]:
                    assert view.seen(other, others) >= view.seen(pid, others), (task, pid, other)


@MANY
@given(histories())
def test_no_client_is_empty_while_another_holds_more_than_its_share_of_what_it_could_take(case: Case) -> None:
    view = check(case)
    empty = [p for p, held in view.result.clients.items() if not held.roles()]
    for task, standbys in view.standbys.items():
        for source in standbys:
            count = view.replicas[source]
            if count <= view.replica_band.lo[source] or count < 2:
                continue  # within its share, or giving one up would only make it the empty one
            others = [view.active[task], *(p for p in standbys if p != source)]
            for pid in empty:
                if view.caught_up(pid, task):
                    assert view.seen(pid, others) > view.seen(source, others), (task, source, pid)


def assert_throttled(view: View) -> None:
    """Issue 12's throttle: standbys that must restore while a caught-up client holds nothing of the task,
    plus warm-ups, number at most ``max_warmup_replicas``, and any of them requests a probing rebalance.
    Such a standby restores only where every caught-up client that lacks the task is full."""
    restoring = [
        (task, pid)
        for task, standbys in view.standbys.items()
        for pid in standbys
        if not view.caught_up(pid, task) and view.free_caught_up(task)
    ]
    for task, pid in restoring:
        roomy = [p for p in view.free_caught_up(task) if view.replicas[p] < view.replica_band.hi[p]]
        assert roomy == [], (task, pid, roomy)
    warmups = sum(len(held.warmup) for held in view.result.clients.values())
    assert len(restoring) + warmups <= view.config.max_warmup_replicas, (restoring, warmups)
    if restoring or warmups:
        assert view.result.probing_rebalance_needed


@MANY
@given(histories())
def test_standbys_that_must_restore_are_warmups_or_bounded_with_probing(case: Case) -> None:
    assert_throttled(check(case))


#: Rounds after which a random history must have converged (the bench's 300 instances need at most 22).
ROUND_LIMIT = 40


@MANY
@given(histories())
def test_the_throttle_holds_in_every_round_until_convergence_and_then_nothing_moves(case: Case) -> None:
    # Rounds as in tests/assignment/test_convergence.py: between them every replica a client held catches
    # up. The round after convergence, with nothing changed, moves no active.
    clients, tasks, config = case
    for _ in range(ROUND_LIMIT):
        view = check((clients, tasks, config))
        assert_throttled(view)
        clients = next_round(clients, view.result)
        if not view.result.probing_rebalance_needed:
            break
    else:
        raise AssertionError(f"no convergence in {ROUND_LIMIT} rounds")
    again = assign(clients, tasks, (), config)
    assert again.active_owners() == view.active


@MANY
@given(histories())
def test_an_active_stays_off_a_caught_up_idle_client_only_when_balance_allows(case: Case) -> None:
    view = check(case)
    actives = Counter(view.active.values())
    floor = view.active_band.lo
    idle = [p for p in view.clients if actives[p] < floor[p]]
    for task, owner in view.active.items():
        if actives[owner] > floor[owner]:
            assert not [p for p in idle if view.caught_up(p, task)], (task, owner)


def test_the_strategy_reaches_every_rule() -> None:
    """The random histories do produce restoring standbys, idle clients and probing (guards the tests
    above against vacuity)."""
    seen: Counter[str] = Counter()

    @settings(max_examples=200, deadline=None, database=None)
    @given(histories())
    def tally(case: Case) -> None:
        view = check(case)
        seen["probing"] += view.result.probing_rebalance_needed
        seen["warmups"] += any(held.warmup for held in view.result.clients.values())
        seen["tags"] += bool(view.config.rack_aware_assignment_tags) and bool(
            view.config.num_standby_replicas
        )
        seen["lagging owner"] += any(
            not view.caught_up(p, t) for p, c in view.clients.items() for t in c.prev_active
        )

    tally()
    assert all(seen[key] > 0 for key in ("probing", "warmups", "tags", "lagging owner")), seen
