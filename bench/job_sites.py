"""Where the Spark jobs of a micro-batch come from: each job of a session's event log named by its call site.

A job's **call site** is the lakehouse code that caused it: the innermost lakehouse function on the Python
stack of the Py4J call that started it, and the lakehouse function that called that one
(``commit_log.read <- deduplicator._read_point``; the plumbing every snapshot goes through,
``latest_snapshot`` and ``checked_snapshot``, is skipped). Spark cannot see Python frames, and PySpark
names only a few actions (``collect``, ``first``), so :func:`python_call_sites` names them all while the
block it wraps runs: before each Py4J call made from lakehouse code it sets Spark's ``callSite.short`` to
``@<stage>|<site>``, which every job the call starts records (the jobs Delta runs inside it too: rebuilding a
snapshot's state, reading a checkpoint, OPTIMIZE, a MERGE's scan). A profiling aid only: a Py4J call more
per call site change, so time nothing under it.

- Delta's own description of a job it runs (``Filtering files for query``, ``Compute snapshot ...``) is
  kept beside the call site.
- A job of a stage's streaming query started after its micro-batch handler returned or before it began (a
  source's offsets, a Delta source's snapshot) is the **streaming engine**'s.
- The stage of a job is its query's name (``<pipeline>_<stage>``, the job group's description), else the
  stage whose handler (or ``maintain``) is on the Python stack.

:func:`python_call_sites` also counts the **snapshot reads** per stage and call site: the Py4J calls that
refresh a Delta table's snapshot or look its log up (:data:`SNAPSHOT_CALLS`); each lists the table's
``_delta_log``, and builds a new snapshot when the table moved.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from py4j import java_gateway
from pyspark.sql import SparkSession
from pyspark.sql import utils as sql_utils

#: The Py4J methods that refresh a table's snapshot or look its log up (see the module doc).
SNAPSHOT_CALLS = frozenset({"update", "forTable", "forPath", "isDeltaTable", "startTransaction"})
#: The call site of a job of a stage's query that no lakehouse code started.
ENGINE = "streaming engine"
#: The call site of a job started outside lakehouse code and outside any stage's query.
OUTSIDE = "outside lakehouse"
_LAKEHOUSE = f"{Path(__file__).resolve().parent.parent / 'lakehouse'}/"
#: Functions every snapshot read goes through: named by who called them.
_PLUMBING = frozenset({"latest_snapshot", "latest_snapshot.<lambda>", "checked_snapshot", "named"})
#: The stage of a function of ``lakehouse/pipeline/stages.py`` on the stack (the outermost name).
_STAGE_OF = {"ingest": "ingest", "materialize": "materialize", "_join_now": "enrich"}
_STAGE_OF |= {"_join_with_grace": "enrich", "maintain": "maintain", "assign": "assign"}
_TAG = "@"
#: The heading of the breakdown's section in ``bench/RESULTS_continuous.md``.
SECTION = "### Fixed cost by call site"
#: The call sites of the most Py4J calls listed per stage.
_TOP_CALLS = 8


@dataclass(frozen=True)
class Job:
    """One Spark job: when it was submitted (epoch ms), its stage, its call site, and Delta's description
    of it ("" when Delta did not describe it)."""

    submitted_ms: int
    stage: str
    site: str
    delta: str


@dataclass
class SnapshotReads:
    """The snapshot reads counted by :func:`python_call_sites`: (epoch ms, stage, call site, Py4J method)."""

    calls: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: Every Py4J call made from lakehouse code: (epoch ms, stage, call site).
    py4j: list[tuple[int, str, str]] = field(default_factory=list)


def _name(frame: FrameType) -> str:
    module = frame.f_code.co_filename.removeprefix(_LAKEHOUSE).removesuffix(".py").replace("/", ".")
    return f"{module.rsplit('.', 1)[-1]}.{frame.f_code.co_qualname.replace('.<locals>', '')}"


def _lakehouse_frames(frame: FrameType | None) -> list[FrameType]:
    frames = []
    while frame is not None:
        if frame.f_code.co_filename.startswith(_LAKEHOUSE):
            frames.append(frame)
        frame = frame.f_back
    return frames


def _site(frames: list[FrameType]) -> str:
    """The innermost lakehouse function (plumbing skipped) and its caller in lakehouse."""
    names = [_name(f) for f in frames]
    named = [n for n in names if n.split(".", 1)[1] not in _PLUMBING]
    return " <- ".join(named[:2])


def _stage(frames: list[FrameType]) -> str:
    """The pipeline stage whose function is on the stack ("" if none)."""
    for frame in frames:
        if frame.f_code.co_filename.endswith("pipeline/stages.py"):
            outer = frame.f_code.co_qualname.split(".")[0]
            if outer in _STAGE_OF:
                return _STAGE_OF[outer]
    return ""


@contextmanager
def python_call_sites(spark: SparkSession, pipeline: str) -> Iterator[SnapshotReads]:
    """Name every Spark job started from lakehouse code by its Python call site while the block runs (see
    the module doc), and count the snapshot reads (``pipeline``: the pipeline's name, whose query names
    give the stages of the reads made outside a handler's thread); yields the count, filled as the block
    runs."""
    call, batch = java_gateway.JavaMember.__call__, sql_utils.ForeachBatchFunction.call
    local = threading.local()
    reads = SnapshotReads()
    jsc = spark.sparkContext._jsc
    assert jsc is not None

    def set_tag(tag: str | None) -> None:
        if getattr(local, "tag", None) != tag:
            local.inside = True
            try:
                call(jsc.setCallSite, tag)
            finally:
                local.inside = False
            local.tag = tag

    def stage_of_thread() -> str:
        local.inside = True
        try:
            group = str(call(jsc.getLocalProperty, "spark.job.description") or "").split("\n", 1)[0]
        finally:
            local.inside = False
        return group.removeprefix(f"{pipeline}_") if group.startswith(f"{pipeline}_") else ""

    def calling(member: Any, *args: Any) -> Any:
        if getattr(local, "inside", False):
            return call(member, *args)
        frames = _lakehouse_frames(sys._getframe(1))
        if not frames:
            return call(member, *args)
        stage, site = _stage(frames), _site(frames)
        if not stage:  # a thread of the handler's (e.g. writing files): its job group names the stage
            if not hasattr(local, "stage"):
                local.stage = stage_of_thread()
            stage = local.stage
        tag = f"{_TAG}{stage}|{site}"
        if member.name == "setCallSite":  # PySpark naming an action: the lakehouse site instead
            set_tag(tag)
            return None
        set_tag(tag)
        now = int(time.time() * 1000)
        if member.name in SNAPSHOT_CALLS:
            reads.calls.append((now, stage, site, member.name))
        reads.py4j.append((now, stage, site))
        return call(member, *args)

    def each_batch(self: Any, jdf: Any, batch_id: int) -> None:
        try:
            batch(self, jdf, batch_id)
        finally:
            set_tag(None)  # what the query runs until the next handler is the engine's

    java_gateway.JavaMember.__call__ = calling
    sql_utils.ForeachBatchFunction.call = each_batch
    try:
        yield reads
    finally:
        java_gateway.JavaMember.__call__ = call
        sql_utils.ForeachBatchFunction.call = batch


def read_jobs(event_log: Path, pipeline: str) -> list[Job]:
    """Each job of the session's event log (every file under ``event_log``), named as the module doc says;
    ``pipeline``: the pipeline's name, whose query names give the stages."""
    jobs = []
    for file in sorted(event_log.rglob("events_*")):
        for line in file.open():
            event = json.loads(line)
            if event["Event"] != "SparkListenerJobStart":
                continue
            props = event.get("Properties") or {}
            description = props.get("spark.job.description") or ""
            group = description.split("\n", 1)[0].removeprefix("Delta: ").split(":", 1)[0].strip()
            stage = group.removeprefix(f"{pipeline}_") if group.startswith(f"{pipeline}_") else ""
            short = props.get("callSite.short") or ""
            if short.startswith(_TAG):
                tagged, _, site = short[len(_TAG) :].partition("|")
                stage = stage or tagged
            else:
                site = ENGINE if stage else OUTSIDE
            jobs.append(Job(event["Submission Time"], stage, site, _delta_what(description)))
    return jobs


def _delta_what(description: str) -> str:
    """What Delta says a job it runs does (its description ``Delta: <job group>: <what>``, the group's
    lines included); "" if Delta did not describe the job."""
    if not description.startswith("Delta:"):
        return ""
    last = description.rsplit("\n", 1)[-1]
    return last.split(": ", 1)[-1][:60]


def breakdown(
    jobs: list[Job],
    reads: SnapshotReads | None,
    window_ms: tuple[int, int],
    batches: dict[str, int],
    commits: dict[str, int],
) -> list[str]:
    """Markdown lines: per stage, the jobs per micro-batch by call site (with Delta's description), the
    Delta commits and the snapshot reads per micro-batch, over what ``window_ms`` saw; ``batches``: the
    micro-batches of each stage in the window (0: a stage that is not a query, counted per window),
    ``commits``: the Delta commits of each stage."""
    start, end = window_ms
    lines = []
    for stage in sorted(batches):
        n = batches[stage] or 1
        per = "per micro-batch" if batches[stage] else "in the window"
        mine = [j for j in jobs if start <= j.submitted_ms <= end and j.stage == stage]
        stage_reads = [r for r in (reads.calls if reads else []) if start <= r[0] <= end and r[1] == stage]
        calls = [c for c in (reads.py4j if reads else []) if start <= c[0] <= end and c[1] == stage]
        counted = (
            ""
            if reads is None
            else f", {len(stage_reads) / n:.1f} snapshot reads, {len(calls) / n:.0f} Py4J calls"
        )
        lines += [
            "",
            f"**{stage}** ({batches[stage]} micro-batches): {len(mine) / n:.1f} Spark jobs, "
            f"{commits.get(stage, 0) / n:.1f} Delta commits{counted} {per}",
            "",
            f"| jobs {per} | call site | Delta's description |",
            "|---:|---|---|",
        ]
        by_site = Counter((j.site, j.delta) for j in mine)
        for (site, delta), count in sorted(by_site.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"| {count / n:.1f} | `{site}` | {delta} |")
        if stage_reads:
            lines += ["", f"| snapshot reads {per} | call site | Py4J call |", "|---:|---|---|"]
            read_sites = Counter((site, method) for _, _, site, method in stage_reads)
            for (site, method), count in sorted(read_sites.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"| {count / n:.1f} | `{site}` | {method} |")
        if calls:
            lines += ["", f"| Py4J calls {per} | call site (the {_TOP_CALLS} most) |", "|---:|---|"]
            by_call_site = Counter(site for _, _, site in calls)
            for site, count in sorted(by_call_site.items(), key=lambda kv: (-kv[1], kv[0]))[:_TOP_CALLS]:
                lines.append(f"| {count / n:.0f} | `{site}` |")
    return lines


def totals(
    jobs: list[Job],
    reads: SnapshotReads,
    window_ms: tuple[int, int],
    batches: dict[str, int],
    commits: dict[str, int],
) -> dict[str, dict[str, float]]:
    """Per stage of ``batches``, what :func:`breakdown` counts, per micro-batch: Spark jobs, Delta commits,
    snapshot reads and Py4J calls."""
    start, end = window_ms

    def per_batch(stage: str, count: int) -> float:
        return round(count / (batches[stage] or 1), 1)

    def within(stage: str, rows: list[Any]) -> int:
        return sum(1 for row in rows if start <= row[0] <= end and row[1] == stage)

    job_rows = [(j.submitted_ms, j.stage) for j in jobs]
    return {
        stage: {
            "jobs": per_batch(stage, within(stage, job_rows)),
            "commits": per_batch(stage, commits.get(stage, 0)),
            "snapshot reads": per_batch(stage, within(stage, reads.calls)),
            "Py4J calls": per_batch(stage, within(stage, reads.py4j)),
        }
        for stage in sorted(batches)
    }


def comparison(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> list[str]:
    """Markdown lines: a table of ``before`` -> ``after`` (two :func:`totals`) for the stages of both."""
    stages = [stage for stage in after if stage in before]
    names = list(next(iter(after.values()), {}))
    lines = [
        "| per micro-batch | " + " | ".join(stages) + " |",
        "|---|" + "---:|" * len(stages),
    ]
    for name in names:
        cells = [f"{before[stage][name]:g} -> {after[stage][name]:g}" for stage in stages]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def section_of(lines: list[str]) -> list[str]:
    """The breakdown's section among ``lines`` (a results file's): from its heading to the next one."""
    if SECTION not in lines:
        return []
    begin = lines.index(SECTION)
    end = next((i for i in range(begin + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[begin:end]


def write_section(out: Path, lines: list[str]) -> None:
    """Replace (or append) the breakdown's section of ``out`` with ``lines``."""
    text = out.read_text().splitlines() if out.exists() else []
    old = section_of(text)
    if old:
        begin = text.index(SECTION)
        text = text[:begin] + lines + text[begin + len(old) :]
    else:
        text += ["", *lines]
    out.write_text("\n".join(text).rstrip("\n") + "\n")
