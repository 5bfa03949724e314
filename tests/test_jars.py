from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

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
