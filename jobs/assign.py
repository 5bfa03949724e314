"""spark-submit entry point of the assignment job.

``spark-submit jobs/assign.py --root PATH [--standbys N --tags zone,rack ...]``: reads the latest
subscriptions of the store at PATH, assigns, validates, writes the generation and prints a summary
(moves, warm-ups, probing rebalance needed). Exit code 0, or 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lakehouse.assignment.job import config_from_args, run_assignment
from lakehouse.errors import LakehouseError
from lakehouse.options import add_assignment_options
from lakehouse.session import get_spark


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run one assignment generation, print its summary."""
    parser = argparse.ArgumentParser(prog="assign", description=__doc__.splitlines()[0])
    add_assignment_options(parser)
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
        for line in run_assignment(get_spark(), args.root, config):
            print(line)
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
