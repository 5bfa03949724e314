"""The README is a test: its examples run as written, in order, and every command it names exists.

- ``python`` blocks run top to bottom in one namespace, with a temporary folder as the working directory
  (so ``warehouse/...`` paths land there) and the test session active (``get_spark()`` returns it).
- ``sql`` blocks run statement by statement against the tables and views the blocks before them made.
- ``bash`` blocks: each ``lakehouse ...`` command parses with the real CLI parser, each ``make`` target
  exists in the Makefile, each ``spark-submit`` names a job under ``jobs/`` (``tests/test_spark_submit.py``
  runs one), and the command listing (``text`` block under "The `lakehouse` command") lists exactly the
  CLI's subcommands.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import lakehouse
from lakehouse.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
# Commands a bash block may run besides lakehouse/make/spark-submit, and where the suite runs them.
_OTHER_COMMANDS = {
    "python -m pip wheel": "tests/test_spark_submit.py",
}


def blocks(language: str) -> list[str]:
    """The README's fenced blocks of ``language``, in order."""
    return [body for lang, body in _FENCE.findall(README.read_text()) if lang == language]


def bash_commands() -> list[str]:
    """Every command line of the README's bash blocks (continuations joined, comments dropped)."""
    commands = []
    for body in blocks("bash"):
        for line in body.replace("\\\n", " ").splitlines():
            command = line.split(" #", 1)[0].strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def test_every_public_name_imports() -> None:
    namespace: dict[str, object] = {}
    exec("from lakehouse import *", namespace)
    missing = [name for name in lakehouse.__all__ if name not in namespace and name != "__version__"]
    assert not missing
    for package in ("asof", "assignment", "dedup", "versioned"):
        module = __import__(f"lakehouse.{package}", fromlist=["__all__"])
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], package


def test_python_and_sql_blocks_run_as_written(spark: SparkSession, tmp_path: Path) -> None:
    python_blocks, sql_blocks = blocks("python"), blocks("sql")
    assert python_blocks and sql_blocks
    namespace: dict[str, object] = {"__name__": "__readme__"}
    ran_sql = 0
    with working_directory(tmp_path), contextlib.redirect_stdout(io.StringIO()):
        # Blocks run in README order: each sql block after the python blocks that precede it.
        for language, body in _FENCE.findall(README.read_text()):
            if language == "python":
                exec(compile(body, "README.md", "exec"), namespace)
            elif language == "sql":
                for statement in _statements(body):
                    spark.sql(statement).collect()
                    ran_sql += 1
    assert ran_sql >= len(sql_blocks)


def _statements(sql: str) -> list[str]:
    without_comments = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in without_comments.split(";") if s.strip()]


def test_lakehouse_commands_parse_with_the_options_shown() -> None:
    commands = [c for c in bash_commands() if c.startswith("lakehouse ")]
    assert commands
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit as exit_:
            pytest.fail(f"README command does not parse ({exit_.code}): {command}")


def test_every_other_command_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for command in bash_commands():
        words = shlex.split(command)
        if words[0] == "lakehouse":
            continue
        if words[0] == "make":
            assert re.search(rf"^{re.escape(words[1])}:", makefile, re.M), command
        elif words[0] == "spark-submit":
            job = next(w for w in words if w.endswith(".py"))
            assert (ROOT / job).is_file(), command
        else:
            assert any(command.startswith(known) for known in _OTHER_COMMANDS), (
                f"README command with no test: {command}"
            )


def test_command_listing_matches_the_cli() -> None:
    listing = next(b for b in blocks("text") if b.startswith("lakehouse "))
    listed = {line.split()[0] for line in listing.splitlines()[1:] if line.startswith("  ")}
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert listed == set(commands)
