"""spark-submit entry point of the demo: ``spark-submit jobs/demo.py [--root PATH]``."""

from __future__ import annotations

import sys

from lakehouse.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
