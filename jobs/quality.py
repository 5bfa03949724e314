"""spark-submit entry point of the data-quality job.

``spark-submit jobs/quality.py --warehouse PATH [TABLE ...]``: runs the Great Expectations suite of each
lakehouse state table (every one under the warehouse when none is named), appends the results to
``<warehouse>/quality/results``, builds Data Docs under ``<warehouse>/quality/docs`` (a warehouse on object
storage: the driver's ``./quality-docs/<bucket>/<path>``) and prints one verdict
per table (a versioned store is checked incrementally after a passed check; ``--full`` checks every table
whole). Exit code 0 when every expectation passed, 1 when one failed, 2 with one line on stderr on error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lakehouse.errors import LakehouseError
from lakehouse.quality import run_quality
from lakehouse.session import get_spark


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run the quality suites, print the verdicts."""
    parser = argparse.ArgumentParser(prog="quality", description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", metavar="TABLE", help="tables to check (default: all)")
    parser.add_argument("--warehouse", required=True, help="root of the lakehouse tables")
    parser.add_argument("--results", help="Delta results table (default: <warehouse>/quality/results)")
    parser.add_argument(
        "--docs",
        help="local Data Docs folder (default: <warehouse>/quality/docs; on object storage "
        "./quality-docs/<bucket>/<path>)",
    )
    parser.add_argument(
        "--full", action="store_true", help="check whole tables (default: incremental after a passed check)"
    )
    args = parser.parse_args(argv)
    try:
        report = run_quality(
            get_spark(),
            args.warehouse,
            args.tables or None,
            results_path=args.results,
            docs_dir=args.docs,
            full=args.full,
        )
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 0 if report.success else 1


if __name__ == "__main__":
    sys.exit(main())
