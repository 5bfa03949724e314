"""The quality tests' warehouses: one with untouched tables, one with corrupted copies (one run each)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse.quality import QualityReport, run_quality
from lakehouse.versioned import VersionedStore
from tests.quality.helpers import (
    append_behind_the_back,
    at,
    build_warehouse,
    copy_table,
    drop_segment_files,
    duplicate_active,
    segment_holding,
    table_schema,
)

CHANGE_DATA = "_change_data"


@pytest.fixture(scope="package")
def clean(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, str], QualityReport]:
    root = tmp_path_factory.mktemp("quality_clean")
    paths = build_warehouse(spark, root)
    return paths, run_quality(spark, str(root))


@pytest.fixture(scope="package")
def broken(
    spark: SparkSession, clean: tuple[dict[str, str], QualityReport], tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, str], QualityReport]:
    """Copies of the clean tables, checked once (every one passes), then each corrupted once and checked
    again in one run: the versioned stores incrementally where that can be done.

    Besides the corruptions: ``rates_untouched`` is checked again unchanged, and ``rates_no_change_data``
    gets a put whose Change Data Feed files are then lost (as a VACUUM of them would).
    """
    paths, _ = clean
    root = tmp_path_factory.mktemp("quality_broken")
    rates = paths["rates"]
    schema = table_schema(spark, rates)
    names = ("overlap", "second_open", "dropped_file", "untouched", "no_change_data")
    copies = {name: copy_table(rates, root / f"rates_{name}") for name in names}
    assignment = copy_table(paths["assignment"], root / "assign")
    first = run_quality(spark, str(root))
    # EUR has [1500, 2200) and [2200, 3200): a version [1800, 2600) written beside them overlaps both.
    append_behind_the_back(
        spark, copies["overlap"], [("EUR", at(1800), at(2600), segment_holding(2600), False, 9.9)], schema
    )
    # GBP's latest version is its tombstone at 2500; another open version makes two.
    append_behind_the_back(spark, copies["second_open"], [("GBP", at(3000), None, None, False, 2.1)], schema)
    # The segment of valid_to T0 + 3.2 s holds EUR's [2200, 3200): without it EUR jumps from 2200 to 3200.
    assert drop_segment_files(copies["dropped_file"], segment_holding(3200))
    VersionedStore.open(spark, copies["no_change_data"]).put("EUR", 1.4, at(3500))  # one MERGE
    shutil.rmtree(Path(copies["no_change_data"]) / CHANGE_DATA)
    duplicated_task = duplicate_active(spark, f"{assignment}/assignment", generation=1)
    report = run_quality(spark, str(root))
    return {"duplicated_task": duplicated_task, "first_run": "\n".join(first.lines()[:-1])}, report
