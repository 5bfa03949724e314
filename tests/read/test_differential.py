"""delta-rs reads (``lakehouse.read``) equal Spark reads (``VersionedStore``) row for row, on random stores
built through the library: out-of-order versions, tombstones, several partitions, pending rows before and
after seals (whose MERGEs write deletion vectors), expiry."""

from __future__ import annotations

import functools
from datetime import datetime

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import lakehouse.read
from tests.versioned.helpers import at, batch_frame, create_store
from tests.versioned.test_differential import _split, _with_offsets

KEYS = ("a", "b")
record_strategy = st.tuples(
    st.sampled_from(KEYS), st.sampled_from((None, "x", "y")), st.integers(0, 30), st.integers(0, 1)
)
store_strategy = st.fixed_dictionaries(
    {
        "records": st.lists(record_strategy, min_size=2, max_size=10),
        "cuts": st.lists(st.integers(1, 9), min_size=1, max_size=2),
        "seals": st.lists(st.booleans(), min_size=3, max_size=3),
        "retention": st.sampled_from([0, 6, 40]),
        "expire": st.booleans(),
        "probes": st.lists(st.integers(-1, 32), min_size=2, max_size=3, unique=True),
    }
)


@pytest.mark.slow
@settings(
    max_examples=1,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each example costs Spark jobs
)
@given(case=store_strategy)
@example(  # pending versions before and after a seal, a late one inside sealed history, a tombstone, expiry
    case={
        "records": [
            *[("a", "x", 0, 0), ("a", "y", 10, 1), ("b", "x", 4, 0), ("a", None, 20, 0)],
            *[("a", "x", 5, 1), ("b", "y", 25, 1), ("a", "y", 28, 0)],
        ],
        "cuts": [4],
        "seals": [True, False, False],
        "retention": 6,
        "expire": True,
        "probes": [7, 21, 30],
    }
)
def test_delta_rs_reads_equal_spark_reads(spark: SparkSession, tmp_path_factory, case: dict) -> None:
    path = str(tmp_path_factory.mktemp("store") / "table")
    store = create_store(spark, path, case["retention"], 4)
    for batch, seal in zip(_split(_with_offsets(case["records"]), case["cuts"]), case["seals"], strict=False):
        store.put_all(batch_frame(spark, batch))
        if seal:
            store.seal()
    if case["expire"]:
        store.expire()
    reader = lakehouse.read.store(path)
    assert reader.version == store.state_version()[0]
    assert reader.stream_time == store.stream_time
    # Spark's reads, collected in two jobs: every version, and every as_of(t) with tombstones.
    history = _spark_rows(store.history().drop("segment"))
    probes = [
        store.as_of(at(ms), include_tombstones=True).withColumn("probe", F.lit(ms)) for ms in case["probes"]
    ]
    as_of = _spark_rows(functools.reduce(DataFrame.unionByName, probes).drop("segment"))
    assert _rows(reader.history()) == history
    # The one definition other engines get (``store sql-view``): Spark runs it to the same versions.
    ansi = reader.sql(f"delta.`{path}`", region=False).replace('"', "`")
    assert _spark_rows(spark.sql(ansi)) == history
    for key in KEYS:
        assert _rows(reader.history(key)) == [r for r in history if r[0] == key]
        latest = [r for r in history if r[0] == key and r[2] is None and not r[3]]
        assert _record(key, reader.get(key)) == (latest[0] if latest else None)
    for ms in case["probes"]:
        t, expected = at(ms), [r[:-1] for r in as_of if r[-1] == ms]
        assert _rows(reader.as_of(t, include_tombstones=True)) == expected
        assert _rows(reader.as_of(t)) == [r for r in expected if not r[3]]
        for key in KEYS:
            found = [r for r in expected if r[0] == key and not r[3]]
            assert _record(key, reader.get(key, as_of=t)) == (found[0] if found else None), (key, ms)
    if case["expire"]:  # the library's own get, once: the same answers
        assert reader.get("a", as_of=at(case["probes"][0])) == store.get("a", as_of=at(case["probes"][0]))


def _record(key: str, record) -> tuple | None:
    """A reader's record of ``key`` as a row of :func:`_rows`."""
    if record is None:
        return None
    return (key, _utc(record.valid_from), _utc(record.valid_to), False, record.value["v"])


def _rows(table) -> list[tuple]:
    return sorted(tuple(_utc(v) for v in row.values()) for row in table.to_pylist())


def _spark_rows(frame) -> list[tuple]:
    return sorted(tuple(_utc(v) for v in row) for row in frame.collect())


def _utc(value):
    """Times compared as instants (Spark returns them naive, in this process's zone)."""
    return value.timestamp() if isinstance(value, datetime) else value
