"""spark-submit entry point of the pipeline's materialize stage (options: lakehouse/pipeline/job.py).

``spark-submit jobs/materialize.py --pipeline NAME [--spec KEY=VALUE ...]``: one JSON line of metrics per
micro-batch on stdout; exit code 0, or 2 with one line on stderr.
"""

from __future__ import annotations

import sys

from lakehouse.pipeline.job import main

if __name__ == "__main__":
    sys.exit(main("materialize"))
