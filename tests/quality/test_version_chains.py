"""The per-key aggregate that spares sound keys the window pass: it never certifies a broken key."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.quality._version_chains import uncertified_keys
from lakehouse.quality.versioned import versioned_violations
from lakehouse.versioned.segments import segment_column
from lakehouse.versioned.settings import StoreSettings
from tests.quality.helpers import EPOCH, at

SETTINGS = StoreSettings(("k",), ("v",), timedelta(seconds=1), timedelta(seconds=1))
HORIZON_US = (at(500) - EPOCH) // timedelta(microseconds=1)
# key -> its versions as (valid_from, valid_to or None) in ms after T0; the horizon is T0 + 0.5 s.
VERSIONS = {
    "chain": [(0, 1000), (1000, 2500), (2500, None)],
    "single": [(0, None)],
    "one_before_horizon": [(-1000, 1000), (1000, None)],
    "chain_before_horizon": [(-3000, -2000), (-2000, 1000), (1000, None)],  # certified: no gap anywhere
    "gap_before_horizon": [(-3000, -2000), (-1000, 1000), (1000, None)],  # sound, not certified
    "overlap": [(0, 1500), (1000, 2000), (2000, None)],
    "gap_after_horizon": [(0, 1000), (1200, None)],
    "two_open": [(0, None), (1000, None)],
    "none_open": [(0, 1000)],
    "same_valid_from": [(0, 1000), (0, 1000), (1000, None)],
    "ends_crossed": [(0, 2000), (1000, 1000), (2000, None)],  # the ends' multiset is right, bounds not
    "wrong_segment": [(0, 1000), (1000, None)],
}
SOUND = {"chain", "single", "one_before_horizon", "chain_before_horizon", "gap_before_horizon"}
BROKEN = set(VERSIONS) - SOUND


def test_only_sound_chains_are_certified_and_the_violations_are_the_windows(spark: SparkSession) -> None:
    rows = [
        (key, at(start), at(end) if end is not None else None)
        for key, versions in VERSIONS.items()
        for start, end in versions
    ]
    frame = spark.createDataFrame(rows, "k string, valid_from timestamp, valid_to timestamp")
    segment = segment_column("valid_to", SETTINGS.interval_us)
    table = frame.select(
        "k",
        "valid_from",
        "valid_to",
        F.when(F.col("k") == "wrong_segment", segment + 1).otherwise(segment).alias("segment"),
    )
    flagged = F.col("k") == "wrong_segment"
    uncertified = {row["k"] for row in uncertified_keys(table, ["k"], flagged).collect()}
    assert uncertified == BROKEN | {"gap_before_horizon"}
    violations = versioned_violations(table, SETTINGS, None, HORIZON_US)
    assert {row["key"] for row in violations.collect()} == BROKEN
