"""Continuous mode (issue 36): the records/s the pipeline keeps up with, landing -> enriched latency, and the
fixed cost of a micro-batch.

Run: ``flock /tmp/bench.lock .venv/bin/python bench/bench_continuous.py [--rates 20,80,320,1280
--seconds 90 --trigger 5s]``; writes ``bench/RESULTS_continuous.md``.

One process, the embedded session of ``make demo`` (``local[*]``: both cores), one pipeline always on
(:func:`lakehouse.pipeline.runner.run_continuous`: materialize, ingest, enrich as long-lived queries,
maintain on its due rules between them) over a fresh root whose store holds a rate for each of 10
currencies. It is warmed up first (a file of 10 records, until its rows are enriched: the first
micro-batches create the tables). Then each **probe** lands one JSON file of transactions per second into
the records' landing folder (written aside, then renamed) at the probe's rate (5% of them re-sends of a
record of the same file) for ``--seconds``, and waits for the pipeline to enrich every record (up to
``--drain``).

A record's **latency** is from its file's landing (the rename) to the commit of the ``enriched`` version
that holds its row (that commit file's modification time), read back from the table after the probe. The
probe **keeps up** when every record was enriched within the drain and the median latency of the files of
the probe's last third is at most 1.5x that of its middle third plus one trigger (latency that grows with
the time spent is a backlog). The probes run at rising rates and stop at the first that does not keep
up; the **sustained rate** is the largest that did, and a last run at half of it gives the p50/p99
latency. The first third of each probe is not counted (the micro-batches adapting to the new rate).

The **fixed cost of a micro-batch** comes from the slowest-rate probe (a few records per batch): per stage,
the median seconds of its micro-batches (the stage's own work, from its metrics), and per micro-batch of
any stage the Spark jobs (from the session's event log, split into Delta's log and snapshot jobs and the
rest) and the Delta commits; beside it the **floor**'s (``bench/pipeline_floor.py``) handlers timed on a
micro-batch of the same size, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from delta.tables import DeltaTable
from job_sites import section_of
from pipeline_floor import _enrich, _ingest, _materialize
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.config import parse_duration
from lakehouse.pipeline import BatchMetrics, PipelineSpec, spec_from_values
from lakehouse.pipeline.runner import run_continuous
from lakehouse.session import get_spark

CURRENCIES = [f"C{i:02d}" for i in range(10)]
RECORDS_DDL = "txn_id string, currency string, amount double, timestamp timestamp, partition int, offset long"
RATES_DDL = "currency string, rate double, event_time timestamp, partition int, offset long"
RESEND = 0.05


@dataclass
class Probe:
    """One probe: what landed when, the metrics of every micro-batch, and the records' latencies."""

    rate: int
    landed: dict[int, tuple[float, int]] = field(default_factory=dict)  # file number: (epoch s, records)
    metrics: list[tuple[float, BatchMetrics]] = field(default_factory=list)  # (emitted at, metrics)
    latencies: list[tuple[int, float, int]] = field(default_factory=list)  # (file, seconds, records)
    drained: bool = False
    window_ms: tuple[int, int] = (0, 0)
    commits: int = 0

    def files(self, part: int) -> list[int]:
        """The file numbers of third ``part`` (0, 1, 2) of the landing."""
        numbers = sorted(self.landed)
        third = len(numbers) // 3
        return numbers[part * third : (part + 1) * third] if part < 2 else numbers[2 * third :]

    def median_latency(self, files: list[int]) -> float:
        chosen = set(files)
        return _weighted_quantile([(s, n) for f, s, n in self.latencies if f in chosen], 0.5)

    def keeps_up(self, trigger_s: float) -> bool:
        if not self.drained or not self.latencies:
            return False
        return self.median_latency(self.files(2)) <= 1.5 * self.median_latency(self.files(1)) + trigger_s

    def quantile(self, q: float) -> float:
        counted = set(self.files(1) + self.files(2))
        return _weighted_quantile([(s, n) for f, s, n in self.latencies if f in counted], q)


def _weighted_quantile(values: list[tuple[float, int]], q: float) -> float:
    ordered = sorted(values)
    total = sum(n for _, n in ordered)
    if not total:
        return float("nan")
    seen = 0
    for value, n in ordered:
        seen += n
        if seen >= q * total:
            return value
    return ordered[-1][0]


def _spec(root: Path) -> PipelineSpec:
    return spec_from_values(
        "bench",
        {
            "records": str(root / "landing" / "txns"),
            "records_format": "json",
            "records_schema": RECORDS_DDL,
            "dedup_by": ["txn_id"],
            "dedup_interval": "1h",
            "changelog": str(root / "landing" / "rates"),
            "changelog_format": "json",
            "changelog_schema": RATES_DDL,
            "store_key": ["currency"],
            "store_values": ["rate"],
            "changelog_timestamp": "event_time",
            "history_retention": "1h",
            "join_prefix": "rate_",
        },
        str(root / "wh"),
    )


def _land(folder: Path, name: str, rows: list[dict[str, object]]) -> float:
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.tmp"
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    partial.rename(folder / f"{name}.json")
    return time.time()


def _transactions(number: int, count: int, offset: int) -> list[dict[str, object]]:
    now = datetime.now(UTC).isoformat()
    rows = []
    for i in range(count):
        resend = i and random.random() < RESEND
        n = random.randrange(i) if resend else i
        rows.append(
            {
                "txn_id": f"f{number}-{n}",
                "currency": CURRENCIES[n % len(CURRENCIES)],
                "amount": float(n % 100),
                "timestamp": now,
                "partition": 0,
                "offset": offset + n,
            }
        )
    return rows


class Pipeline:
    """The pipeline always on over a fresh root, warmed up, that the probes land their files into."""

    def __init__(self, spark: SparkSession, trigger: timedelta, warmup: float) -> None:
        self.spark, self.trigger = spark, trigger
        self.root = Path(tempfile.mkdtemp(prefix="bench_continuous_"))
        self.spec = _spec(self.root)
        self.metrics: list[tuple[float, BatchMetrics]] = []
        self.next_file = 0
        start = datetime.now(UTC) - timedelta(minutes=5)
        rates = [
            {"currency": c, "rate": 1.0 + i, "event_time": start.isoformat(), "partition": 0, "offset": i}
            for i, c in enumerate(CURRENCIES)
        ]
        _land(self.root / "landing" / "rates", "r0", rates)
        self.stop = threading.Event()
        self.runner = threading.Thread(
            daemon=True,  # a failed bench does not wait for it
            target=run_continuous,
            kwargs={
                "spark": spark,
                "spec": self.spec,
                "trigger": trigger,
                "emit": lambda m: self.metrics.append((time.time(), m)),
                "stop": self.stop,
            },
        )
        self.runner.start()
        # Warm-up: the first micro-batches create the tables and warm the JIT; not measured.
        self.land(10)
        if not self.wait_enriched(warmup):
            raise RuntimeError(f"nothing enriched within the {warmup:g} s warm-up")

    def land(self, count: int) -> tuple[int, float]:
        number = self.next_file
        self.next_file += 1
        rows = _transactions(number, count, number * 100_000)
        return number, _land(self.root / "landing" / "txns", f"t{number:05d}", rows)

    def wait_enriched(self, seconds: float) -> bool:
        """Wait (up to ``seconds``) until every distinct record landed so far has its enriched row."""
        expected = _distinct_landed(self.spark, self.root)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if _enriched_rows(self.spark, self.spec) >= expected:
                return True
            time.sleep(self.trigger.total_seconds())
        return False

    def close(self) -> None:
        self.stop.set()
        self.runner.join()
        shutil.rmtree(self.root, ignore_errors=True)


def probe(pipeline: Pipeline, rate: int, seconds: float, drain: float) -> Probe:
    """Land ``rate`` records/s for ``seconds`` into the running ``pipeline``, then wait up to ``drain`` s
    for every record's enriched row; see the module doc."""
    result = Probe(rate)
    commits_before = _commits(pipeline.spec)
    first_metric = len(pipeline.metrics)
    result.window_ms = (int(time.time() * 1000), 0)
    began = time.monotonic()
    landed = 0
    while time.monotonic() - began < seconds:
        number, at = pipeline.land(rate)
        result.landed[number] = (at, rate)
        landed += 1
        time.sleep(max(0.0, began + landed - time.monotonic()))
    result.drained = pipeline.wait_enriched(drain)
    result.window_ms = (result.window_ms[0], int(time.time() * 1000))
    result.metrics = pipeline.metrics[first_metric:]
    result.latencies = _latencies(pipeline.spark, pipeline.spec, result.landed)
    result.commits = _commits(pipeline.spec) - commits_before
    return result


def _commits(spec: PipelineSpec) -> int:
    return sum(len(list(log.glob("*.json"))) for log in Path(spec.root).glob("*/_delta_log"))


def _distinct_landed(spark: SparkSession, root: Path) -> int:
    return (
        spark.read.schema(RECORDS_DDL)
        .json(str(root / "landing" / "txns"))
        .select("txn_id")
        .distinct()
        .count()
    )


def _enriched_rows(spark: SparkSession, spec: PipelineSpec) -> int:
    if not DeltaTable.isDeltaTable(spark, spec.tables.enriched):
        return 0
    return spark.read.format("delta").load(spec.tables.enriched).count()


def _latencies(
    spark: SparkSession, spec: PipelineSpec, landed: dict[int, tuple[float, int]]
) -> list[tuple[int, float, int]]:
    """(landing file, seconds from its landing to the commit of the enriched version, records) of every row
    the pipeline wrote to ``enriched``: the data files its commits added (``dataChange``: not the files a
    compaction rewrote them into), read as they were written (an OPTIMIZE leaves them in place), each
    timed by its adding commit's file (local files)."""
    table = Path(spec.tables.enriched)
    committed: dict[str, float] = {}
    for commit in sorted((table / "_delta_log").glob("*.json")):
        mtime = commit.stat().st_mtime
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action and action["add"].get("dataChange", True):
                committed[action["add"]["path"]] = mtime
    if not committed:
        return []
    by_name = {path.rsplit("/", 1)[-1]: mtime for path, mtime in committed.items()}
    rows = (
        spark.read.parquet(*[str(table / path) for path in committed])
        .select(
            F.regexp_extract("txn_id", r"^f(\d+)-", 1).cast("int").alias("file"),
            F.regexp_extract(F.input_file_name(), r"([^/]+)$", 1).alias("data_file"),
        )
        .groupBy("file", "data_file")
        .count()
        .collect()
    )
    return [
        (row["file"], by_name[row["data_file"]] - landed[row["file"]][0], row["count"])
        for row in rows
        if row["data_file"] in by_name and row["file"] in landed
    ]


def floor_seconds(spark: SparkSession, records: int, repeats: int = 5) -> dict[str, float]:
    """The floor's micro-batch handlers (``bench/pipeline_floor.py``) timed on a batch of ``records``
    transactions (and one rate update for materialize): each stage's median seconds over ``repeats``."""
    root = Path(tempfile.mkdtemp(prefix="bench_continuous_floor_"))
    try:
        times: dict[str, list[float]] = defaultdict(list)
        for batch_id in range(repeats + 1):  # the first creates the tables: not counted
            rows = _transactions(batch_id, records, batch_id * records)
            for row in rows:
                row["timestamp"] = datetime.fromisoformat(str(row["timestamp"]))
            txns = spark.createDataFrame(rows, RECORDS_DDL)
            rates = spark.createDataFrame(
                [(CURRENCIES[batch_id % 10], 1.0, datetime.now(UTC), 0, batch_id)], RATES_DDL
            )
            for name, handle, batch in (
                ("materialize", _materialize(str(root)), rates),
                ("ingest", _ingest(spark, str(root)), txns),
                ("enrich", _enrich(spark, str(root)), None),
            ):
                if batch is None:  # enrich: the records this batch's ingest added
                    new = spark.read.format("delta").load(f"{root}/deduped")
                    batch = new.where(F.col("txn_id").startswith(f"f{batch_id}-"))
                started = time.perf_counter()
                handle(batch, batch_id)
                if batch_id:
                    times[name].append(time.perf_counter() - started)
        return {name: statistics.median(values) for name, values in times.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def read_jobs(event_log: Path) -> list[tuple[int, str]]:
    """Each job of the session's event log: its submission time (epoch ms) and description."""
    jobs = []
    for file in sorted(event_log.rglob("events_*")):
        for line in file.open():
            event = json.loads(line)
            if event["Event"] == "SparkListenerJobStart":
                props = event.get("Properties") or {}
                stages = event.get("Stage Infos") or [{}]
                what = props.get("spark.job.description") or stages[0].get("Stage Name", "")
                jobs.append((event["Submission Time"], what))
    return jobs


def _is_log_job(description: str) -> bool:
    """Whether a job reads Delta's log or rebuilds a snapshot's state (not the batch's data)."""
    return description.startswith("Delta:") or "_delta_log" in description or "Snapshot" in description


def report(
    probes: list[Probe], latency: Probe | None, trigger_s: float, jobs: list[tuple[int, str]], floor: dict
) -> list[str]:
    lines = [
        "| probe rate (records/s) | records landed | kept up | drained | median latency, middle third (s) | "
        "median latency, last third (s) | micro-batches (materialize/ingest/enrich) |",
        "|---:|---:|---|---|---:|---:|---|",
    ]
    for p in probes:
        batches = defaultdict(int)
        for _, m in p.metrics:
            if m.batch_id is not None:
                batches[m.stage] += 1
        lines.append(
            f"| {p.rate} | {sum(n for _, n in p.landed.values())} | "
            f"{'yes' if p.keeps_up(trigger_s) else 'no'} | {'yes' if p.drained else 'no'} | "
            f"{p.median_latency(p.files(1)):.1f} | "
            f"{p.median_latency(p.files(2)):.1f} | "
            f"{batches['materialize']}/{batches['ingest']}/{batches['enrich']} |"
        )
    kept = [p for p in probes if p.keeps_up(trigger_s)]
    sustained = max((p.rate for p in kept), default=None)
    every = len(kept) == len(probes)
    headline = (
        f"**Sustained rate: {'at least ' if every else ''}{sustained} records/s**"
        if sustained
        else "**Sustained rate: none of the probes kept up**"
    )
    if latency is not None:
        headline += (
            f"; at half of it ({latency.rate} records/s) landing -> enriched latency "
            f"**p50 {latency.quantile(0.5):.1f} s, p99 {latency.quantile(0.99):.1f} s** "
            f"(kept up: {'yes' if latency.keeps_up(trigger_s) else 'no'})."
        )
    lines += ["", headline]
    slow = probes[0]
    lines += [
        "",
        f"### Fixed cost of a micro-batch (the {slow.rate} records/s probe: a few records per micro-batch)",
        "",
    ]
    per_stage: dict[str, list[float]] = defaultdict(list)
    for _, m in slow.metrics:
        if m.batch_id is not None and m.stage in ("materialize", "ingest", "enrich"):
            per_stage[m.stage].append(m.seconds)
    lines += [
        "| stage | micro-batches | median s (lakehouse) | floor s | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for stage in ("materialize", "ingest", "enrich"):
        values = per_stage.get(stage, [])
        if not values:  # no micro-batch of the stage in the probe (e.g. no rate update landed)
            lines.append(f"| {stage} | 0 | - | {floor[stage]:.2f} | - |")
            continue
        mine = statistics.median(values)
        lines.append(
            f"| {stage} | {len(values)} | {mine:.2f} | {floor[stage]:.2f} | {mine / floor[stage]:.1f}x |"
        )
    start, end = slow.window_ms
    in_probe = [d for t, d in jobs if start <= t <= end]
    batches = sum(len(v) for v in per_stage.values()) or 1
    log_jobs = sum(1 for d in in_probe if _is_log_job(d))
    lines += [
        "",
        f"Per micro-batch (any stage, {batches} of them in the probe, maintenance included): "
        f"{len(in_probe) / batches:.1f} Spark jobs ({log_jobs / batches:.1f} of them Delta log or snapshot "
        f"jobs, {(len(in_probe) - log_jobs) / batches:.1f} on data), "
        f"{slow.commits / batches:.1f} Delta commits; "
        "stream starts: none (each query starts once per process; a scheduled run starts three).",
    ]
    lines += [
        "",
        "Where each job, commit and snapshot read of a micro-batch comes from, by call site: the "
        "section below (`bench/profile_batch.py`; a job's description names only its query).",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="20,80,320,1280")
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--drain", type=float, default=120)
    parser.add_argument("--warmup", type=float, default=900)
    parser.add_argument("--trigger", default="5s")
    parser.add_argument("--out", default="bench/RESULTS_continuous.md")
    args = parser.parse_args()
    trigger = parse_duration("--trigger", args.trigger)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = f"{os.getloadavg()[0]:.1f}"
    event_log = Path(tempfile.mkdtemp(prefix="bench_continuous_events_"))
    spark = get_spark(
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log.as_uri(),
            "spark.eventLog.compress": "false",
        }
    )
    spark.range(1).count()
    probes: list[Probe] = []
    pipeline = Pipeline(spark, trigger, args.warmup)
    for rate in (int(r) for r in args.rates.split(",")):
        result = probe(pipeline, rate, args.seconds, args.drain)
        probes.append(result)
        print(f"[probe] {rate} records/s: kept up {result.keeps_up(trigger.total_seconds())}", flush=True)
        if not result.keeps_up(trigger.total_seconds()):
            break
    kept = [p.rate for p in probes if p.keeps_up(trigger.total_seconds())]
    latency = probe(pipeline, max(kept) // 2, args.seconds, args.drain) if kept else None
    pipeline.close()
    floor = floor_seconds(spark, probes[0].rate * max(1, int(trigger.total_seconds())))
    spark.stop()
    jobs = read_jobs(event_log)
    shutil.rmtree(event_log, ignore_errors=True)
    header = [
        "# Continuous mode (issue 36)",
        "",
        f"Command: `flock /tmp/bench.lock .venv/bin/python {' '.join(sys.argv)}`; started {started}; "
        f"1-minute load average {load_at_start} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores, "
        f"shared with other sessions' work); trigger {args.trigger}, {args.seconds:g} s of landing per "
        "probe. "
        "How it is measured: `bench/bench_continuous.py`'s docstring.",
        "",
    ]
    lines = report(probes, latency, trigger.total_seconds(), jobs, floor)
    out = Path(args.out)
    kept = section_of(out.read_text().splitlines()) if out.exists() else []  # bench/profile_batch.py's
    out.write_text("\n".join(header + lines + (["", *kept] if kept else [])).rstrip("\n") + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
