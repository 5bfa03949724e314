"""Assignor benchmark (issue 12): the assignor, the same assignor before issue 12's fixes, and a Kafka-style
round-robin-then-move baseline, side by side on the same inputs. Pure Python, no Spark.

Inputs: issue 12's reproductions A-D and KIP-708's least-preferred example; random clusters with a random
previous generation (the property tests' :func:`tests.assignment.test_kafka_rules.history`, seeded);
iterated rebalances (the simulator's scenarios); and 10 000 tasks x 500 clients x 2 standbys x 3 tag keys.
Measures: stateful skew (actives per thread, max - min) and total skew (actives + standbys per thread),
active moves, standbys restoring (on a client not caught up for the task), warm-ups, tag diversity (tasks
whose replicas use as many values of every tag key as they can; standbys sharing no tag value with their
active), rebalance rounds to converge (no probing rebalance requested) and assignment time (CPU and wall).

Run from the repository root (about 2 minutes)::

    flock /tmp/lakehouse-bench.lock .venv/bin/python bench/bench_assignment.py

It writes ``bench/RESULTS_assignment.md``; ``python bench/collect_results.py`` then rebuilds ``RESULTS.md``.
The "before" column runs this file in a subprocess on the ``lakehouse`` package of :data:`BEFORE` (the
parent of issue 12's first fix), extracted with ``git archive``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

# Appended: a ``lakehouse`` on PYTHONPATH (the "before" run) keeps precedence over this checkout's.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from lakehouse.assignment import (
    AssignmentConfig,
    AssignmentResult,
    ClientAssignment,
    ClientState,
    assign,
)
from lakehouse.assignment.simulator import simulate, standard_scenarios
from tests.assignment.test_convergence import next_round
from tests.assignment.test_kafka_parity import holder
from tests.assignment.test_kafka_rules import history

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("zone", "cluster", "rack")
RESULTS = Path(__file__).with_name("RESULTS_assignment.md")
#: The parent of f8f3493 (issue 12's first assignor fix): the assignor as it was when the issue was filed.
BEFORE = "7fa8619"
BOUND = 10_000
ROUND_LIMIT = 30
SCALE_ROUND_LIMIT = 4
Assignor = Callable[
    [Mapping[str, ClientState], Sequence[str], Sequence[str], AssignmentConfig], AssignmentResult
]
Case = tuple[dict[str, ClientState], list[str], AssignmentConfig]


def round_robin_then_move(
    clients: Mapping[str, ClientState],
    stateful: Sequence[str],
    stateless: Sequence[str],
    config: AssignmentConfig,
) -> AssignmentResult:
    """Kafka's HighAvailabilityTaskAssignor shape: round-robin actives ignoring history, least-loaded
    rack-aware standbys, then move tasks back to caught-up clients with warm-ups."""
    from lakehouse.assignment._context import build_context
    from lakehouse.assignment.assignor import assign_stateless, standbys_per_task
    from lakehouse.assignment.movements import realize, task_moves
    from lakehouse.assignment.standby import place_standby_targets

    ctx = build_context(clients, stateful, stateless, config)
    targets = {task: ctx.pids[i % len(ctx.pids)] for i, task in enumerate(ctx.stateful)}
    placement = realize(ctx, targets, place_standby_targets(ctx, targets, standbys_per_task(ctx)))
    free = assign_stateless(ctx, placement.active)
    held: dict[str, dict[str, set[str]]] = {
        p: {"active": set(), "standby": set(), "warmup": set()} for p in ctx.pids
    }
    for task, pid in (*placement.active.items(), *free.items()):
        held[pid]["active"].add(task)
    for role, by_task in (("standby", placement.standby), ("warmup", placement.warmup)):
        for task, pids in by_task.items():
            for pid in pids:
                held[pid][role].add(task)
    needed = placement.deferred > 0
    return AssignmentResult(
        {
            p: ClientAssignment(*(frozenset(held[p][r]) for r in ("active", "standby", "warmup")))
            for p in ctx.pids
        },
        needed,
        config.probing_rebalance_interval if needed else None,
        task_moves(ctx, clients, {**placement.active, **free}, placement.standby),
    )


# --- measures -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measures:
    """One assignment seen from outside."""

    skew: float
    total_skew: float
    active_moves: int
    moves: int
    restoring: int
    restoring_free: int
    warmups: int
    diverse: int
    apart: int
    probing: bool


def measure(
    clients: Mapping[str, ClientState],
    tasks: Sequence[str],
    config: AssignmentConfig,
    result: AssignmentResult,
) -> Measures:
    """Skews over the clients, moves, standbys on clients not caught up (and of them those whose task has a
    caught-up client holding nothing of it: what issue 12 bounds by max_warmup_replicas), warm-ups and tag
    diversity."""
    cap = {pid: clients[pid].capacity for pid in result.clients}
    actives = [len(held.active) / cap[pid] for pid, held in result.clients.items()]
    totals = [(len(h.active) + len(h.standby)) / cap[pid] for pid, h in result.clients.items()]
    free = _free_caught_up(clients, config, result)
    replicas: dict[str, list[str]] = {}
    restoring = restoring_free = 0
    for pid, held in result.clients.items():
        for task in held.standby:
            replicas.setdefault(task, []).append(pid)
            lag = clients[pid].lag(task)
            if lag is None or lag > config.acceptable_recovery_lag:
                restoring += 1
                restoring_free += task in free
    for task, pid in result.active_owners().items():
        if task in replicas:
            replicas[task].append(pid)
    diverse, apart = _diversity(clients, config.rack_aware_assignment_tags, replicas)
    return Measures(
        skew=max(actives) - min(actives),
        total_skew=max(totals) - min(totals),
        active_moves=sum(move.role == "active" for move in result.moves),
        moves=len(result.moves),
        restoring=restoring,
        restoring_free=restoring_free,
        warmups=sum(len(held.warmup) for held in result.clients.values()),
        diverse=diverse,
        apart=apart,
        probing=result.probing_rebalance_needed,
    )


def _free_caught_up(
    clients: Mapping[str, ClientState], config: AssignmentConfig, result: AssignmentResult
) -> set[str]:
    """Tasks with a caught-up client that holds nothing of them."""
    free: set[str] = set()
    for pid, client in clients.items():
        held = result.clients[pid]
        for task in client.task_lags.keys() | client.prev_active:
            lag = client.lag(task)
            if lag is not None and lag <= config.acceptable_recovery_lag and task not in held.roles():
                free.add(task)
    return free


def _diversity(
    clients: Mapping[str, ClientState], keys: Sequence[str], replicas: Mapping[str, list[str]]
) -> tuple[int, int]:
    """Tasks whose replicas (standbys, then the active) use as many values of every tag key as they can
    (one each, or every value the cluster has), and standbys sharing no tag value with their active."""
    if not keys:
        return 0, 0
    values = [len({c.tags[key] for c in clients.values()}) for key in keys]
    diverse = apart = 0
    for pids in replicas.values():
        tags = [tuple(clients[p].tags[key] for key in keys) for p in pids]
        diverse += all(
            len(set(column)) == min(len(pids), n)
            for column, n in zip(zip(*tags, strict=True), values, strict=True)
        )
        apart += sum(all(map(str.__ne__, standby, tags[-1])) for standby in tags[:-1])
    return diverse, apart


@dataclass(frozen=True)
class Run:
    """A rebalance iterated until it settles: the first assignment; the settled one; the rounds until no
    probing rebalance is requested (``rounds``) and until, in addition, no standby is placed on a client
    that must restore it (``settled``; None: not within the limit); the active moves of all those rounds;
    the standbys restoring while a caught-up client lacks the task, over all those rounds; the rounds
    that break issue 12's throttle (such standbys plus warm-ups above ``max_warmup_replicas``, or such a
    standby without a probing rebalance); and one more round with nothing changed."""

    first: Measures
    final: Measures
    rounds: int | None
    settled: int | None
    all_active_moves: int
    all_restoring_free: int
    throttle_broken: int
    stable: Measures


def converge(assignor: Assignor, case: Case, limit: int = ROUND_LIMIT) -> Run:
    clients, tasks, config = case
    states, runs, rounds = clients, [], None
    while True:
        result = assignor(states, tasks, (), config)
        runs.append(measure(states, tasks, config, result))
        if rounds is None and not runs[-1].probing:
            rounds = len(runs)
        if (rounds is not None and runs[-1].restoring == 0) or len(runs) == limit:
            break
        states = next_round(states, result)
    settled = len(runs) if not runs[-1].probing and runs[-1].restoring == 0 else None
    states = next_round(states, result)
    stable = measure(states, tasks, config, assignor(states, tasks, (), config))
    budget = config.max_warmup_replicas
    broken = sum(
        run.restoring_free + run.warmups > budget or (run.restoring_free > 0 and not run.probing)
        for run in runs
    )
    return Run(
        runs[0],
        runs[-1],
        rounds,
        settled,
        sum(run.active_moves for run in runs),
        sum(run.restoring_free for run in runs),
        broken,
        stable,
    )


# --- inputs ---------------------------------------------------------------------------------------------


def reproductions() -> dict[str, Case]:
    """Issue 12's reproductions A-D and KIP-708's least-preferred example (as in tests/assignment)."""
    zone = ("zone",)
    a = {
        "a": ClientState("a", tags={"zone": "z0"}, prev_active=frozenset({"0_0"})),
        "b": ClientState("b", tags={"zone": "z0"}, task_lags={"0_0": 0}),
        "c": ClientState("c", tags={"zone": "z2"}, task_lags={"0_0": 0}),
        "d": ClientState(
            "d", tags={"zone": "z1"}, prev_standby=frozenset({"0_0"}), task_lags={"0_0": 50_000}
        ),
    }
    b = {
        "a": holder("a", 1, ["0_0"], ["0_1"]),
        "b": holder("b", 1, ["0_1"], ["0_0"]),
        "c": ClientState("c", task_lags={"0_0": 0, "0_1": 0}),
    }
    c = {
        "a": holder("a", 1, ["0_0"], ["0_1", "0_2"]),
        "b": holder("b", 4, [], ["0_1", "0_2"]),
        "c": holder("c", 4, [], ["0_0"]),
        "d": holder("d", 2, ["0_1", "0_2"], ["0_0"]),
    }
    d = {
        "c0": holder("c0", 1, ["0_0", "0_3"], ["0_2", "0_5"]),
        "c1": holder("c1", 1, ["0_1", "0_4"], ["0_0", "0_3"]),
    }
    layout = {"Node-1": ("1", "a"), "Node-2": ("1", "b"), "Node-3": ("2", "a"), "Node-4": ("2", "b")}
    kip = {
        p: ClientState(p, tags={"cluster": f"K8s_Cluster{c}", "zone": f"eu-central-1{z}"})
        for p, (c, z) in layout.items()
    }
    return {
        "A: standby in the active's zone": (
            a,
            ["0_0"],
            AssignmentConfig(1, BOUND, 2, rack_aware_assignment_tags=zone),
        ),
        "B: caught-up client left empty": (b, ["0_0", "0_1"], AssignmentConfig(1, BOUND)),
        "C: standby restores not throttled": (c, ["0_0", "0_1", "0_2"], AssignmentConfig(2, BOUND, 2)),
        "D: actives pile up (c2 left)": (d, [f"0_{p}" for p in range(6)], AssignmentConfig(1, BOUND)),
        "KIP-708 least preferred": (
            kip,
            [f"0_{p}" for p in range(18)],
            AssignmentConfig(2, rack_aware_assignment_tags=("zone", "cluster")),
        ),
    }


def random_cases(count: int, seed: int = 12) -> Iterator[Case]:
    """``count`` random clusters with a random previous generation: 2-12 clients (capacity 1-4, zone and
    cluster tags), 1-60 tasks, previous actives and standbys (some on departed clients) with lag 0 or
    50 000, 0-2 standbys, 1-3 warm-ups, tags none / zone / zone+cluster."""
    rng = random.Random(seed)
    for _ in range(count):
        config = AssignmentConfig(
            num_standby_replicas=rng.randint(0, 2),
            acceptable_recovery_lag=BOUND,
            max_warmup_replicas=rng.randint(1, 3),
            rack_aware_assignment_tags=rng.choice([(), ("zone",), ("zone", "cluster")]),
        )
        yield history(rng.randint(2, 12), rng.randint(1, 60), rng.getrandbits(32), config)


def big_cluster() -> Case:
    rng = random.Random(7)
    clients = {}
    for i in range(500):
        pid = f"c{i:03d}"
        tags = {"zone": f"z{i % 3}", "cluster": f"k{(i // 3) % 5}", "rack": f"r{(i // 15) % 10}"}
        clients[pid] = ClientState(pid, capacity=rng.choice([1, 2, 4]), tags=tags)
    tasks = [f"{s}_{p}" for s in range(10) for p in range(1000)]
    return clients, tasks, AssignmentConfig(num_standby_replicas=2, rack_aware_assignment_tags=KEYS)


def capacity_blind_history(case: Case) -> Case:
    """The big cluster after a capacity-blind previous generation (every replica caught up): task i active
    on client i mod 500, standbys on clients i + 167 and i + 333 mod 500 (they share the active's zone)."""
    clients, tasks, config = case
    pids = sorted(clients)
    roles: dict[str, tuple[set[str], set[str]]] = {pid: (set(), set()) for pid in pids}
    for i, task in enumerate(tasks):
        roles[pids[i % len(pids)]][0].add(task)
        for offset in (167, 333):
            roles[pids[(i + offset) % len(pids)]][1].add(task)
    states = {
        pid: replace(
            c,
            prev_active=frozenset(roles[pid][0]),
            prev_standby=frozenset(roles[pid][1]),
            task_lags=dict.fromkeys(roles[pid][0] | roles[pid][1], 0),
        )
        for pid, c in clients.items()
    }
    return states, tasks, config


# --- runs -----------------------------------------------------------------------------------------------


def timed(assignor: Assignor, case: Case, repeat: int) -> tuple[float, float, AssignmentResult]:
    """Best of ``repeat`` CPU and wall times (CPU time is the fair figure on a loaded machine)."""
    clients, tasks, config = case
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = assignor(clients, tasks, (), config)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    assert result is not None
    return cpu, wall, result


def at_scale(assignor: Assignor) -> dict[str, dict[str, object]]:
    """Fresh cluster, the same again (nothing changed), one client leaves, capacity-blind history."""
    big = big_cluster()
    clients, tasks, config = big
    rows: dict[str, dict[str, object]] = {}
    cpu, wall, fresh = timed(assignor, big, 3)
    rows["fresh cluster"] = {"cpu": cpu, "wall": wall, **asdict(measure(clients, tasks, config, fresh))}
    again = next_round(clients, fresh)
    cpu, wall, stable = timed(assignor, (again, tasks, config), 3)
    rows["nothing changed"] = {"cpu": cpu, "wall": wall, **asdict(measure(again, tasks, config, stable))}
    left = ({pid: c for pid, c in next_round(again, stable).items() if pid != "c000"}, tasks, config)
    cpu, wall, result = timed(assignor, left, 3)
    rounds = converge(assignor, left, SCALE_ROUND_LIMIT).rounds
    rows["c000 leaves"] = {
        "cpu": cpu,
        "wall": wall,
        **asdict(measure(left[0], tasks, config, result)),
        "rounds": f">{SCALE_ROUND_LIMIT}" if rounds is None else rounds,
    }
    blind = capacity_blind_history(big)
    cpu, wall, result = timed(assignor, blind, 1)
    rows["capacity-blind history"] = {
        "cpu": cpu,
        "wall": wall,
        **asdict(measure(blind[0], tasks, config, result)),
        "rounds": "not run",
    }
    return rows


def simulated(assignor: Assignor) -> dict[str, dict[str, object]]:
    """The simulator's scenarios (24 tasks, 1 standby, zone tags, restore 50 000 of 100 000 offsets per
    generation), and the scale-out again with 2 standbys (what issue 12's throttle costs): sums over every
    step after the initial assignment, and the final skew."""
    config = AssignmentConfig(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    runs = [(scenario.name, scenario, config) for scenario in standard_scenarios()]
    scale_out = next(scenario for name, scenario, _ in runs if name.startswith("scale out"))
    runs.append((f"{scale_out.name}, 2 standbys", scale_out, replace(config, num_standby_replicas=2)))
    rows = {}
    for name, scenario, run_config in runs:
        steps = simulate(scenario, run_config, assignor=assignor)[1:]
        generations = [g for step in steps for g in step.generations]
        rounds = [step.converged_after for step in steps]
        rows[name] = {
            "moves": sum(g.moves for g in generations),
            "active_moves": sum(g.active_moves for g in generations),
            "warmups": sum(g.warmups for g in generations),
            "rounds": None if None in rounds else sum(rounds),
            "final_skew": generations[-1].skew,
            "violations": sum(g.violations for g in generations),
        }
    return rows


def collect(assignor: Assignor, instances: int) -> dict[str, object]:
    """Every measure for one assignor, as plain data (the "before" run sends it back as JSON)."""
    return {
        "reproductions": {name: asdict(converge(assignor, case)) for name, case in reproductions().items()},
        "random": [asdict(converge(assignor, case)) for case in random_cases(instances)],
        "simulated": simulated(assignor),
        "scale": at_scale(assignor),
    }


def collect_before(rev: str, instances: int) -> dict[str, object]:
    """:func:`collect` for the assignor at ``rev``, in a subprocess on that revision's ``lakehouse``."""
    with tempfile.TemporaryDirectory(prefix="bench_assignment_") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "lakehouse"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((tmp, str(ROOT)))}
        out = subprocess.run(
            [sys.executable, __file__, "--emit-json", "--instances", str(instances)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp,
        ).stdout
    return json.loads(out)


# --- the tag rule of issue 12, checked from outside -----------------------------------------------------


def replaceable_standbys(case: Case, result: AssignmentResult) -> dict[str, int]:
    """Standbys that a client holding nothing of the task would replace with more tag diversity (KIP-708
    precedence: fewer repeated values of the higher keys first), by what that client is: any, caught up,
    caught up with room under its ceiling share of replicas, and the last when the standby also shares a
    tag value with the active (issue 12's rule: only that is a violation)."""
    from lakehouse.assignment._balance import Band

    clients, tasks, config = case
    keys = config.rack_aware_assignment_tags
    found = dict.fromkeys(("any", "caught_up", "room", "violation"), 0)
    if not keys:
        return found
    tags = {pid: tuple(c.tags[key] for key in keys) for pid, c in clients.items()}
    per_task = min(config.num_standby_replicas, len(clients) - 1)
    ceiling = Band(len(tasks) * (1 + per_task), {p: c.capacity for p, c in clients.items()}).hi
    load = {pid: len(held.active) + len(held.standby) for pid, held in result.clients.items()}
    active = result.active_owners()
    standbys: dict[str, list[str]] = {}
    for pid, held in result.clients.items():
        for task in held.standby:
            standbys.setdefault(task, []).append(pid)
    for task, pids in standbys.items():
        holders = {p for p, h in result.clients.items() if task in h.active | h.standby | h.warmup}
        for pid in pids:
            used = [tags[p] for p in (active[task], *pids) if p != pid]
            mine = _repeats(tags[pid], used)
            better = [q for q in clients if q not in holders and _repeats(tags[q], used) < mine]
            caught_up = [q for q in better if _caught_up(clients[q], task)]
            room = [q for q in caught_up if load[q] < ceiling[q]]
            shares = any(map(str.__eq__, tags[pid], tags[active[task]]))
            for key, hit in zip(found, (better, caught_up, room, room and shares), strict=True):
                found[key] += bool(hit)
    return found


def _caught_up(client: ClientState, task: str) -> bool:
    lag = client.lag(task)
    return lag is not None and lag <= BOUND


def _repeats(values: tuple[str, ...], used: list[tuple[str, ...]]) -> tuple[bool, ...]:
    return tuple(any(value == other[i] for other in used) for i, value in enumerate(values))


def tag_rule(instances: int) -> dict[str, dict[str, int]]:
    """:func:`replaceable_standbys` summed over the random instances, on the first assignment and on the
    converged one: standbys, and instances with at least one."""
    totals = {
        when: {
            f"{kind} {key}": 0
            for kind in ("standbys", "instances")
            for key in ("any", "caught_up", "room", "violation")
        }
        for when in ("first", "converged")
    }
    for case in random_cases(instances):
        clients, tasks, config = case
        result, rounds = assign(clients, tasks, (), config), 1
        for when in ("first", "converged"):
            if when == "converged":
                while result.probing_rebalance_needed and rounds < ROUND_LIMIT:
                    clients = next_round(clients, result)
                    result, rounds = assign(clients, tasks, (), config), rounds + 1
            for key, count in replaceable_standbys((clients, tasks, config), result).items():
                totals[when][f"standbys {key}"] += count
                totals[when][f"instances {key}"] += count > 0
    return totals


# --- report ---------------------------------------------------------------------------------------------

CONTENDERS = ("ours", "before", "baseline")
COLUMNS = (
    ("skew", "skew"),
    ("total skew", "total_skew"),
    ("active moves", "active_moves"),
    ("moves", "moves"),
    ("standbys restoring", "restoring"),
    ("... while a caught-up client lacks the task", "restoring_free"),
    ("warm-ups", "warmups"),
    ("full tag diversity", "diverse"),
    ("standbys apart from the active", "apart"),
    ("probing", "probing"),
)


def _fmt(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return f">{ROUND_LIMIT}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:,}".replace(",", " ")


def _cells(rows: Mapping[str, Mapping[str, object]], key: str) -> str:
    return " / ".join(_fmt(rows[c][key]) for c in CONTENDERS)


def _table(
    title: str, rows: Mapping[str, Mapping[str, Mapping[str, object]]], columns: Sequence[tuple[str, str]]
) -> list[str]:
    """One row per scenario, one column per measure, each cell ``ours / before / baseline``."""
    lines = [
        f"| {title} | " + " | ".join(name for name, _ in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for name, by_contender in rows.items():
        lines.append(f"| {name} | " + " | ".join(_cells(by_contender, key) for _, key in columns) + " |")
    return lines


def _pivot(data: Mapping[str, dict], section: str, extra: Callable[[dict], dict] = lambda row: row) -> dict:
    names = data["ours"][section]
    return {name: {c: extra(data[c][section][name]) for c in CONTENDERS} for name in names}


def _random_rows(data: Mapping[str, dict]) -> list[str]:
    """Totals over the random instances, and per instance how often ours is worse / better."""
    runs = {c: data[c]["random"] for c in CONTENDERS}
    measures = [
        ("active moves (first round)", "first", "active_moves"),
        ("standbys restoring (first round)", "first", "restoring"),
        ("warm-ups (first round)", "first", "warmups"),
        ("probing requested (first round)", "first", "probing"),
        ("skew when settled", "final", "skew"),
        ("total skew when settled", "final", "total_skew"),
        ("full tag diversity when settled (more is better)", "final", "diverse"),
        ("standbys apart from the active when settled (more is better)", "final", "apart"),
        ("rounds to converge (no probing requested)", None, "rounds"),
        ("rounds to settle (no probing, no standby restoring)", None, "settled"),
        ("active moves over all rounds until settled", None, "all_active_moves"),
        ("standbys restoring while a caught-up client lacks them, all rounds", None, "all_restoring_free"),
        ("rounds breaking issue 12's throttle (see below)", None, "throttle_broken"),
        ("active moves with nothing changed", "stable", "active_moves"),
    ]
    lines = [
        "| measure (sum over instances) | ours | before | baseline | ours worse / better than baseline "
        "| ours worse / better than before |",
        "|---|---|---|---|---|---|",
    ]
    for label, part, key in measures:
        values = {c: [_value(run, part, key) for run in runs[c]] for c in CONTENDERS}
        sign = -1 if key in ("diverse", "apart") else 1
        compare = [
            f"{sum(sign * (o - t) > 1e-9 for o, t in zip(values['ours'], values[c], strict=True))} / "
            f"{sum(sign * (t - o) > 1e-9 for o, t in zip(values['ours'], values[c], strict=True))}"
            for c in ("baseline", "before")
        ]
        totals = " | ".join(_fmt(round(sum(values[c]), 2)) for c in CONTENDERS)
        lines.append(f"| {label} | {totals} | {compare[0]} | {compare[1]} |")
    return lines


def _value(run: Mapping[str, object], part: str | None, key: str) -> float:
    if part is None:
        value = run[key]
        return ROUND_LIMIT + 1 if value is None else float(value)
    return float(run[part][key])


def render(
    data: Mapping[str, dict], rule: Mapping[str, Mapping[str, int]], header: Sequence[str]
) -> list[str]:
    scale = _pivot(
        data,
        "scale",
        lambda row: {
            **row,
            "time": f"{row['cpu']:.2f} ({row['wall']:.2f})",
            "rounds": row.get("rounds", "-"),
        },
    )
    repro = _pivot(
        data,
        "reproductions",
        lambda run: {**run["first"], "rounds": run["rounds"], "settled": run["settled"]},
    )
    sim = _pivot(data, "simulated")
    rounds_col = [("rounds to converge", "rounds")]
    lines = [
        *header,
        "",
        "### 10 000 tasks x 500 clients x 2 standbys",
        "",
        "500 clients (capacity 1/2/4), tags zone (3) x cluster (5) x rack (10). Time: best of 3 (1 for",
        "the capacity-blind history), CPU s (wall s). Full tag diversity counts tasks whose 3 replicas",
        "differ in zone, cluster and rack. Rounds to converge are capped at "
        f"{SCALE_ROUND_LIMIT} here (a round takes seconds) and not run after the capacity-blind history",
        "(task i's active on client i mod 500, its standbys on i + 167 and i + 333, all caught up): with",
        "2 warm-ups a round, thousands of deferred replicas would take thousands of rounds.",
        "",
        *_table("scenario", scale, [("time CPU (wall)", "time"), *COLUMNS, *rounds_col]),
        "",
        "### Issue 12's reproductions (first assignment; rounds as for the random instances below)",
        "",
        *_table("scenario", repro, [*COLUMNS, *rounds_col, ("rounds to settle", "settled")]),
        "",
        f"### {len(data['ours']['random'])} random instances with a random previous generation",
        "",
        *_random_rows(data),
        "",
        "### Iterated rebalances (the simulator's scenarios)",
        "",
        "24 tasks, zone tags, 1 standby (the last row 2); a replica restores 50 000 of 100 000 offsets per",
        "generation. Sums over every step after the initial assignment; rounds = generations until no",
        "probing, summed over the steps.",
        "",
        *_table(
            "scenario",
            sim,
            [
                ("moves", "moves"),
                ("active moves", "active_moves"),
                ("warm-ups", "warmups"),
                *rounds_col,
                ("final skew", "final_skew"),
                ("contract violations", "violations"),
            ],
        ),
        "",
        *_rule_section(rule, len(data["ours"]["random"])),
        "",
        *_checks(data),
    ]
    return lines


def _checks(data: Mapping[str, dict]) -> list[str]:
    """Issue 12's stickiness, speed and throttle criteria, from the figures above."""
    scale = data["ours"]["scale"]
    slowest = max(scale, key=lambda name: scale[name]["cpu"])
    random_stable = sum(run["stable"]["active_moves"] for run in data["ours"]["random"])
    broken = [run["throttle_broken"] for run in data["before"]["random"]]
    ours_broken = sum(run["throttle_broken"] for run in data["ours"]["random"])
    blind = scale["capacity-blind history"]["restoring_free"]
    kafka = KAFKA_CAPACITY_BLIND_RESTORING
    return [
        "### Issue 12's criteria",
        "",
        f"- 10 000 x 500 x 2 under 2 s: slowest case {slowest!r} at {scale[slowest]['cpu']:.2f} s CPU "
        f"({scale[slowest]['wall']:.2f} s wall): {'met' if scale[slowest]['cpu'] < 2 else 'missed'}.",
        f"- 0 active moves when nothing forces one: {scale['nothing changed']['active_moves']} at scale, "
        f"{random_stable} over the random instances' extra round: "
        f"{'met' if scale['nothing changed']['active_moves'] == 0 == random_stable else 'missed'}.",
        f"- Issue 12's throttle (standbys restoring while a caught-up client lacks the task, plus warm-ups, "
        f"at most max_warmup_replicas a round; such a standby only with a probing rebalance): broken in "
        f"{ours_broken} rounds by ours, {sum(broken)} by the assignor before issue 12 (in "
        f"{sum(b > 0 for b in broken)} of {len(broken)} instances): "
        f"{'met' if not ours_broken else 'missed'}. At scale after the capacity-blind history {blind} such "
        f"standbys, against {kafka} for Kafka's HighAvailabilityTaskAssignor (issue 12's side-by-side run, "
        f"not re-run here): {'met' if blind <= kafka else 'missed'}.",
        *_round_checks(data, broken),
    ]


#: Standbys restoring while a caught-up client lacks the task after the capacity-blind history, for Kafka
#: Streams 4.3.1's HighAvailabilityTaskAssignor, as issue 12 reports its side-by-side run.
KAFKA_CAPACITY_BLIND_RESTORING = 27


def _round_checks(data: Mapping[str, dict], broken: Sequence[int]) -> list[str]:
    """Rounds to converge and to settle against the assignor before issue 12: over all random instances,
    and over those where it respects issue 12's throttle in every round (elsewhere it converged sooner
    by restoring more than the throttle allows, which ours declines to do)."""
    lines = []
    respecting = [i for i, count in enumerate(broken) if count == 0]
    for label, key in (("Rounds to converge", "rounds"), ("Rounds to settle", "settled")):
        ours, before = ([_value(run, None, key) for run in data[c]["random"]] for c in ("ours", "before"))
        more = [i for i, (o, b) in enumerate(zip(ours, before, strict=True)) if o > b]
        kept = [i for i in more if i in respecting]
        lines.append(
            f"- {label} no more than before issue 12: more in {len(more)} of {len(ours)} random instances "
            f"(sum {sum(ours):.0f} vs {sum(before):.0f}): {'met' if not more else 'missed'}; in "
            f"{len(more) - len(kept)} of those {len(more)} the assignor before issue 12 breaks the throttle "
            f"in some round. Among the {len(respecting)} instances where it respects the throttle in every "
            f"round: sum {sum(ours[i] for i in respecting):.0f} vs {sum(before[i] for i in respecting):.0f}, "
            f"more in {len(kept)}{' (' + ', '.join(map(str, kept)) + ')' if kept else ''}: "
            f"{'met' if not kept else 'missed'}."
        )
    lines.append(
        "- Decision: issue 12's throttle is preferred to its 'no more rounds than today'. Balancing K "
        "standbys off caught-up clients onto clients that must restore them takes ceil(K / "
        "max_warmup_replicas) rounds before the converged one, where the assignor before issue 12 restored "
        "them all at once (tests/assignment/test_convergence.py: 3 rounds instead of 1; the simulator's "
        "scale-out with 2 standbys above). lakehouse/assignment/movements.py states the rule."
    )
    return lines


def _rule_section(rule: Mapping[str, Mapping[str, int]], instances: int) -> list[str]:
    lines = [
        "### Issue 12's tag rule on the random instances (ours)",
        "",
        "A standby is *replaceable* when a client holding nothing of the task would repeat fewer of the",
        "other replicas' tag values (KIP-708 precedence). The rule is broken only when that client is",
        "caught up, has room under its ceiling share of replicas, and the standby shares a tag value with",
        "the active.",
        "",
        "| when | replaceable by any free client | ... by a caught-up one | ... caught up with room "
        "| ... and the standby shares the active's tags (violation) |",
        "|---|---|---|---|---|",
    ]
    for when, counts in rule.items():
        cells = " | ".join(
            f"{counts['standbys ' + k]} standbys in {counts['instances ' + k]} instances"
            for k in ("any", "caught_up", "room", "violation")
        )
        lines.append(f"| {when} assignment | {cells} |")
    first = rule["first"]
    return [
        *lines,
        "",
        f"On the first assignment {first['instances any']} of {instances} instances keep a standby "
        "that a free client with more distinct tag values could replace, but that client is caught up in "
        f"only {first['instances caught_up']} of them and has room in {first['instances room']}: elsewhere "
        "it would have to restore the standby (Kafka's lag-blind standby placement would move it there and "
        f"restore). Violations of the rule: {first['standbys violation']} on the first assignment, "
        f"{rule['converged']['standbys violation']} when converged.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--before", default=BEFORE, help="git revision of the 'before' assignor")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit_json:
        print(json.dumps(collect(assign, args.instances)))
        return
    started, load_start = datetime.now(UTC), os.getloadavg()[0]
    data = {
        "ours": collect(assign, args.instances),
        "baseline": collect(round_robin_then_move, args.instances),
    }
    data["before"] = collect_before(args.before, args.instances)
    rule = tag_rule(args.instances)
    header = [
        "## Task assignment (issues 6 and 12)",
        "",
        f"Command: `{' '.join(['flock /tmp/lakehouse-bench.lock .venv/bin/python', *sys.argv])}`; started "
        f"{started:%Y-%m-%d %H:%M} UTC; 1-minute load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; pure Python {sys.version.split()[0]}, one process.",
        "",
        "Each cell is **ours / before / baseline**: the assignor; the same assignor before issue 12's",
        f"fixes (`{args.before}`, run from `git archive` in a subprocess); and a Kafka-style round-robin-",
        "then-move baseline (round-robin actives ignoring history, then the same rack-aware standbys and",
        "warm-up moves).",
        "Skew: max - min stateful actives per thread; total skew: the same for actives + standbys.",
        "Standbys restoring: standbys on a client not caught up for the task (lag > 10 000, the",
        "acceptable_recovery_lag). Rounds: assignments until none requests a probing rebalance, every",
        "replica a client held catching up between rounds; then one more round with nothing changed (its",
        "active moves are the stickiness check).",
    ]
    lines = render(data, rule, header)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
