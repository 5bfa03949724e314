from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.paths import resolve_path


@pytest.mark.parametrize(
    "uri",
    ["s3a://bucket/lake/rates", "abfss://c@acct.dfs.core.windows.net/x", "file:/tmp/x", "file:///tmp/x"],
)
def test_uris_pass_through_untouched(uri: str) -> None:
    assert resolve_path(uri) == uri


def test_relative_paths_resolve_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_path("warehouse/rates") == str(tmp_path.resolve() / "warehouse" / "rates")
    assert resolve_path(str(tmp_path / "abs")) == str(tmp_path / "abs")
    assert resolve_path("~/x") == str(Path.home() / "x")
