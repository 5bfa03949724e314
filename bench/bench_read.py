"""Key lookups from a fresh process: delta-rs (``lakehouse.read``, the CLI's default) vs Spark (``--spark``).

Run: ``.venv/bin/python bench/bench_read.py --build-only``, then ``flock /tmp/bench.lock .venv/bin/python
bench/bench_read.py [--sizes 100000:10000,1000000:100000 --pending 1000 --repeats 3]``; writes
``bench/RESULTS_read.md``. Each size ``VERSIONS:KEYS`` is built once into ``bench/out/read_<versions>``
and reused: the sealed versions written in the layout a seal writes (``bench_versioned.bulk_store``: one
append, segments by ``valid_to``), then ``--pending`` updates (some out of order) through
``VersionedStore.put_all``, left pending, so every lookup resolves pending rows. Each timed run is a new
process (``lakehouse store get``), timed from outside: imports, opening the table, the lookup and
printing, and for Spark the JVM's start. The peers run side by side, alternating.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_versioned import bulk_store, update_batch

from lakehouse.config import load_settings
from lakehouse.session import get_spark
from lakehouse.versioned import VersionedStore

OUT = Path(__file__).parent / "out"
RESULTS = Path(__file__).parent / "RESULTS_read.md"
LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")


def build(versions: int, keys: int, pending: int) -> str:
    """The store of ``versions`` versions over ``keys`` keys with ``pending`` pending updates (built once)."""
    path = OUT / f"read_{versions}"
    done = path / "_bench_built"
    if done.exists():
        return str(path)
    settings = load_settings("local", overrides={"log_level": "ERROR"})
    spark = get_spark({"spark.sql.shuffle.partitions": "4"}, settings)
    per_key = versions // keys
    bulk_store(spark, str(path), keys, per_key)
    VersionedStore.open(spark, str(path)).put_all(
        update_batch(spark, keys, per_key, pending, 0.2), batch_id=0
    )
    done.write_text("built\n")
    return str(path)


def lookup(path: str, key: str, spark: bool) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system of the process and the children it waited for: not Spark's JVM)
    of ``lakehouse store get PATH KEY`` in a fresh process, and what it printed."""
    command = [LAKEHOUSE, "store", "get", path, key, "--format", "csv", *(["--spark"] if spark else [])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000:10000,1000000:100000", help="VERSIONS:KEYS,...")
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--build-only", action="store_true", help="build the stores (outside the bench lock)")
    parser.add_argument(
        "--definitions", metavar="REV", help="instead: Spark on the portable definition vs the one of git REV"
    )
    args = parser.parse_args()
    if args.definitions:
        compare_definitions(args)
        return
    if args.build_only:
        for size in args.sizes.split(","):
            versions, keys = (int(x) for x in size.split(":"))
            print(build(versions, keys, args.pending), flush=True)
        return
    rows = []
    for size in args.sizes.split(","):
        versions, keys = (int(x) for x in size.split(":"))
        started = time.perf_counter()
        path = build(versions, keys, args.pending)
        print(
            f"store {versions} versions / {keys} keys ready in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        times: dict[str, list[float]] = {"delta-rs": [], "spark": []}
        cpu: dict[str, list[float]] = {"delta-rs": [], "spark": []}
        answers = set()
        for _ in range(args.repeats):
            for peer in times:
                seconds, cpu_seconds, answer = lookup(path, "42", peer == "spark")
                times[peer].append(seconds)
                cpu[peer].append(cpu_seconds)
                answers.add(answer)
                print(f"  {peer}: {seconds:.2f} s wall, {cpu_seconds:.2f} s CPU", flush=True)
        assert len(answers) == 1, answers  # both peers print the same version
        median = {p: statistics.median(t) for p, t in times.items()}
        rows.append((versions, keys, median, times, {p: statistics.median(t) for p, t in cpu.items()}))
    write_results(rows, args)


def compare_definitions(args: argparse.Namespace) -> None:
    """In one Spark session, the largest store's versions through this definition and through the one of
    git ``args.definitions`` (``lakehouse/versioned/pending.py`` there), alternating after a warm-up: a key
    lookup, and every version (a count and the largest ``valid_to``, so each is resolved)."""
    versions, keys = (int(x) for x in args.sizes.split(",")[-1].split(":"))
    path = build(versions, keys, args.pending)
    source = subprocess.run(
        ["git", "show", f"{args.definitions}:lakehouse/versioned/pending.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    previous = types.ModuleType("previous_pending")
    exec(compile(source, "previous_pending", "exec"), previous.__dict__)  # our own history
    spark = get_spark(
        {"spark.sql.shuffle.partitions": "4"}, load_settings("local", overrides={"log_level": "ERROR"})
    )
    store = VersionedStore.open(spark, path)
    table, columns = previous.table_reference(path), store.schema.fieldNames()
    recorded = store._log.read()
    region_from = store._region_from(recorded.state)
    region = None if region_from is None else str(region_from)
    previous_sql = previous.versions_sql(table, columns, ("k",), store.settings.interval_us, region)
    queries = {
        "portable": store._versions(recorded.version, recorded.state),  # what every library read uses
        "previous": spark.sql(previous_sql),
    }
    reads = {
        "key lookup": lambda frame: frame.where("k = 42").collect(),
        "every version": lambda frame: frame.selectExpr("count(*)", "max(valid_to)").collect(),
    }
    timings: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.repeats + 1):
        for read, run in reads.items():
            for name, frame in queries.items():
                start = time.perf_counter()
                run(frame)
                if round_:  # the first round warms up
                    timings.setdefault((read, name), []).append(time.perf_counter() - start)
    lines = [
        "",
        f"## Spark: the portable definition vs the previous one (git {args.definitions})",
        "",
        f"`bench/bench_read.py --definitions {args.definitions}`: one Spark session, the "
        f"{versions:,}-version store with {args.pending} pending updates, median of {args.repeats} after a "
        f"warm-up round, alternating (load average {os.getloadavg()[0]:.1f}).",
        "",
        "| read | portable (s) | previous (s) |",
        "|---|---:|---:|",
    ]
    for read in reads:
        portable = statistics.median(timings[(read, "portable")])
        before = statistics.median(timings[(read, "previous")])
        lines.append(f"| {read} | {portable:.2f} | {before:.2f} |")
    text = RESULTS.read_text() if RESULTS.exists() else ""
    text = text.split("\n## Spark: the portable definition")[0].rstrip("\n") + "\n"
    RESULTS.write_text(text + "\n".join(lines) + "\n")
    print("\n".join(lines))


def write_results(rows: list, args: argparse.Namespace) -> None:
    load = os.getloadavg()[0]
    lines = [
        "# Key lookups from a fresh process: delta-rs vs Spark",
        "",
        f"`bench/bench_read.py --sizes {args.sizes} --pending {args.pending} --repeats {args.repeats}` "
        f"on {os.cpu_count()} cores (load average {load:.1f} at the end; other sessions shared the machine). "
        "Each run is `lakehouse store get PATH 42` in a new process, timed from outside (wall, median of "
        f"{args.repeats}); `--spark` is the Spark path. {args.pending} updates are pending in every store, "
        "so each lookup resolves them.",
        "",
        "CPU is user + system seconds of the `lakehouse` process and the children it waited for: delta-rs: "
        "the whole lookup (what it costs on an idle machine, roughly); Spark: the Python side only (the "
        "JVM is not reaped by it, so its CPU is missing).",
        "",
        "| versions | keys | delta-rs wall (s) | Spark wall (s) | Spark / delta-rs | delta-rs CPU (s) "
        "| Spark CPU (s) | runs delta-rs | runs Spark |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for versions, keys, median, times, cpu in rows:
        lines.append(
            f"| {versions:,} | {keys:,} | {median['delta-rs']:.2f} | {median['spark']:.2f} | "
            f"{median['spark'] / median['delta-rs']:.0f}x | {cpu['delta-rs']:.2f} | {cpu['spark']:.1f} | "
            f"{', '.join(f'{t:.2f}' for t in times['delta-rs'])} | "
            f"{', '.join(f'{t:.1f}' for t in times['spark'])} |"
        )
    if len(rows) > 1:
        first, last = rows[0][2]["delta-rs"], rows[-1][2]["delta-rs"]
        lines += ["", f"delta-rs, largest / smallest store: {last / first:.2f}x."]
    kept = (
        RESULTS.read_text().partition("\n## Spark: the portable definition")[1:] if RESULTS.exists() else ()
    )
    RESULTS.write_text("\n".join(lines) + "\n" + "".join(kept))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
