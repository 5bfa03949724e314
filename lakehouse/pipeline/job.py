"""The ``jobs/<stage>.py`` entry points: parse the job's options, run one stage, exit with a status code.

``spark-submit jobs/ingest.py --pipeline NAME [--config FILE] [--profile P] [--spec KEY=VALUE ...]``
prints one JSON line of metrics per micro-batch (or per stage that had nothing new) on stdout and exits 0;
on failure it prints one line (``<stage>: error: ...``) on stderr and exits 2 (with Spark's full error only
with ``--verbose``). With ``--continuous [--trigger 30s] [--for DURATION]`` the stage runs always on
(:func:`~lakehouse.pipeline.runner.run_continuous`) until SIGTERM or Ctrl-C (or ``--for`` passed), then
stops cleanly and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lakehouse.config import load_settings
from lakehouse.errors import LakehouseError
from lakehouse.options import add_continuous_options, add_key_values, check_continuous_options
from lakehouse.pipeline.order import stages_of
from lakehouse.pipeline.runner import run_as_asked
from lakehouse.pipeline.spec import load_pipeline
from lakehouse.preflight import preflight_run
from lakehouse.session import get_spark, warehouse_uri
from lakehouse.state_commands import one_line_errors


def main(stage: str, argv: Sequence[str] | None = None) -> int:
    """Run ``stage`` of the pipeline the options name; returns the exit code."""
    about = f"Run the {stage} stage of a pipeline once (or always on)."
    parser = argparse.ArgumentParser(prog=stage, description=about)
    parser.add_argument("--pipeline", required=True, help="the [pipeline.<name>] job spec of the config")
    parser.add_argument("--config", help="TOML configuration file (default: conf/lakehouse.toml)")
    parser.add_argument("--profile", help="configuration profile (default: $LAKEHOUSE_PROFILE or 'local')")
    add_key_values(parser, "--spec", "KEY=VALUE", "override a key of the job spec (repeatable)")
    parser.add_argument("--verbose", action="store_true", help="show Spark's whole log and errors in full")
    add_continuous_options(parser)
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.profile, args.config, {"quiet": "false"} if args.verbose else None)
        spec = load_pipeline(args.pipeline, warehouse_uri(settings), args.config, dict(args.spec))
        check_continuous_options(args)
        preflight_run(spec, stages_of(stage, spec), args.continuous)
        with one_line_errors(args.verbose):
            run_as_asked(get_spark(settings=settings), spec, stage, args)
    except LakehouseError as error:
        print(f"{stage}: error: {error}", file=sys.stderr)
        return 2
    return 0
