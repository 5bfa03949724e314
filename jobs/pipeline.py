"""spark-submit entry point of a whole pipeline run: every stage in order (options: pipeline/job.py).

``spark-submit jobs/pipeline.py --pipeline NAME [--spec KEY=VALUE ...]`` runs what ``lakehouse run all``
runs (materialize, ingest, enrich, maintain, assign — those the spec has sources or tables for): one JSON
line of metrics per micro-batch on stdout; exit code 0, or 2 with one line on stderr. With ``--continuous
[--trigger 30s] [--for DURATION]`` it runs them always on (long-lived queries, maintenance between their
micro-batches) until SIGTERM or Ctrl-C to its Python process, then stops cleanly (docs/pipeline.md).
"""

from __future__ import annotations

import sys

from lakehouse.pipeline.job import main
from lakehouse.pipeline.order import ALL

if __name__ == "__main__":
    sys.exit(main(ALL))
