"""The fixed cost of a micro-batch, broken down by call site (issue 36): where each Spark job, Delta commit
and snapshot read of a few-record micro-batch of each stage comes from.

Run: ``flock /tmp/bench.lock .venv/bin/python bench/profile_batch.py [--files 3 --records 10]``; prints the
breakdown (:func:`job_sites.breakdown`) and writes it into ``bench/RESULTS_continuous.md`` (its "Fixed cost
by call site" section; ``--out -``: print only).

The pipeline of ``bench/bench_continuous.py`` runs always on
(:func:`lakehouse.pipeline.runner.run_continuous`) over a fresh root, in a session writing its event log.
After the warm-up (the first micro-batches create the tables) and one more file, ``--files`` files of
``--records`` transactions land one at a time, each once the previous one is enriched, so each is one
micro-batch of ingest and one of enrich. Only those are counted: the jobs submitted, the commits made
(commit files written, by table: ``deduped``, the seen-ID index and the quarantine are ingest's,
``enriched`` enrich's, the store materialize's; a maintenance commit (OPTIMIZE, VACUUM, a purge or expire
delete) is maintain's), the snapshot reads and the Py4J calls, while the files landed.
``PROFILE_KEEP_EVENTS=1`` keeps the event log and a copy of the tables (its path on stderr).
Counts, not seconds: the Py4J calls that name the jobs make the run slower.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

from bench_continuous import Pipeline
from job_sites import SECTION, breakdown, comparison, python_call_sites, read_jobs, totals, write_section

from lakehouse.pipeline import PipelineSpec
from lakehouse.session import get_spark

#: Commit operations of the maintenance stage (the others are the streaming stages' batch commits).
MAINTENANCE_OPERATIONS = ("OPTIMIZE", "VACUUM START", "VACUUM END", "DELETE")


def commits_by_stage(spec: PipelineSpec, window_ms: tuple[int, int]) -> Counter[str]:
    """The Delta commits made to ``spec``'s tables in ``window_ms`` (commit files' modification times), by
    stage."""
    tables = spec.tables
    stage_of = {tables.dedup_index: "ingest", tables.quarantine: "ingest", tables.deduped: "ingest"}
    stage_of |= {tables.enriched: "enrich", tables.store: "materialize"}
    counted: Counter[str] = Counter()
    for table, stage in stage_of.items():
        for commit in Path(table, "_delta_log").glob("*.json"):
            if not window_ms[0] <= commit.stat().st_mtime * 1000 <= window_ms[1]:
                continue
            info = next(
                (json.loads(line)["commitInfo"] for line in commit.open() if '"commitInfo"' in line), {}
            )
            maintenance = str(info.get("operation", "")).startswith(MAINTENANCE_OPERATIONS)
            counted["maintain" if maintenance else stage] += 1
    return counted


def profile(
    files: int, records: int, trigger: timedelta, before: dict[str, dict[str, float]] | None = None
) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Run the profile as the module doc says; returns the breakdown's lines (with a comparison to the
    ``before`` totals, if given) and its totals (:func:`job_sites.totals`)."""
    event_log = Path(tempfile.mkdtemp(prefix="profile_batch_events_"))
    spark = get_spark(
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log.as_uri(),
            "spark.eventLog.compress": "false",
        }
    )
    pipeline = Pipeline(spark, trigger, warmup=900)
    try:
        pipeline.land(records)  # one more micro-batch of each stage: warm
        if not pipeline.wait_enriched(300):
            raise RuntimeError("the second file was not enriched within 300 s")
        with python_call_sites(spark, pipeline.spec.name) as reads:
            first_metric = len(pipeline.metrics)
            start = int(time.time() * 1000)
            for _ in range(files):
                pipeline.land(records)
                if not pipeline.wait_enriched(300):
                    raise RuntimeError("a file was not enriched within 300 s")
            end = int(time.time() * 1000)
        batches = Counter(m.stage for _, m in pipeline.metrics[first_metric:] if m.batch_id is not None)
        commits = commits_by_stage(pipeline.spec, (start, end))
    finally:
        if os.environ.get("PROFILE_KEEP_EVENTS"):
            shutil.copytree(pipeline.root, f"{event_log}/root")
        pipeline.close()
        spark.stop()
    jobs = read_jobs(event_log, pipeline.spec.name)
    if os.environ.get("PROFILE_KEEP_EVENTS"):
        print(f"event log kept: {event_log}", file=sys.stderr)
    else:
        shutil.rmtree(event_log, ignore_errors=True)
    if "maintain" in commits:
        batches.setdefault("maintain", 0)
    window = (start, end)
    counted = totals(jobs, reads, window, dict(batches), dict(commits))
    compared = (
        []
        if before is None
        else ["", "Before -> after the cuts of issue 36:", "", *comparison(before, counted)]
    )
    lines = [
        f"{SECTION}",
        "",
        f"`bench/profile_batch.py --files {files} --records {records}`: {files} files of {records} "
        "records landed one at a time into the warmed-up pipeline, each one micro-batch of ingest and one "
        "of enrich; the Spark jobs, Delta commits, snapshot reads and Py4J calls made meanwhile, per "
        "micro-batch of each stage, by call site (how they are named: `bench/job_sites.py`).",
        *compared,
        *breakdown(jobs, reads, window, dict(batches), dict(commits)),
    ]
    return lines, counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--trigger", type=float, default=2.0, help="seconds")
    parser.add_argument("--seed", type=int, default=36, help="of the re-sends among the records")
    parser.add_argument("--save", help="write the totals per micro-batch to this JSON file")
    parser.add_argument("--before", help="a --save of an earlier run: shown beside this one's")
    parser.add_argument("--out", default="bench/RESULTS_continuous.md")
    args = parser.parse_args()
    random.seed(args.seed)
    before = None if args.before is None else json.loads(Path(args.before).read_text())
    lines, counted = profile(args.files, args.records, timedelta(seconds=args.trigger), before)
    print("\n".join(lines))
    if args.save:
        Path(args.save).write_text(json.dumps(counted, indent=1) + "\n")
    if args.out != "-":
        write_section(Path(args.out), lines)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
