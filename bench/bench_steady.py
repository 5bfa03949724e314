"""Steady-state benchmark of the demo pipeline (issue 36): does cycle 300 cost what cycle 3 cost?

Run: ``flock /tmp/bench.lock .venv/bin/python bench/bench_steady.py [--keys 1000000 --cycles 50]``
(``pip install -e '.[bench]'`` for the plot); writes ``bench/RESULTS_steady.md`` and ``bench/steady.png``,
rewritten after every cycle so a run cut short still reports the cycles it ran.

Setup (not timed): a store of ``--keys`` live keys (one rate update per key, landed and run through the
pipeline, then sealed: the state after a nightly maintenance). Then ``--cycles`` cycles, each landing the
next 5 minutes of data in the demo's landing folders (``--rate-updates`` rate updates on random keys, 10%
of them out of order by up to 2 minutes; ``--transactions`` transactions on random keys, 10% of them
re-sent) and running the pipeline on it, five ways side by side in one process (each cycle runs the
five in turn, so load drifts hit all of them):

- **nightly**: the README's schedule, every stage every cycle but ``maintain`` (nightly: 288 cycles apart,
  so never within the run), and no batch sealing the store (``seal_pending_percent = 0``: the store as it
  was before its seal policy);
- **nightly + seal policy**: the same schedule, the store sealed by the ``materialize`` batch that leaves
  ``seal_pending_percent`` (default 10) pending rows per 100 live keys (:mod:`lakehouse.versioned.policy`);
- **every cycle**: every stage, ``maintain`` included (it seals once ``seal_min_rows`` rows are pending,
  compacts tables of many new files, ...: :mod:`lakehouse.pipeline.due`), no batch sealing;
- **floor**: the bare Spark + Delta floor of issue 14 (:mod:`pipeline_floor`) on the same files;
- **floor+**: the floor plus only the tables and reads the issue names that the floor leaves out (a seen-ID
  index and a quarantine of its own, the newest commits of each table read for maintenance, the last
  assignment read back), each the cheapest way and still short of the issue's semantics
  (``floor_run(..., issue_tables=True)``): how much of the 1.3x budget the issue's tables alone take.

The two lakehouse schedules run the demo pipeline's own spec and stages
(:func:`lakehouse.pipeline.run_pipeline`, one stage at a time, so each stage's wall clock includes its
stream's start and stop). Per cycle: each
stage's seconds, the store's pending rows, and per schedule the Delta log's bytes and the active data
files of every table (measured after the cycle, not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pipeline_floor import STEPS, floor_run
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.assignment.job import DEMO_CONFIG, write_demo_subscriptions
from lakehouse.assignment.store import AssignmentStore
from lakehouse.config import load_settings
from lakehouse.demo import demo_spec, land_part
from lakehouse.demo_data import T0, as_kafka_records, conform
from lakehouse.pipeline import PipelineSpec, run_pipeline
from lakehouse.pipeline.runner import stages_of
from lakehouse.session import get_spark, warehouse_uri
from lakehouse.times import micros
from lakehouse.versioned.pending import PENDING_SEGMENT
from lakehouse.versioned.store import VersionedStore

CYCLE = timedelta(minutes=5)
DISORDER = timedelta(minutes=2)
LATE_SHARE = 0.10
RESEND_SHARE = 0.10
RATE_PARTITIONS = 2
#: A re-send arrives at most this many transaction slots after its original.
_MAX_LAG_SLOTS = 50
#: Contenders, in the order each cycle runs them: whether maintain runs every cycle (None: the floor), and
#: the spec's ``seal_pending_percent`` (None: the spec's default).
CONTENDERS = {
    "nightly": (False, 0),
    "nightly + seal policy": (False, None),
    "every cycle": (True, 0),
    "floor": (None, 0),
    "floor+": (None, 0),
}
SEED = 36
FLOOR_PLUS = "floor+"
#: Delta writes a checkpoint of a table every ``delta.checkpointInterval`` (default 10) commits, and most
#: tables here commit once a cycle: every tenth cycle pays the checkpoints. Windows of this many cycles
#: hold one such cycle each, wherever they start.
CHECKPOINT_PERIOD = 10


@dataclass(frozen=True)
class Sizes:
    keys: int
    rate_updates: int
    transactions: int


@dataclass
class Cycle:
    """One cycle of one contender: seconds per step, and the state measured after it."""

    number: int
    steps: dict[str, float]
    pending_rows: int | None
    log_bytes: int
    files: int
    load: float

    @property
    def seconds(self) -> float:
        return sum(self.steps.values())


@dataclass
class Contender:
    name: str
    spec: PipelineSpec
    assignments: AssignmentStore | None
    cycles: list[Cycle] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- data
def _key(index) -> F.Column:
    return F.concat(F.lit("K"), F.lpad(index.cast("string"), 8, "0"))


def initial_rates(spark: SparkSession, keys: int) -> DataFrame:
    """One rate per key, the keys' event times spread over the 5 minutes before ``T0``."""
    start, step = micros(T0 - CYCLE), micros(CYCLE) // max(keys, 1)
    return _rates(spark.range(keys), _key(F.col("id")), start, step, base=0, seed=SEED)


def cycle_rates(spark: SparkSession, sizes: Sizes, cycle: int) -> DataFrame:
    """Cycle ``cycle``'s rate updates (cycles from 1): random keys, arrivals evenly over its 5 minutes."""
    start, step = micros(T0 + CYCLE * (cycle - 1)), micros(CYCLE) // max(sizes.rate_updates, 1)
    key = _key(F.floor(F.rand(SEED + cycle) * sizes.keys).cast("long"))
    base = sizes.keys + (cycle - 1) * sizes.rate_updates
    return _rates(spark.range(sizes.rate_updates), key, start, step, base, SEED + 1000 + cycle)


def _rates(rows: DataFrame, key: F.Column, start_us: int, step_us: int, base: int, seed: int) -> DataFrame:
    arrival = F.lit(start_us) + F.col("id") * step_us
    late = F.rand(seed) < LATE_SHARE
    delay = F.when(late, F.rand(seed + 1) * micros(DISORDER)).otherwise(0)
    event_us = (F.floor((arrival - delay) / 1000) * 1000).cast("long")
    sequence = F.lit(base) + F.col("id")
    generated = rows.select(
        key.alias("currency"),
        (1 + F.rand(seed + 2)).cast("decimal(18,6)").alias("rate"),
        F.lit(False).alias("deleted"),
        F.timestamp_micros(event_us).alias("event_time"),
        (sequence % RATE_PARTITIONS).alias("partition"),
        F.floor(sequence / RATE_PARTITIONS).alias("offset"),
    )
    return conform(generated, "demo_rate_updates")


def cycle_transactions(spark: SparkSession, sizes: Sizes, cycle: int) -> DataFrame:
    """Cycle ``cycle``'s transactions (cycle 0: the 5 minutes before ``T0``) on random keys,
    ``RESEND_SHARE`` of them sent twice (the re-send a few slots later, same id, time and partition);
    offsets follow arrival in every partition."""
    n, seed = sizes.transactions, SEED + 2000 + cycle
    slot_us = micros(CYCLE) // max(n, 1)
    arrival = F.lit(micros(T0 + CYCLE * (cycle - 1))) + F.col("id") * slot_us
    delay = F.rand(seed) * micros(DISORDER)
    per_slot = _MAX_LAG_SLOTS + 2
    base = cycle * n * per_slot
    originals = spark.range(n).select(
        F.concat(F.lit(f"c{cycle}_"), F.col("id")).alias("txn_id"),
        _key(F.floor(F.rand(seed + 1) * sizes.keys).cast("long")).alias("currency"),
        (F.rand(seed + 2) * 1000).cast("decimal(18,2)").alias("amount"),
        F.timestamp_micros((F.floor((arrival - delay) / 1000) * 1000).cast("long")).alias("timestamp"),
        "id",
    )
    lag = F.floor(F.rand(seed + 3) * _MAX_LAG_SLOTS)
    resent = originals.where(F.rand(seed + 4) < RESEND_SHARE).withColumn(
        "offset", F.lit(base) + (F.col("id") + lag) * per_slot + 1 + lag
    )
    records = originals.withColumn("offset", F.lit(base) + F.col("id") * per_slot).unionByName(resent)
    return as_kafka_records(records)


# ---------------------------------------------------------------------------------------------- cycles
def lakehouse_cycle(spark: SparkSession, contender: Contender, generation: int, maintain: bool) -> dict:
    """Subscribe ``generation`` and run every stage of the pipeline (maintain only if ``maintain``), one
    stage at a time; returns each step's wall-clock seconds."""
    steps: dict[str, float] = {}
    started = time.perf_counter()
    assert contender.assignments is not None
    write_demo_subscriptions(contender.assignments, generation)
    steps["subscribe"] = time.perf_counter() - started
    for stage in stages_of("all", contender.spec):
        if stage == "maintain" and not maintain:
            continue
        started = time.perf_counter()
        run_pipeline(spark, contender.spec, stage, emit=lambda metrics: None)
        steps[stage] = time.perf_counter() - started
    return steps


def pending_rows(spark: SparkSession, spec: PipelineSpec) -> int:
    store = spark.read.format("delta").load(spec.tables.store)
    return store.where(F.col("segment") == F.lit(PENDING_SEGMENT)).count()


def table_sizes(spark: SparkSession, root: str) -> tuple[int, int]:
    """The Delta log bytes and active data files of every Delta table under ``root``."""
    log_bytes, files = 0, 0
    for log in Path(root).rglob("_delta_log"):
        if "_checkpoints" in log.parts:
            continue
        log_bytes += sum(f.stat().st_size for f in log.rglob("*") if f.is_file())
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{log.parent}`").select("numFiles").first()
        files += int(detail["numFiles"] or 0) if detail else 0
    return log_bytes, files


def run(spark: SparkSession, sizes: Sizes, cycles: int, root: str, on_cycle) -> list[Contender]:
    warehouse = warehouse_uri(load_settings())
    contenders = []
    for name, (maintain, percent) in CONTENDERS.items():
        spec = demo_spec(warehouse, f"{root}/{name.replace(' ', '_').replace('+', 'and')}")
        if percent is not None:
            spec = replace(spec, seal_pending_percent=percent)
        assignments = (
            None if maintain is None else AssignmentStore.create(spark, spec.assignment_root, DEMO_CONFIG)
        )
        contenders.append(Contender(name, spec, assignments))
    # Setup: the live keys, through each contender's own pipeline, then sealed (a nightly maintenance).
    started = time.perf_counter()
    # (with the transactions of the 5 minutes before T0: every table exists before the first cycle)
    initial = (cycle_transactions(spark, sizes, 0), initial_rates(spark, sizes.keys))
    for contender in contenders:
        land_part(contender.spec, 0, initial)
        if _maintain(contender) is None:
            floor_run(spark, contender.spec, contender.spec.root, 1, contender.name == FLOOR_PLUS)
        else:
            lakehouse_cycle(spark, contender, 1, maintain=False)
            VersionedStore.open(spark, contender.spec.tables.store).seal()
    print(f"[steady] setup: {sizes.keys:,} live keys in {time.perf_counter() - started:.0f} s", flush=True)
    for cycle in range(1, cycles + 1):
        part = (cycle_transactions(spark, sizes, cycle), cycle_rates(spark, sizes, cycle))
        for contender in contenders:
            land_part(contender.spec, cycle, part)
        for contender in contenders:
            maintain = _maintain(contender)
            load = os.getloadavg()[0]
            if maintain is None:
                steps = floor_run(
                    spark, contender.spec, contender.spec.root, cycle + 1, contender.name == FLOOR_PLUS
                )
                pending = None
            else:
                steps = lakehouse_cycle(spark, contender, cycle + 1, maintain)
                pending = pending_rows(spark, contender.spec)
            log_bytes, files = table_sizes(spark, contender.spec.root)
            contender.cycles.append(Cycle(cycle, steps, pending, log_bytes, files, load))
        pending_now = [c.cycles[-1].pending_rows for c in contenders if _maintain(c) is not None]
        print(
            f"[steady] cycle {cycle}: "
            + ", ".join(f"{c.name} {c.cycles[-1].seconds:.1f} s" for c in contenders)
            + f" (pending {' / '.join(f'{rows:,}' for rows in pending_now)}; "
            f"load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
        on_cycle(contenders)
    return contenders


def _maintain(contender: Contender) -> bool | None:
    return CONTENDERS[contender.name][0]


# ---------------------------------------------------------------------------------------------- report
def _ends(steady: list[Cycle], size: int) -> tuple[float, float]:
    """Mean cycle seconds of the first and of the last ``size`` cycles of ``steady``."""
    first, last = steady[:size], steady[-size:]
    return sum(c.seconds for c in first) / size, sum(c.seconds for c in last) / size


def retention_cycles() -> int:
    """The cycles in the demo store's history retention (``history_retention`` of ``[pipeline.demo]``): the
    warm-up. Until then the store's history grows by design (expiry has nothing to drop yet, so its versions,
    files and reads grow with every cycle); from then on each cycle's expiry drops about what it adds."""
    return -(-demo_spec(".").history_retention // CYCLE)


def tenths(cycles: list[Cycle], warmup: int) -> tuple[float, float, int]:
    """Mean cycle seconds of the first and the last tenth of the cycles after ``warmup`` (at least one
    cycle each), and that tenth's length."""
    steady = cycles[warmup:]
    tenth = max(1, len(steady) // 10)
    return (*_ends(steady, tenth), tenth)


def periods(cycles: list[Cycle], warmup: int) -> tuple[float, float] | None:
    """Mean cycle seconds of the first and the last :data:`CHECKPOINT_PERIOD` cycles after ``warmup``
    (None: fewer than two periods ran). A tenth of a short run holds the cycle that writes the tables'
    checkpoints or not, by where it falls; these windows hold one each."""
    steady = cycles[warmup:]
    return None if len(steady) < 2 * CHECKPOINT_PERIOD else _ends(steady, CHECKPOINT_PERIOD)


def _mean(contender: Contender, warmup: int, done: int) -> float:
    """Mean cycle seconds of ``contender``'s cycles after ``warmup`` up to ``done``."""
    return sum(c.seconds for c in contender.cycles[warmup:done]) / max(1, done - warmup)


def _seals(cycles: list[Cycle], warmup: int, tenth: int) -> str:
    """The cycles of the first and of the last tenth that sealed the store (no pending row after them): a
    seal costs several cycles' worth, so a tenth's mean depends on how many it holds."""
    if any(c.pending_rows is None for c in cycles):
        return "-"
    steady = cycles[warmup:]
    first, last = (sum(c.pending_rows == 0 for c in part) for part in (steady[:tenth], steady[-tenth:]))
    return f"{first} / {last}"


def report(contenders: list[Contender], sizes: Sizes, warmup: int, plot: str | None) -> list[str]:
    floor = next(c for c in contenders if c.name == "floor")
    plus = next((c for c in contenders if c.name == FLOOR_PLUS), None)
    done = min(len(c.cycles) for c in contenders)
    lines = [
        f"Store: {sizes.keys:,} live keys; per cycle (5 minutes of data): {sizes.rate_updates:,} rate "
        f"updates on random keys ({LATE_SHARE:.0%} out of order by up to {DISORDER}), {sizes.transactions:,} "
        f"transactions ({RESEND_SHARE:.0%} re-sent). {done} cycles; the first {warmup} are warm-up "
        "(by default the store's history retention: until then its history grows by design).",
        "",
        "| schedule | first tenth s/cycle | last tenth s/cycle | last / first (goal <= 1.2x) "
        "| seals in the first / last tenth "
        f"| last / first {CHECKPOINT_PERIOD} cycles (one checkpoint cycle each) "
        "| mean s/cycle | / floor's (goal <= 1.3x) | last tenth / floor's last tenth | / floor+'s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    _, f_last, tenth = tenths(floor.cycles[:done], warmup)
    floor_mean = _mean(floor, warmup, done)
    plus_mean = None if plus is None else _mean(plus, warmup, done)
    for contender in contenders:
        first, last, _ = tenths(contender.cycles[:done], warmup)
        mean = _mean(contender, warmup, done)
        whole = periods(contender.cycles[:done], warmup)
        growth = "-" if whole is None else f"{whole[0]:.1f} -> {whole[1]:.1f}: **{whole[1] / whole[0]:.2f}x**"
        lines.append(
            f"| {contender.name} | {first:.1f} | {last:.1f} | **{last / first:.2f}x** "
            f"| {_seals(contender.cycles[:done], warmup, tenth)} | {growth} | {mean:.1f} "
            f"| **{mean / floor_mean:.2f}x** | {last / f_last:.2f}x "
            f"| {'-' if plus_mean is None else f'{mean / plus_mean:.2f}x'} |"
        )
    lines += [
        "",
        f"A tenth is {tenth} cycle(s). Delta checkpoints each table every {CHECKPOINT_PERIOD} commits, and "
        f"most tables commit once a cycle, so one cycle in {CHECKPOINT_PERIOD} writes them all (the spikes "
        "in the curves): a tenth shorter than that holds such a cycle or not by where it falls, which the "
        f"{CHECKPOINT_PERIOD}-cycle windows do not. Each stage's mean seconds, first tenth -> last tenth:",
        "",
    ]
    lines += [
        "| step | " + " | ".join(c.name for c in contenders) + " |",
        "|---|" + "---:|" * len(contenders),
    ]
    for step in STEPS:
        cells = []
        for contender in contenders:
            steady = contender.cycles[warmup:done]
            first = [c.steps.get(step, 0.0) for c in steady[:tenth]]
            last = [c.steps.get(step, 0.0) for c in steady[-tenth:]]
            present = any(step in c.steps for c in steady)
            cells.append(f"{sum(first) / tenth:.1f} -> {sum(last) / tenth:.1f}" if present else "-")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    if plot:
        lines += ["", f"![cycle seconds, pending rows, Delta log size per cycle]({Path(plot).name})"]
    lines += [
        "",
        "Per cycle (seconds; pending rows of the store; Delta log MB; active data files; load):",
        "",
    ]
    head = " | ".join(f"{c.name} s | pending | log MB | files" for c in contenders)
    lines += [f"| cycle | {head} | load |", "|---:|" + "---:|" * (4 * len(contenders) + 1)]
    for i in range(done):
        cells = []
        for contender in contenders:
            c = contender.cycles[i]
            pending = "-" if c.pending_rows is None else f"{c.pending_rows:,}"
            cells.append(f"{c.seconds:.1f} | {pending} | {c.log_bytes / 1e6:.2f} | {c.files}")
        lines.append(f"| {i + 1} | " + " | ".join(cells) + f" | {contenders[0].cycles[i].load:.1f} |")
    return lines


def draw(contenders: list[Contender], path: str) -> bool:
    """The curves as a PNG at ``path``; False when matplotlib is not installed (``.[bench]``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, (seconds, pending, log) = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    for contender in contenders:
        numbers = [c.number for c in contender.cycles]
        seconds.plot(numbers, [c.seconds for c in contender.cycles], marker=".", label=contender.name)
        if _maintain(contender) is not None:
            pending.plot(numbers, [c.pending_rows for c in contender.cycles], label=contender.name)
        log.plot(numbers, [c.log_bytes / 1e6 for c in contender.cycles], label=contender.name)
    seconds.set_ylabel("cycle wall clock (s)")
    pending.set_ylabel("store's pending rows")
    log.set_ylabel("Delta logs (MB)")
    log.set_xlabel("cycle (5 minutes of data each)")
    for axes in (seconds, pending, log):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True


def rewrite_report(raw: str, out: str, plot: str, sizes: Sizes, warmup: int) -> None:
    """Rewrite ``out`` (keeping its header, if it exists: command, start, note) and ``plot`` from the run in
    ``raw``."""
    contenders = [
        Contender(c["name"], None, None, [Cycle(**cycle) for cycle in c["cycles"]])  # type: ignore[arg-type]
        for c in json.loads(Path(raw).read_text())
    ]
    text = Path(out).read_text().splitlines() if Path(out).exists() else []
    header = next((text[:i] for i, line in enumerate(text) if line.startswith("Store: ")), [])
    drawn = plot if draw(contenders, plot) else None
    lines = report(contenders, sizes, min(warmup, len(contenders[0].cycles) - 1), drawn)
    Path(out).write_text("\n".join([*header, *lines]) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--rate-updates", type=int, default=20_000)
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument(
        "--warmup",
        type=int,
        help="cycles not counted in the growth figures (default: the demo store's history retention in "
        "cycles, see retention_cycles)",
    )
    parser.add_argument("--out", default="bench/RESULTS_steady.md")
    parser.add_argument("--plot", default="bench/steady.png")
    parser.add_argument("--note", default="", help="a line on what code ran (commit, change)")
    parser.add_argument(
        "--report-from",
        metavar="JSON",
        help="rewrite --out's tables and --plot from a run's JSON (a RESULTS_steady.json), running nothing; "
        "give the run's --keys, --rate-updates and --transactions (the JSON holds its cycles only)",
    )
    args = parser.parse_args()
    sizes = Sizes(args.keys, args.rate_updates, args.transactions)
    if args.warmup is None:
        args.warmup = retention_cycles()
    if args.report_from:
        rewrite_report(args.report_from, args.out, args.plot, sizes, args.warmup)
        return
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = os.getloadavg()[0]
    root = tempfile.mkdtemp(prefix="bench_steady_")
    spark = get_spark()
    header = [
        "## Steady state (issue 36)",
        "",
        f"Command: `flock /tmp/bench.lock .venv/bin/python {' '.join(sys.argv)}`; started {started}; "
        f"1-minute load average {load_at_start:.1f} at the start (2 cores, shared with other sessions); "
        f"Python {sys.version.split()[0]}. {args.note}",
        "",
    ]

    def write(contenders: list[Contender]) -> None:
        plot = args.plot if draw(contenders, args.plot) else None
        lines = report(contenders, sizes, min(args.warmup, len(contenders[0].cycles) - 1), plot)
        now = f"Last cycle written at {datetime.now(UTC):%H:%M} UTC, load {os.getloadavg()[0]:.1f}."
        Path(args.out).write_text("\n".join([*header, now, "", *lines]) + "\n")
        raw = [{"name": c.name, "cycles": [vars(x) for x in c.cycles]} for c in contenders]
        Path(args.out).with_suffix(".json").write_text(json.dumps(raw))

    try:
        run(spark, sizes, args.cycles, root, write)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
