from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.cli import build_parser, main


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"version", "doctor", "demo", "assign"} <= set(commands)
    for name in [*commands, None]:
        with pytest.raises(SystemExit) as raised:
            main([name, "--help"] if name else ["--help"])
        assert raised.value.code == 0
        assert "usage: lakehouse" in capsys.readouterr().out


def test_version_prints_the_pinned_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    out = capsys.readouterr().out
    assert "pyspark: 4.2.0" in out
    assert "delta-spark: 4.4" in out


def test_bad_setting_is_one_line_error_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", "shuffle_partitions=lots", "version"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "shuffle_partitions" in err


def test_doctor_reports_ok(spark: SparkSession, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "java: 17" in out
    assert out.rstrip().endswith("OK: Spark, Delta Lake and Java work together")


BAD_CONFIGS = {
    "missing file": (None, "does not exist"),
    "bad TOML": ("[local\nmaster = 'local[1]'\n", "is not valid TOML"),
    "wrong type": ("[local]\nshuffle_partitions = 'many'\n", "shuffle_partitions"),
    "unknown key": ("[local]\nshuffle_partitons = 4\n", "shuffle_partitons"),
    "unknown profile": ("[other]\nmaster = 'local[1]'\n", "profile"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_config_errors_are_one_line_with_exit_2(case: str, tmp_path: Path) -> None:
    text, named = BAD_CONFIGS[case]
    config = tmp_path / "lakehouse.toml"
    if text is not None:
        config.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "lakehouse", "--config", str(config), "version"],
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("LAKEHOUSE_")},
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("lakehouse: error: ")
    assert named in done.stderr
    assert "Traceback" not in done.stderr
