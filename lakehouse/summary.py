"""What a run did, per step, as a person reads it: records in and out, what was dropped, where tables are.

Each step of a run (the demo's, a job's) reports one :class:`StepReport`; :func:`summary_lines` renders them
as a short table followed by the tables' locations and SQL statements to try on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepReport:
    """One step's outcome.

    Attributes:
        step: The step's name (``versioned``, ``dedup``, ...).
        records_in: Records the step read.
        records_out: Records it wrote or forwarded.
        counts: Other outcomes worth acting on, by name (``duplicates dropped``, ``late``, ...).
        tables: The tables it wrote, name -> location.
    """

    step: str
    records_in: int
    records_out: int
    counts: Mapping[str, int] = field(default_factory=dict)
    tables: Mapping[str, str] = field(default_factory=dict)


def summary_lines(reports: Iterable[StepReport], queries: Iterable[str] = ()) -> list[str]:
    """The summary: one line per step, then every table's location, then the queries to try."""
    reports = list(reports)
    width = max((len(r.step) for r in reports), default=4)
    lines = ["", "Summary", f"  {'step':<{width}}  {'in':>9}  {'out':>9}  details"]
    for report in reports:
        details = ", ".join(f"{value} {name}" for name, value in report.counts.items())
        lines.append(
            f"  {report.step:<{width}}  {report.records_in:>9}  {report.records_out:>9}  {details}".rstrip()
        )
    lines.append("Tables")
    for report in reports:
        for name, location in report.tables.items():
            lines.append(f"  {name}: {location}")
    queries = list(queries)
    if queries:
        lines.append("Try (spark.sql, spark-sql, or any Delta reader):")
        lines += [f"  {query}" for query in queries]
    return lines
