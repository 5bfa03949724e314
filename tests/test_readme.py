"""The README is a test: its examples run as written, in order, and every command it names exists.

- ``python`` blocks run top to bottom in one namespace, in a fresh process whose working directory is a
  temporary folder (so ``warehouse/...`` paths land there; ``get_spark()`` builds the embedded session).
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
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_every_public_name_imports() -> None:
    namespace: dict[str, object] = {}
    exec("from lakehouse import *", namespace)
    missing = [name for name in lakehouse.__all__ if name not in namespace and name != "__version__"]
    assert not missing
    for package in ("asof", "assignment", "dedup", "versioned"):
        module = __import__(f"lakehouse.{package}", fromlist=["__all__"])
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], package


def test_python_and_sql_blocks_run_as_written(tmp_path: Path) -> None:
    """Run in a fresh process whose working directory is a temporary folder, as a user's first copy-paste
    would (Spark resolves relative paths against the JVM's working directory, so it must start there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE_", "PYSPARK_"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        LAKEHOUSE_MASTER="local[2]",
        LAKEHOUSE_SHUFFLE_PARTITIONS="2",
        LAKEHOUSE_DRIVER_MEMORY="2g",
        LAKEHOUSE_LOG_LEVEL="ERROR",
    )
    done = subprocess.run(
        [sys.executable, "-c", "from tests.test_readme import run_blocks; run_blocks()"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    ran = done.stdout.strip().splitlines()[-1]
    assert ran == f"README ran {len(blocks('python'))} python blocks, {len(blocks('sql'))} sql blocks", ran


def run_blocks() -> None:
    """Run the README's python and sql blocks in order, in this process (see the test above)."""
    from lakehouse import get_spark

    namespace: dict[str, object] = {"__name__": "__readme__"}
    ran = {"python": 0, "sql": 0}
    with contextlib.redirect_stdout(io.StringIO()):
        for language, body in _FENCE.findall(README.read_text()):
            if language == "python":
                exec(compile(body, "README.md", "exec"), namespace)
            elif language == "sql":
                for statement in _statements(body):
                    get_spark().sql(statement).collect()
            ran[language] = ran.get(language, 0) + 1
    print(f"README ran {ran['python']} python blocks, {ran['sql']} sql blocks")


def _statements(sql: str) -> list[str]:
    without_comments = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in without_comments.split(";") if s.strip()]


def test_lakehouse_commands_exist_with_the_options_shown() -> None:
    """Commands in bash blocks parse as written; commands named in the text (`lakehouse assign --root PATH
    [--standbys N]`) name a real subcommand and only options it has."""
    parser = build_parser()
    subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in (c for c in bash_commands() if c.startswith("lakehouse ")):
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit as exit_:
            pytest.fail(f"README command does not parse ({exit_.code}): {command}")
    named = re.findall(r"`(lakehouse [^`]*)`", README.read_text())
    assert named
    for command in named:
        words = re.findall(r"--?[\w-]+|[\w-]+", command)[1:]
        subcommand = next((w for w in words if not w.startswith("-")), None)
        if subcommand == "COMMAND":
            continue
        assert subcommand in subcommands, command
        known = {o for a in [*parser._actions, *subcommands[subcommand]._actions] for o in a.option_strings}
        assert {w for w in words if w.startswith("-")} <= known, command


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
