"""The quality tests' warehouses: one with untouched tables, one with corrupted copies (one run each)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakehouse.quality import QualityReport, run_quality
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
    """Copies of the clean tables, each corrupted once, checked in one run."""
    paths, _ = clean
    root = tmp_path_factory.mktemp("quality_broken")
    rates = paths["rates"]
    schema = table_schema(spark, rates)
    overlap = copy_table(rates, root / "rates_overlap")
    # EUR has [1500, 2200) and [2200, 3200): a version [1800, 2600) written beside them overlaps both.
    append_behind_the_back(
        spark, overlap, [("EUR", at(1800), at(2600), segment_holding(2600), False, 9.9)], schema
    )
    second_open = copy_table(rates, root / "rates_second_open")
    # GBP's latest version is its tombstone at 2500; another open version makes two.
    append_behind_the_back(spark, second_open, [("GBP", at(3000), None, None, False, 2.1)], schema)
    dropped = copy_table(rates, root / "rates_dropped_file")
    # The segment of valid_to T0 + 3.2 s holds EUR's [2200, 3200): without it EUR jumps from 2200 to 3200.
    assert drop_segment_files(dropped, segment_holding(3200))
    assignment = copy_table(paths["assignment"], root / "assign")
    duplicated_task = duplicate_active(spark, f"{assignment}/assignment", generation=1)
    report = run_quality(spark, str(root))
    return {"duplicated_task": duplicated_task}, report
