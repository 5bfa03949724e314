from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lakehouse.config import load_settings
from lakehouse.errors import InvalidConfigError
from lakehouse.pipeline import load_pipeline, spec_from_values
from lakehouse.pipeline.job import main as job_main
from lakehouse.pipeline.order import stages_of


def test_spec_types_durations_lists_and_defaults(tmp_path: Path) -> None:
    spec = spec_from_values(
        "p", {"dedup_by": ["txn_id"], "dedup_interval": "10m", "grace": "90s"}, str(tmp_path)
    )
    assert spec.dedup_by == ("txn_id",)
    assert spec.dedup_interval == timedelta(minutes=10)
    assert spec.grace == timedelta(seconds=90)
    assert spec.root == f"{tmp_path}/p"
    assert spec.tables.checkpoint("ingest") == f"{tmp_path}/p/_checkpoints/ingest"


def test_overrides_are_text_like_the_cli(tmp_path: Path) -> None:
    spec = spec_from_values(
        "p", {}, str(tmp_path), {"dedup_by": "a,b", "quarantine": "false", "grace": "", "root": "r"}
    )
    assert (spec.dedup_by, spec.quarantine, spec.grace) == (("a", "b"), False, None)
    assert spec.root == str(Path("r").resolve())


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"dedup_intervall": "1h"}, "dedup_intervall"),
        ({"dedup_interval": "an hour"}, "dedup_interval"),
        ({"dedup_interval": 3600}, "dedup_interval"),
        ({"records_format": "csv"}, "records_format"),
        ({"quarantine": "yes"}, "quarantine"),
        ({"changelog": "x"}, "store_key"),
        ({"seal_min_rows": 0}, "seal_min_rows"),
    ],
)
def test_bad_spec_is_one_line_error_naming_the_key(values: dict[str, object], key: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        spec_from_values("p", values, "/w")
    assert raised.value.key == key
    assert "\n" not in str(raised.value)


def test_packaged_demo_pipeline_loads_and_unknown_pipeline_is_named(tmp_path: Path) -> None:
    settings = load_settings("local", environ={})
    spec = load_pipeline("demo", settings.warehouse)
    assert stages_of("all", spec) == ["materialize", "ingest", "enrich", "maintain", "assign"]
    with pytest.raises(InvalidConfigError, match="'nope' is not in"):
        load_pipeline("nope", settings.warehouse)


def test_job_fails_with_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert job_main("ingest", ["--pipeline", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ingest: error:") and "'nope'" in err
