"""Random histories and streams: every asof_join row against ``VersionedStoreModel.get`` and pandas."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakehouse.asof import asof_join_with_stats
from lakehouse.versioned import VersionedStore
from tests.reference.versioned import VersionedStoreModel

KEYS = (("x", "a"), ("x", "b"), ("y", "a"))
MISSING = ("y", "z")
SCHEMA = T.StructType([T.StructField(c, T.StringType()) for c in ("r", "k", "v")])
puts_strategy = st.lists(
    st.tuples(st.sampled_from(KEYS), st.sampled_from([None, "p", "q", "s"]), st.integers(0, 30)),
    min_size=1,
    max_size=12,
)
events_strategy = st.lists(st.tuples(st.sampled_from([*KEYS, MISSING]), st.integers(-3, 33)), max_size=14)
case_strategy = st.fixed_dictionaries(
    {
        "puts": puts_strategy,
        "events": events_strategy,
        "retention": st.sampled_from([0, 6, 100]),
        "interval": st.sampled_from([2, 7]),
        "bucket": st.sampled_from([None, 1, 4]),
        "hot_events": st.sampled_from([1, 3, 10_000]),
    }
)


def _model_of(case: dict) -> VersionedStoreModel:
    model = VersionedStoreModel(case["retention"])
    for key, value, ms in case["puts"]:
        model.put(key, value, ms)
    return model


def _pandas_oracle(model: VersionedStoreModel, events: list) -> dict[int, tuple | None]:
    """``pandas.merge_asof`` (backward, exact matches allowed) over the model's history.

    Mapped to our semantics: a tombstone row gives no match; expired lookups are left out (the caller
    compares them with the model only).
    """
    history = pd.DataFrame(
        [(f"{r}/{k}", start, value) for (r, k), start, _, value in model.history()], columns=["key", "t", "v"]
    )
    stream = pd.DataFrame(
        [(i, f"{r}/{k}", ms) for i, ((r, k), ms) in enumerate(events)], columns=["id", "key", "t"]
    )
    if stream.empty or history.empty:
        return {}
    merged = pd.merge_asof(
        stream.sort_values("t"),
        history.sort_values("t").rename(columns={"t": "vf"}),
        left_on="t",
        right_on="vf",
        by="key",
        direction="backward",
    )
    found = {}
    for row in merged.itertuples():
        matched = not pd.isna(row.v)
        found[int(row.id)] = (row.v, int(row.vf)) if matched else None
    return found


@pytest.mark.slow
# No shrinking: each example costs seconds of Spark; the failing case is printed whole instead.
@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=case_strategy)
def test_asof_join_matches_the_model_for_random_sequences(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, case: dict
) -> None:
    path = str(tmp_path_factory.mktemp("asof_diff") / "store")
    store = VersionedStore.create(
        spark,
        path,
        ("r", "k"),
        SCHEMA,
        timedelta(milliseconds=case["retention"]),
        timedelta(milliseconds=case["interval"]),
    )
    puts = [(r, k, v, ms, seq) for seq, ((r, k), v, ms) in enumerate(case["puts"])]
    batch = spark.createDataFrame(puts, "r string, k string, v string, ms long, seq long")
    store.put_all(batch.withColumn("timestamp", F.timestamp_millis("ms")), sequence_by="seq")
    model = _model_of(case)
    rows = [(i, r, k, ms) for i, ((r, k), ms) in enumerate(case["events"])]
    events = spark.createDataFrame(rows, "id long, r string, k string, ms long")
    bucket = None if case["bucket"] is None else timedelta(milliseconds=case["bucket"])
    result = asof_join_with_stats(
        events.withColumn("timestamp", F.timestamp_millis("ms")),
        store,
        bucket=bucket,
        hot_events=case["hot_events"],
    )
    out = result.frame.select("id", "v", F.unix_millis("valid_from").alias("from_ms")).collect()
    found = {r["id"]: (None if r["from_ms"] is None else (r["v"], r["from_ms"])) for r in out}
    assert len(found) == len(out) == len(rows)
    for i, ((r, k), ms) in enumerate(case["events"]):
        version = model.get((r, k), ms)
        assert found[i] == (None if version is None else (version.value, version.valid_from)), (i, r, k, ms)
    horizon = model.stream_time - case["retention"]
    expired = [i for i, (_, ms) in enumerate(case["events"]) if ms < horizon]
    assert result.stats.expired_lookups == len(expired)
    oracle = _pandas_oracle(model, case["events"])
    assert {i: v for i, v in oracle.items() if i not in expired} == {
        i: v for i, v in found.items() if i not in expired
    }
