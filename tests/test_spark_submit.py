"""The README's cluster recipe, run for real: spark-submit's session and confs win over lakehouse's."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.config import load_settings
from tests.test_readme import ROOT, bash_commands

pytestmark = pytest.mark.slow
_BIN = Path(sys.executable).parent


def _readme_command(starts: str, names: str = "") -> list[str]:
    """The README's first bash command that starts with ``starts`` and mentions ``names``."""
    return shlex.split(next(c for c in bash_commands() if c.startswith(starts) and names in c))


def _submit(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE_", "PYSPARK_"))}
    env["PATH"] = f"{_BIN}{os.pathsep}{env.get('PATH', '')}"  # spark-submit finds pyspark's SPARK_HOME
    env["LAKEHOUSE_WAREHOUSE"] = str(tmp_path / "warehouse")
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_readme_recipe_keeps_the_submitted_master_and_confs(tmp_path: Path) -> None:
    wheel = _readme_command("python -m pip wheel")
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, *wheel[1:-3], "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    submit = _readme_command("spark-submit", "jobs/doctor.py")
    assert submit[-1].endswith("jobs/doctor.py")
    py_files = submit.index("--py-files") + 1
    submit[py_files] = str(next(dist.glob("lakehouse-*.whl")))
    ivy = str(Path(load_settings().ivy_cache).expanduser())
    done = _submit(
        [
            submit[0],
            "--master",
            "local[1]",
            "--conf",
            "spark.sql.shuffle.partitions=3",
            "--conf",
            f"spark.jars.ivy={ivy}",
            *submit[1:],
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\s*master: local\[1\]$", done.stdout, re.M), done.stdout
    assert re.search(r"^\s*shuffle partitions: 3$", done.stdout, re.M), done.stdout
    assert "OK: Spark, Delta Lake and Java work together" in done.stdout
    # The recipe's log configuration applies: Spark's INFO lines (hundreds without it) stay out.
    info = re.findall(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO .*$", done.stdout + done.stderr, re.M)
    assert not info, info[:5]


def test_submit_without_delta_is_one_line_naming_what_to_add(tmp_path: Path) -> None:
    done = _submit(["spark-submit", "--master", "local[1]", "jobs/doctor.py"], tmp_path)
    assert done.returncode == 2
    # spark-submit's PythonRunner merges the Python process's stderr into its stdout.
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.startswith("lakehouse: error:")]
    assert len(errors) == 1, output[-3000:]
    assert "--packages io.delta:delta-spark_4.2_2.13:4.4.0" in errors[0]
    assert "Traceback" not in output
