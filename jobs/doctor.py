"""spark-submit entry point of ``lakehouse doctor``: ``spark-submit jobs/doctor.py``.

Prints the session it was given (master, shuffle partitions, versions) and exercises a scratch Delta table:
the quickest check that a submit command gives lakehouse what it needs. Exit code 0, or 2 with one line.
"""

from __future__ import annotations

import sys

from lakehouse.cli import main

if __name__ == "__main__":
    sys.exit(main(["doctor", *sys.argv[1:]]))
