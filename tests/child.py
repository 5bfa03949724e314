"""The environment of a Spark process a test starts: a job, the CLI, the README's pages."""

from __future__ import annotations

import os

#: Tiny test data: compiling generated code for each query costs more than interpreting it (measured: 16%
#: less time over the versioned, dedup and as-of tests; the demo in a fresh process 12%). Spark's own tests
#: run both modes; the second is an internal conf, and nothing a user runs sets either.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def child_env(**variables: str) -> dict[str, str]:
    """This process's environment without its ``LAKEHOUSE_*`` and ``PYSPARK_*`` variables (the child builds
    its own session from its own settings), with :data:`INTERPRETED` as the defaults of the JVM it launches
    (``PYSPARK_SUBMIT_ARGS``: any conf the child sets wins) and ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE_", "PYSPARK_"))}
    confs = " ".join(f"--conf {key}={value}" for key, value in INTERPRETED.items())
    env["PYSPARK_SUBMIT_ARGS"] = f"{confs} pyspark-shell"
    env.update(variables)
    return env
