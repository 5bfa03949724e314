"""A rebalance simulator: plays membership changes over generations and reports what the assignor did.

Each generation the members report their state (previous roles, lags), an assignor assigns, and then one
probing interval passes: actives are current (lag 0), standbys and warm-ups restore
``restore_per_generation`` offsets, and state a client no longer maintains (or holds while offline)
falls ``drift_per_generation`` further behind. A new replica starts ``state_size`` behind.

After each :class:`Step` the simulator plays generations until no probing rebalance is needed (the
assignment has converged) or ``max_generations`` pass, then ``Step.wait`` more. The initial assignment
is followed by enough generations for its standbys to restore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lakehouse.assignment.assignor import assign
from lakehouse.assignment.state import AssignmentConfig, AssignmentResult, ClientState, Role
from lakehouse.assignment.validate import validate_assignment

Assignor = Callable[
    [Mapping[str, ClientState], Sequence[str], Sequence[str], AssignmentConfig], AssignmentResult
]


@dataclass(frozen=True)
class ClientSpec:
    """A simulated client's fixed properties."""

    process_id: str
    capacity: int = 1
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """A membership change: clients that join (or return with their local state), clients that leave."""

    name: str
    join: tuple[ClientSpec, ...] = ()
    leave: tuple[str, ...] = ()
    wait: int = 0


@dataclass(frozen=True)
class Scenario:
    """Initial clients (without state) and the steps played after the initial assignment."""

    name: str
    initial: tuple[ClientSpec, ...]
    steps: tuple[Step, ...]
    stateful_tasks: tuple[str, ...]
    stateless_tasks: tuple[str, ...] = ()


@dataclass(frozen=True)
class SimulationSettings:
    """State sizes and speeds, in offsets per generation (one probing interval)."""

    state_size: int = 100_000
    restore_per_generation: int = 50_000
    drift_per_generation: int = 2_000
    max_generations: int = 50


@dataclass(frozen=True)
class GenerationReport:
    """What one generation's assignment did.

    Attributes:
        generation: 0 for the initial assignment.
        step: The step being played.
        members: Number of clients.
        moves: Active and standby roles placed on clients that did not hold them.
        active_moves: The active part of ``moves``.
        warmups: Warm-up replicas assigned.
        unavailable: Stateful tasks whose active is not caught up although a member was.
        skew: Max minus min stateful actives per thread over the members.
        probing: Whether a probing rebalance was requested.
        violations: Number of contract violations found by ``validate_assignment``.
    """

    generation: int
    step: str
    members: int
    moves: int
    active_moves: int
    warmups: int
    unavailable: int
    skew: float
    probing: bool
    violations: int


@dataclass(frozen=True)
class StepReport:
    """Generations played for one step, and how many it took until no probing rebalance was needed."""

    step: str
    generations: tuple[GenerationReport, ...]
    converged_after: int | None

    @property
    def moves(self) -> int:
        """Moves over the whole step."""
        return sum(g.moves for g in self.generations)


def simulate(
    scenario: Scenario,
    config: AssignmentConfig,
    settings: SimulationSettings | None = None,
    assignor: Assignor = assign,
) -> list[StepReport]:
    """Play ``scenario`` and report every step (the initial assignment is step ``"initial"``)."""
    world = _World(scenario, config, settings or SimulationSettings(), assignor)
    for spec in scenario.initial:
        world.join(spec)
    settle = -(-world.settings.state_size // world.settings.restore_per_generation)
    reports = [world.play("initial", settle)]
    for step in scenario.steps:
        for pid in step.leave:
            world.leave(pid)
        for spec in step.join:
            world.join(spec)
        reports.append(world.play(step.name, step.wait))
    return reports


class _World:
    """Members, their local state, and the last assignment."""

    def __init__(
        self, scenario: Scenario, config: AssignmentConfig, settings: SimulationSettings, assignor: Assignor
    ) -> None:
        self.scenario = scenario
        self.config = config
        self.settings = settings
        self.assignor = assignor
        self.members: dict[str, ClientSpec] = {}
        self.local_lag: dict[str, dict[str, int]] = {}
        self.last: AssignmentResult | None = None
        self.generation = 0

    def join(self, spec: ClientSpec) -> None:
        self.members[spec.process_id] = spec
        self.local_lag.setdefault(spec.process_id, {})

    def leave(self, pid: str) -> None:
        del self.members[pid]

    def play(self, name: str, wait: int) -> StepReport:
        reports: list[GenerationReport] = []
        converged_after: int | None = None
        while len(reports) < self.settings.max_generations:
            reports.append(self._generation(name))
            if not reports[-1].probing:
                converged_after = len(reports)
                break
        reports += [self._generation(name) for _ in range(wait)]
        return StepReport(name, tuple(reports), converged_after)

    def _generation(self, name: str) -> GenerationReport:
        states = self._client_states()
        tasks = self.scenario.stateful_tasks
        result = self.assignor(states, tasks, self.scenario.stateless_tasks, self.config)
        violations = validate_assignment(states, tasks, self.scenario.stateless_tasks, self.config, result)
        report = GenerationReport(
            generation=self.generation,
            step=name,
            members=len(states),
            moves=len(result.moves),
            active_moves=sum(move.role is Role.ACTIVE for move in result.moves),
            warmups=sum(len(held.warmup) for held in result.clients.values()),
            unavailable=_unavailable(states, result, self.config.acceptable_recovery_lag),
            skew=stateful_skew(result, states, tasks),
            probing=result.probing_rebalance_needed,
            violations=len(violations),
        )
        self._advance(result)
        self.generation += 1
        return report

    def _client_states(self) -> dict[str, ClientState]:
        previous = self.last.clients if self.last is not None else {}
        states = {}
        for pid, spec in sorted(self.members.items()):
            held = previous.get(pid)
            states[pid] = ClientState(
                process_id=pid,
                capacity=spec.capacity,
                tags=spec.tags,
                prev_active=held.active if held else frozenset(),
                prev_standby=(held.standby | held.warmup) if held else frozenset(),
                task_lags=self.local_lag[pid],
            )
        return states

    def _advance(self, result: AssignmentResult) -> None:
        """One probing interval passes."""
        stateful = set(self.scenario.stateful_tasks)
        for pid, lags in self.local_lag.items():
            held = result.clients.get(pid)
            replicas = (held.standby | held.warmup) if held else frozenset()
            for task in lags.keys() - replicas - (held.active if held else frozenset()):
                lags[task] += self.settings.drift_per_generation
            for task in replicas:
                start = lags.get(task, self.settings.state_size)
                lags[task] = max(0, start - self.settings.restore_per_generation)
            for task in (held.active & stateful) if held else ():
                lags[task] = 0
        self.last = result


def _unavailable(states: Mapping[str, ClientState], result: AssignmentResult, bound: int) -> int:
    caught_up: dict[str, set[str]] = {}
    for pid, state in states.items():
        for task, lag in state.task_lags.items():
            if lag <= bound:
                caught_up.setdefault(task, set()).add(pid)
    return sum(
        1
        for pid, held in result.clients.items()
        for task in held.active
        if caught_up.get(task) and pid not in caught_up[task]
    )


def stateful_skew(
    result: AssignmentResult, states: Mapping[str, ClientState], stateful: Iterable[str]
) -> float:
    """Max minus min stateful active tasks per thread over the clients (Kafka's balance measure)."""
    tasks = set(stateful)
    loads = [len(held.active & tasks) / states[pid].capacity for pid, held in result.clients.items()]
    return max(loads) - min(loads) if loads else 0.0


def zone_clients(count: int, zones: int = 3) -> tuple[ClientSpec, ...]:
    """``count`` clients ``c0``, ``c1``, ... of capacity 1, round-robin over zones ``z0``, ``z1``, ..."""
    return tuple(ClientSpec(f"c{i}", tags={"zone": f"z{i % zones}"}) for i in range(count))


def standard_scenarios(tasks: int = 24) -> list[Scenario]:
    """The issue's scenarios: rolling bounce, scale-out 3 -> 6, loss of a zone, a stale client returning."""
    stateful = tuple(f"0_{partition}" for partition in range(tasks))
    six, nine = zone_clients(6), zone_clients(9)
    bounce = tuple(
        step
        for spec in six
        for step in (
            Step(f"stop {spec.process_id}", leave=(spec.process_id,)),
            Step(f"restart {spec.process_id}", join=(spec,)),
        )
    )
    lost = tuple(spec.process_id for spec in nine if spec.tags["zone"] == "z2")
    return [
        Scenario("rolling bounce", six, bounce, stateful),
        Scenario("scale out 3 -> 6", six[:3], (Step("add c3, c4, c5", join=six[3:]),), stateful),
        Scenario("loss of zone z2", nine, (Step("zone z2 lost", leave=lost),), stateful),
        Scenario(
            "stale client returns",
            six,
            (Step("c0 leaves", leave=("c0",), wait=30), Step("c0 returns stale", join=six[:1])),
            stateful,
        ),
    ]
