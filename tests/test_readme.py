"""The README and every page of docs/ are tests: their examples run as written, in order, and every command
they name exists.

- ``python`` blocks of a page run top to bottom in one namespace (one per page), its working directory an
  empty folder of its own (so ``warehouse/...`` paths land there). Every page runs in one fresh process, one
  after the other, sharing the one Spark session ``get_spark()`` builds: pages are independent of each
  other (each makes the tables it reads), so only one Spark start is paid for all of them.
- ``sql`` blocks run statement by statement against the tables and views the blocks before them made.
- ``bash`` blocks: each ``lakehouse ...`` command parses with the real CLI parser, each ``make`` target
  exists in the Makefile, each ``spark-submit`` names a job under ``jobs/`` (``tests/test_spark_submit.py``
  runs one), and the command listing (``text`` block of docs/cli.md) lists exactly the CLI's subcommands.
  The commands of :data:`EXECUTED` also run, in the page's process after its python blocks, through the
  CLI's own ``main`` (the session is already up); a comment's ``"quoted"`` text is what the command prints
  (``...`` elides), and ``exit N`` its exit code.
- ``lakehouse ...`` commands named in the prose name a real subcommand and only options it has.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lakehouse
from lakehouse.cli import build_parser
from tests.child import child_env

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
# Commands a bash block may run besides lakehouse/make/spark-submit, and where the suite runs them.
_OTHER_COMMANDS = {
    "python -m pip wheel": "tests/test_spark_submit.py",
    "source .venv/bin/activate": "the environment `make` creates (tests/test_readme.py checks the Makefile)",
}
# Per page, the bash commands (by prefix) the harness runs after the page's python and sql blocks.
EXECUTED = {"docs/quality.md": ("lakehouse quality ",)}


def pages() -> list[Path]:
    """README.md, then every page of docs/ in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def fences(page: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block of ``page``, in order."""
    return _FENCE.findall(page.read_text())


def blocks(language: str, page: Path | None = None) -> list[str]:
    """The fenced blocks of ``language`` of ``page`` (default: of every page), in order."""
    return [body for p in ([page] if page else pages()) for lang, body in fences(p) if lang == language]


def _commands(body: str) -> list[tuple[str, str]]:
    """``(command, comment)`` of each line of a bash block (continuations joined)."""
    commands = []
    for line in body.replace("\\\n", " ").splitlines():
        command, _, comment = line.partition(" #")
        if command.strip() and not command.strip().startswith("#"):
            commands.append((command.strip(), comment.strip()))
    return commands


def bash_commands(page: Path | None = None) -> list[str]:
    """Every command line of the bash blocks of ``page`` (default: every page), comments dropped."""
    return [command for body in blocks("bash", page) for command, _ in _commands(body)]


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
    env = child_env(
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        LAKEHOUSE_MASTER="local[2]",
        LAKEHOUSE_SHUFFLE_PARTITIONS="2",
        LAKEHOUSE_DRIVER_MEMORY="2g",
        LAKEHOUSE_LOG_LEVEL="ERROR",
    )
    done = subprocess.run(
        [sys.executable, "-c", "from tests.test_readme import run_pages; run_pages()"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
    ran = [line.rsplit(" in ", 1)[0] for line in done.stdout.splitlines() if line.startswith("ran ")]
    expected = [
        f"ran {_name(page)}: {len(blocks('python', page))} python, {len(blocks('sql', page))} sql, "
        f"{len(_executed(page))} commands"
        for page in pages()
        if blocks("python", page) or blocks("sql", page) or _executed(page)
    ]
    assert ran == expected, done.stdout[-2000:]


def run_pages() -> None:
    """Run every page's python and sql blocks, then its :data:`EXECUTED` commands, in this process: each
    page in its own namespace and an empty folder of its own under the working directory."""
    top = Path.cwd()
    for page in pages():
        if not (blocks("python", page) or blocks("sql", page) or _executed(page)):
            continue
        folder = top / page.stem
        folder.mkdir()
        os.chdir(folder)
        started = time.monotonic()
        counts = _run_page(page)
        print(f"ran {_name(page)}: {counts} in {time.monotonic() - started:.1f} s", flush=True)
    os.chdir(top)


def _run_page(page: Path) -> str:
    from lakehouse import get_spark

    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran = {"python": 0, "sql": 0}
    with contextlib.redirect_stdout(io.StringIO()):
        for language, body in fences(page):
            if language == "python":
                exec(compile(body, _name(page), "exec"), namespace)
            elif language == "sql":
                for statement in _statements(body):
                    get_spark().sql(statement).collect()
            ran[language] = ran.get(language, 0) + 1
    for command, comment in _executed(page):
        _run_command(command, comment)
    return f"{ran['python']} python, {ran['sql']} sql, {len(_executed(page))} commands"


def _executed(page: Path) -> list[tuple[str, str]]:
    prefixes = EXECUTED.get(_name(page), ())
    commands = [c for body in blocks("bash", page) for c in _commands(body)]
    return [(command, note) for command, note in commands if command.startswith(prefixes)]


def _run_command(command: str, comment: str) -> None:
    """Run a ``lakehouse`` command through the CLI's ``main`` and check it against its comment."""
    from lakehouse.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(shlex.split(command)[1:])
    output = printed.getvalue()
    exit_code = re.search(r"\bexit (\d+)", comment)
    assert code == (int(exit_code.group(1)) if exit_code else 0), f"{command}: exit {code}\n{output}"
    for quoted in re.findall(r'"([^"]+)"', comment):
        pattern = ".*".join(re.escape(part.strip()) for part in quoted.split("..."))
        assert re.search(pattern, output), f"{command} did not print {quoted!r}:\n{output}"


def quickstart_commands() -> list[str]:
    """The README quickstart's ``lakehouse`` commands, to try after ``make demo``."""
    block = next(b for b in blocks("bash", README) if b.startswith("source .venv/bin/activate"))
    return [command for command, _ in _commands(block) if command.startswith("lakehouse ")]


def run_quickstart(warehouse: str) -> dict[str, str]:
    """Run the quickstart's commands through the CLI's ``main`` against the demo's ``warehouse`` (in this
    process: its Spark session is reused); returns what each printed. Each must exit 0 and print."""
    from lakehouse.cli import main

    printed = {}
    for command in quickstart_commands():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--set", f"warehouse={warehouse}", *shlex.split(command)[1:]])
        assert code == 0, f"{command}: exit {code}\n{out.getvalue()}"
        assert out.getvalue().strip(), command
        printed[command] = out.getvalue()
    return printed


def _statements(sql: str) -> list[str]:
    without_comments = "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in without_comments.split(";") if s.strip()]


def _subcommands() -> dict[str, object]:
    return build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_lakehouse_commands_exist_with_the_options_shown(page: Path) -> None:
    """Commands in bash blocks parse as written; commands named in the text (`lakehouse assign --root PATH
    [--standbys N]`) name a real subcommand and only options it has."""
    parser = build_parser()
    subcommands = _subcommands()
    for command in (c for c in bash_commands(page) if c.startswith("lakehouse ")):
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit as exit_:
            pytest.fail(f"{_name(page)}: command does not parse ({exit_.code}): {command}")
    for command in re.findall(r"`(lakehouse [^`]*)`", page.read_text()):
        words = re.findall(r"--?[\w-]+|[\w-]+", command)[1:]
        subcommand = next((w for w in words if not w.startswith("-")), None)
        if subcommand == "COMMAND":
            continue
        assert subcommand is None or subcommand in subcommands, command
        actions = [*parser._actions, *(subcommands[subcommand]._actions if subcommand else [])]
        known = {o for a in actions for o in a.option_strings}
        assert {w for w in words if w.startswith("-")} <= known, command


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_every_other_command_exists(page: Path) -> None:
    makefile = (ROOT / "Makefile").read_text()
    for command in bash_commands(page):
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
                f"{_name(page)}: command with no test: {command}"
            )
    if "source .venv/bin/activate" in bash_commands(page):
        assert "VENV := .venv" in makefile


def test_command_listing_matches_the_cli() -> None:
    listing = next(b for b in blocks("text", DOCS / "cli.md") if b.startswith("lakehouse "))
    listed = {line.split()[0] for line in listing.splitlines()[1:] if line.startswith("  ")}
    assert listed == set(_subcommands())


def test_pages_link_to_pages_that_exist() -> None:
    """Relative links between README.md and docs/ point at files that exist; every docs page is linked
    from the README."""
    for page in pages():
        for target in re.findall(r"\]\(([^)#:]+\.(?:md|png))(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{_name(page)} links to a missing {target}"
    linked = set(re.findall(r"\]\(docs/([^)#]+\.md)", README.read_text()))
    assert linked == {p.name for p in DOCS.glob("*.md")}


def test_docs_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """``make docs``' build (mkdocs.yml: every page of docs/ and the API reference from the docstrings),
    with ``--strict``: a broken link, a page missing from the nav or a docstring griffe cannot read fails."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert api.count('id="lakehouse.versioned.VersionedStore"') == 1
    documented = {anchor.rsplit(".", 1)[1] for anchor in re.findall(r'id="(lakehouse\.[\w.]+)"', api)}
    assert [n for n in lakehouse.__all__ if n not in documented and n != "__version__"] == []
    built = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    assert {p.stem for p in DOCS.glob("*.md") if p.stem != "index"} <= built
