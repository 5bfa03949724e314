"""Opening a path that holds no lakehouse table of the kind asked for is one clear line, for every store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse import AssignmentStore, Deduplicator, NotALakehouseTableError, VersionedStore
from tests.versioned.helpers import SCHEMA


@pytest.fixture(scope="module")
def paths(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One of each: nothing, a Parquet folder, a plain Delta table, a versioned store, a seen-ID index."""
    root = tmp_path_factory.mktemp("open")
    found = {name: str(root / name) for name in ("missing", "parquet", "delta", "store", "index")}
    spark.range(2).write.parquet(found["parquet"])
    spark.range(2).write.format("delta").save(found["delta"])
    VersionedStore.create(spark, found["store"], "k", SCHEMA, timedelta(hours=1))
    Deduplicator.create(spark, found["index"], by="id", interval=timedelta(minutes=1))
    return found


PROBLEMS = [
    ("missing", "nothing exists there"),
    ("parquet", "it is not a Delta table (no _delta_log)"),
    ("delta", "it is a Delta table lakehouse did not create"),
]
OPENERS = [
    (VersionedStore, "versioned_store", "index", "dedup_index"),
    (Deduplicator, "dedup_index", "store", "versioned_store"),
]


@pytest.mark.parametrize(("store", "kind", "other", "other_kind"), OPENERS)
@pytest.mark.parametrize(("held", "problem"), [*PROBLEMS, ("other", "")])
def test_open_of_what_is_not_that_store(
    spark: SparkSession,
    paths: dict[str, str],
    store,
    kind: str,
    other: str,
    other_kind: str,
    held: str,
    problem: str,
) -> None:
    path = paths[other if held == "other" else held]
    with pytest.raises(NotALakehouseTableError) as raised:
        store.open(spark, path)
    assert str(raised.value).splitlines() == [f"no {kind} at {path}: {problem or f'it is a {other_kind}'}"]


def test_assignment_store_open_on_other_tables(spark: SparkSession, paths: dict[str, str]) -> None:
    expected = r"^no assignment_store at .*: it is a versioned_store$"
    with pytest.raises(NotALakehouseTableError, match=expected):
        AssignmentStore.open(spark, None, subscriptions_path=paths["delta"], assignment_path=paths["store"])


def test_a_relative_path_is_named_as_resolved(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotALakehouseTableError, match=f"^no versioned_store at {tmp_path}/warehouse/none: "):
        VersionedStore.open(spark, "warehouse/none")
