"""The quality job: run the suite of each state table, record the results in Delta, build Data Docs.

:func:`run_quality` is what ``jobs/quality.py``, ``lakehouse quality`` and the demo call. Each table is
read at its current version (recorded with the results), reduced to its rule-breaking rows (one Spark pass;
a versioned store's is a per-key aggregate, then a window over the keys it cannot certify), and validated
by Great Expectations; nothing of the table is collected to the driver (at most 200
offending rows per rule, of which 5 keys are kept). A versioned store with a passed check in the results
table is checked incrementally: the keys changed since, read from the segments a change can reach
(:mod:`lakehouse.quality._incremental`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.sql import SparkSession

from lakehouse import delta_ops
from lakehouse.errors import InvalidInputError
from lakehouse.paths import is_local, local_path, resolve_path
from lakehouse.quality._gx import QualityContext, RuleResult
from lakehouse.quality._incremental import created_ms
from lakehouse.quality.discover import lakehouse_tables
from lakehouse.quality.results import PassedCheck, append_results, last_passes
from lakehouse.quality.rules import no_violations
from lakehouse.quality.suites import CHECKED_KINDS, check_table, table_kind

QUALITY_DIR = "quality"
#: The folder, under the working directory, of the Data Docs of warehouses on object storage.
LOCAL_DOCS_DIR = "quality-docs"
# Reads during a check skip data files missing from storage: their rows are then absent, and the rules
# that relate rows (versions touch, one open version, ...) report the keys they belonged to.
_IGNORE_MISSING_FILES = {"spark.sql.files.ignoreMissingFiles": "true"}
_SUITE_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class TableVerdict:
    """The outcome of one table's suite."""

    path: str
    kind: str
    version: int
    suite: str
    results: tuple[RuleResult, ...]
    #: What was checked: ``full``, ``full: <why not incremental>`` or ``incremental since version N: K keys``.
    scope: str = "full"

    @property
    def success(self) -> bool:
        return all(result.success for result in self.results)

    def line(self) -> str:
        """The one-line verdict: PASS/FAIL, the suite, the version, and each failed rule with sample keys."""
        verdict = "PASS" if self.success else "FAIL"
        head = f"[quality] {verdict} {self.suite} ({self.kind}, version {self.version}, {self.scope})"
        failed = [r for r in self.results if not r.success]
        if not failed:
            return f"{head}: {len(self.results)} expectations met"
        parts = [
            f"{r.rule.name} ({r.unexpected_count} unexpected, e.g. {', '.join(r.sample_keys)})"
            for r in failed
        ]
        return f"{head}: {len(failed)} of {len(self.results)} failed: " + "; ".join(parts)


@dataclass(frozen=True)
class QualityReport:
    """Every table's verdict, where the results and the Data Docs went."""

    verdicts: tuple[TableVerdict, ...]
    results_path: str
    docs_index: str

    @property
    def success(self) -> bool:
        return all(verdict.success for verdict in self.verdicts)

    def lines(self) -> list[str]:
        """One verdict line per table, then where the Data Docs index is."""
        return [v.line() for v in self.verdicts] + [f"[quality] Data Docs: {self.docs_index}"]


def run_quality(
    spark: SparkSession,
    warehouse: str,
    tables: list[str] | None = None,
    *,
    results_path: str | None = None,
    docs_dir: str | None = None,
    full: bool = False,
    step: Callable[[str], None] = lambda path: None,
) -> QualityReport:
    """Run the suite of each table (default: every lakehouse table under ``warehouse`` with a suite);
    ``step`` is told each table's path before its check (a progress bar).

    A versioned store whose newest recorded check in the results table passed every expectation is
    checked incrementally: only the keys changed since that check's version are read through the rules
    (:func:`lakehouse.quality.suites.check_table`; the verdict's ``scope`` says so). ``full``: check
    every table whole, as the first check of a table is.

    Relative paths resolve against the working directory (:func:`lakehouse.paths.resolve_path`); a
    relative table that is not a Delta table there is looked up under ``warehouse``. Appends one row
    per expectation to the results table (default ``<warehouse>/quality/results``, one commit per run)
    and writes the Data Docs site to a local folder (default :func:`default_docs_dir`).

    Raises:
        InvalidInputError: a named table is not a Delta table, or its kind has no suite.
    """
    warehouse = resolve_path(warehouse).rstrip("/")
    quality_root = f"{warehouse}/{QUALITY_DIR}"
    results_path = resolve_path(results_path or f"{quality_root}/results")
    docs = QualityContext(_local_folder(docs_dir) if docs_dir else default_docs_dir(warehouse))
    paths = [_resolve(spark, warehouse, t) for t in tables] if tables else _discovered(spark, warehouse)
    passes = {} if full else last_passes(spark, results_path, paths)
    run_time = datetime.now(UTC)
    verdicts = []
    for path in paths:
        step(path)
        verdicts.append(_check(spark, docs, warehouse, path, passes.get(path)))
    append_results(spark, results_path, run_time, tuple(verdicts))
    return QualityReport(tuple(verdicts), results_path, docs.build_docs())


def _check(
    spark: SparkSession, docs: QualityContext, warehouse: str, path: str, passed: PassedCheck | None
) -> TableVerdict:
    version = delta_ops.latest_version(DeltaTable.forPath(spark, path))
    with delta_ops.session_confs(spark, _IGNORE_MISSING_FILES):
        check = check_table(spark, path, version, _since(spark, path, version, passed))
        suite = _suite_name(warehouse, path)
        if check.violations.isLocal():  # held by the driver (no violation found): nothing to cache
            results = docs.validate(suite, check.rules, check.violations, check.scope)
        else:
            violations = check.violations.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                # No violation row: GX validates the same (empty) frame held by the driver, one tiny query
                # per expectation instead of a count and a sample over the cached rows.
                found = no_violations(spark) if violations.isEmpty() else violations
                results = docs.validate(suite, check.rules, found, check.scope)
            finally:
                violations.unpersist()
    return TableVerdict(path, check.kind, version, suite, tuple(results), check.scope)


def _since(spark: SparkSession, path: str, version: int, passed: PassedCheck | None) -> int | None:
    """The version an incremental check of ``path`` at ``version`` may start from: that of its newest
    passed check, unless the table is older than it in versions or newer in creation (created again)."""
    if passed is None or passed.version > version:
        return None
    created = created_ms(spark, path)
    if created is not None and created > passed.run_time.timestamp() * 1000:
        return None
    return passed.version


def _discovered(spark: SparkSession, warehouse: str) -> list[str]:
    return [path for path in lakehouse_tables(spark, warehouse) if table_kind(spark, path) in CHECKED_KINDS]


def _resolve(spark: SparkSession, warehouse: str, table: str) -> str:
    candidates = [resolve_path(table)]
    if "://" not in table and not table.startswith(("/", "file:")):
        candidates.append(f"{warehouse}/{table}")
    for candidate in candidates:
        if DeltaTable.isDeltaTable(spark, candidate):
            return candidate
    raise InvalidInputError(f"{table} is not a Delta table (looked at {candidates})")


def _suite_name(warehouse: str, path: str) -> str:
    """The table's path relative to the warehouse, its folders joined by dots (characters safe in a file
    name), e.g. ``demo.store``; a table outside the warehouse is named by its whole path."""
    base = warehouse.rstrip("/") + "/"
    relative = path[len(base) :] if path.startswith(base) else path
    return _SUITE_CHARS.sub(".", relative).strip(".")


def default_docs_dir(warehouse: str) -> str:
    """Where the Data Docs of ``warehouse``'s tables go by default: ``<warehouse>/quality/docs`` for a local
    warehouse; for one on object storage (any URI but ``file:``) a local folder of the working directory,
    ``quality-docs/<bucket>/<path>`` (``s3a://lakehouse/demo`` -> ``./quality-docs/lakehouse/demo``).

    Data Docs are a static HTML site a person opens in a browser, from a local file: on a bucket they would
    need a web endpoint to be read at all, so they stay next to the command that built them (the results
    table, their data, is in the warehouse either way).
    """
    warehouse = resolve_path(warehouse).rstrip("/")
    if is_local(warehouse):
        return _local_folder(f"{warehouse}/{QUALITY_DIR}/docs")
    parsed = urlparse(warehouse)
    return str(Path(LOCAL_DOCS_DIR, parsed.netloc, *PurePosixPath(parsed.path).parts[1:]).resolve())


def _local_folder(path: str) -> str:
    if not is_local(path):
        raise InvalidInputError(f"Data Docs are written to a local folder; {path} is not one (give docs_dir)")
    return str(Path(local_path(path)).resolve())
