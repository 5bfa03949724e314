"""Mistakes a new user makes, driven through the real ``lakehouse`` command in a subprocess.

Each must end in one line on stderr naming the mistake, exit code 2 (1 for an unexpected error) and no
traceback, before Spark starts: the subprocess reports whether a JVM was started (structural, not a timed
assertion); the time each took is printed (``pytest -s`` or ``-rP`` shows it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Runs the console script's main() and writes to the file $JVM_REPORT whether a JVM was started.
_DRIVER = """
import os, sys
from lakehouse.cli import main
try:
    code = main(sys.argv[1:])
finally:
    from pyspark import SparkContext
    with open(os.environ["JVM_REPORT"], "w") as report:
        report.write(str(SparkContext._gateway is not None))
sys.exit(code)
"""


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    jvm_started: bool
    seconds: float


def lakehouse(cwd: Path, *args: str, stdin: str | None = None) -> Outcome:
    """Run ``lakehouse ARGS`` in ``cwd`` (no terminal), timing it."""
    report = cwd / "jvm-report"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE_", "PYSPARK_GATEWAY"))}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        input=stdin or "",
        env={**env, "JVM_REPORT": str(report)},
    )
    seconds = time.monotonic() - start
    print(f"lakehouse {' '.join(args)}: exit {done.returncode} after {seconds:.2f} s")
    return Outcome(done.returncode, done.stdout, done.stderr, report.read_text() == "True", seconds)


def assert_one_line(outcome: Outcome, code: int, *named: str) -> None:
    assert outcome.code == code, outcome.stderr
    assert outcome.stderr.count("\n") == 1, outcome.stderr
    assert outcome.stderr.startswith("lakehouse: error: "), outcome.stderr
    for text in named:
        assert text in outcome.stderr
    assert "Traceback" not in outcome.stderr and not outcome.jvm_started


def free_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("profile", ["nope", "pipeline"])
def test_unknown_profile_lists_the_profiles_only(tmp_path: Path, profile: str) -> None:
    outcome = lakehouse(tmp_path, "--profile", profile, "tables")
    assert_one_line(outcome, 2, f"{profile!r} is not a profile", "(profiles: cluster, local, s3)")
    assert "'pipeline']" not in outcome.stderr


def test_a_conf_that_is_not_a_spark_conf_is_refused(tmp_path: Path) -> None:
    outcome = lakehouse(tmp_path, "--conf", "foo=bar", "demo")
    assert_one_line(outcome, 2, "--conf foo: not a Spark conf")


def test_run_before_anything_landed_names_the_folder(tmp_path: Path) -> None:
    outcome = lakehouse(tmp_path, "run", "all", "--pipeline", "demo", "--json")
    landing = tmp_path.resolve() / "warehouse" / "demo" / "landing" / "rate_updates"
    assert_one_line(outcome, 2, f"nothing has landed in {landing} yet", "`lakehouse demo`")
    assert "configuration key" not in outcome.stderr and outcome.stdout == ""


def test_no_broker_is_named_before_spark_starts(tmp_path: Path) -> None:
    server = f"127.0.0.1:{free_port()}"
    no_broker = f"no broker at {server}; run lakehouse kafka start"
    produce = lakehouse(tmp_path, "kafka", "produce-demo", "--bootstrap-servers", server)
    assert_one_line(produce, 2, no_broker)
    run = lakehouse(
        tmp_path, "run", "all", "--pipeline", "demo_kafka", "--spec", f"kafka_bootstrap_servers={server}"
    )
    assert_one_line(run, 2, no_broker)


def test_clean_and_demo_fresh_without_a_terminal_need_yes(tmp_path: Path) -> None:
    root = tmp_path / "warehouse" / "demo"
    (root / "store").mkdir(parents=True)
    refused = lakehouse(tmp_path, "clean", "--pipeline", "demo")
    assert_one_line(refused, 2, f"not deleting {root.resolve()} without --yes")
    assert root.is_dir()
    done = lakehouse(tmp_path, "clean", "--pipeline", "demo", "--yes")
    assert done.code == 0 and not root.exists() and not done.jvm_started
    assert done.stderr == f"deleted {root.resolve()}\n"
    (root / "store").mkdir(parents=True)
    fresh = lakehouse(tmp_path, "demo", "--fresh")  # its first line says what it is about to do
    announced, refused_line = fresh.stderr.splitlines()
    assert announced.startswith("lakehouse demo: ")
    assert_one_line(Outcome(**{**vars(fresh), "stderr": refused_line + "\n"}), 2, "without --yes")
    assert root.is_dir()


def test_an_unexpected_error_is_one_line_naming_it_and_verbose_shows_it(tmp_path: Path) -> None:
    (tmp_path / "warehouse").mkdir()
    (tmp_path / "warehouse" / "demo").write_text("a file where the pipeline's folder should be")
    outcome = lakehouse(tmp_path, "clean", "--pipeline", "demo", "--yes")
    assert outcome.code == 1
    error = outcome.stderr.splitlines()[-1]
    assert error.startswith("lakehouse: error: NotADirectoryError: ") and "--verbose" in error
    assert "Traceback" not in outcome.stderr
    verbose = lakehouse(tmp_path, "--verbose", "clean", "--pipeline", "demo", "--yes")
    assert verbose.code == 1 and "Traceback" in verbose.stderr


def test_verbose_works_before_and_after_the_command(tmp_path: Path) -> None:
    from lakehouse.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["--verbose", "tables"]).verbose
    assert parser.parse_args(["tables", "--verbose"]).verbose
    assert not parser.parse_args(["tables"]).verbose


def test_every_command_parses_its_arguments_without_importing_spark_or_arrow() -> None:
    """The first line comes before the heavy imports: parsing any command's arguments (and the settings)
    imports no Spark, Delta, pyarrow, delta-rs or Great Expectations (structural, not timed)."""
    probe = """
import sys
from lakehouse.cli import build_parser
from lakehouse.config import load_settings
for argv in (["tables"], ["store", "get", "s", "k"], ["run", "all", "--pipeline", "demo"], ["demo"],
             ["quality"], ["assign", "--root", "x"], ["failover-drill"], ["kafka", "start"], ["doctor"]):
    build_parser().parse_args(argv)
load_settings("local")
heavy = ("pyspark", "py4j", "delta", "pyarrow", "deltalake", "great_expectations", "pandas")
print(sorted(m for m in heavy if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
