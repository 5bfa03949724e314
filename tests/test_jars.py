from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse import _jars
from lakehouse._jars import manifest_path, resolve_jars
from lakehouse.config import load_settings
from lakehouse.errors import JarResolutionError


def _ivy() -> Path:
    return Path(load_settings("local").ivy_cache).expanduser()


def test_resolved_jars_come_from_the_manifest_without_a_new_resolution(spark: SparkSession) -> None:
    manifest = manifest_path(_ivy(), ())
    before = manifest.stat().st_mtime
    jars = resolve_jars(_ivy())
    assert any("delta-spark_4.2_2.13" in jar for jar in jars)
    assert manifest.stat().st_mtime == before


@pytest.mark.slow
def test_unresolvable_package_is_a_one_line_error() -> None:
    missing = "org.example.lakehouse:does-not-exist:0.0.1"
    with pytest.raises(JarResolutionError) as raised:
        resolve_jars(_ivy(), [missing])
    message = str(raised.value)
    assert "\n" not in message
    assert "org.example.lakehouse#does-not-exist" in message or missing in message
    assert "lakehouse doctor" in message


@pytest.mark.slow
def test_first_starts_at_once_on_a_fresh_cache_resolve_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starts at once on an empty cache (two jobs, two test workers): Ivy's cache takes one writer, so
    one resolves and the other waits for it and reads its manifest."""
    resolutions = []
    real_run = subprocess.run

    def counted_run(*args, **kwargs):
        resolutions.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(_jars.subprocess, "run", counted_run)
    package = "org.slf4j:slf4j-api:2.0.17"
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: resolve_jars(tmp_path, [package], with_delta=False), range(2))
    assert first == second
    assert [Path(jar).name for jar in first] == ["org.slf4j_slf4j-api-2.0.17.jar"]
    assert len(resolutions) == 1
