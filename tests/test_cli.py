from __future__ import annotations

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
