"""A job process running some of a pipeline's stages in order, each through the jobs' own entry point
(:func:`lakehouse.pipeline.job.main`, in one process and session): what the crash tests kill when a case
covers only some stages (``jobs/pipeline.py`` runs them all).

``python -m tests.pipeline.stages_job materialize,ingest --pipeline NAME [job options]``; exits with the
first failing stage's code (0 when every stage succeeded).
"""

from __future__ import annotations

import sys

from lakehouse.pipeline.job import main

if __name__ == "__main__":
    stages, options = sys.argv[1].split(","), sys.argv[2:]
    sys.exit(next((code for stage in stages if (code := main(stage, options))), 0))
