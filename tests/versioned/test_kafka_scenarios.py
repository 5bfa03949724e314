"""Kafka's RocksDBVersionedStoreTest scenarios: through the reference model, put_all batches, and put/get."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from lakehouse.versioned import PutStatus
from tests.reference.versioned import HISTORY, LATEST, NOT_PUT, VersionedStoreModel
from tests.versioned.helpers import assert_matches_model, at, batch_frame, create_store, ms_of
from tests.versioned.kafka_scenarios import SCENARIOS, Delete, Get, Put, Scenario

_IDS = [s.name for s in SCENARIOS]


def _expected_put(expect: str | int) -> tuple[str, int | None]:
    if expect in (LATEST, NOT_PUT):
        return str(expect), None
    return HISTORY, int(expect)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=_IDS)
def test_reference_model_reproduces_kafka(scenario: Scenario) -> None:
    model = VersionedStoreModel(scenario.history_retention)
    for op in scenario.ops:
        if isinstance(op, Put):
            put = model.put(op.key, op.value, op.ts)
            assert (put.status, put.valid_to) == _expected_put(op.expect), op
        elif isinstance(op, Get):
            found = model.get(op.key, op.as_of)
            got = None if found is None else (found.value, found.valid_from, found.valid_to)
            assert got == op.expect, op
        else:
            found = model.delete(op.key, op.ts)
            assert (None if found is None else (found.value, found.valid_from)) == op.expect, op


def _batches(scenario: Scenario) -> list[tuple[list[Put | Delete], list[Get]]]:
    """The scenario's writes, one batch per run of writes, each with the reads that follow it."""
    steps: list[tuple[list[Put | Delete], list[Get]]] = [([], [])]
    for op in scenario.ops:
        if isinstance(op, Get):
            steps[-1][1].append(op)
        else:
            if steps[-1][1]:
                steps.append(([], []))
            steps[-1][0].append(op)
    return steps


def _got(store, op: Get) -> tuple | None:
    found = store.get(op.key, None if op.as_of is None else at(op.as_of))
    return None if found is None else (found.value["v"], ms_of(found.valid_from), ms_of(found.valid_to))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=_IDS)
def test_scenario_through_put_all_batches(spark: SparkSession, tmp_path, scenario: Scenario) -> None:
    """Each run of writes is one put_all batch; every read of the scenario then goes through ``get``."""
    store = create_store(
        spark, str(tmp_path / "store"), scenario.history_retention, scenario.segment_interval
    )
    model = VersionedStoreModel(scenario.history_retention)
    for offset0, (batch, reads) in enumerate(_batches(scenario)):
        records = [
            (op.key, op.value if isinstance(op, Put) else None, op.ts, 0, offset0 * 1000 + i)
            for i, op in enumerate(batch)
        ]
        if records:
            outcomes = [model.put(key, value, ts) for key, value, ts, _, _ in records]
            result = store.put_all(batch_frame(spark, records), batch_id=offset0)
            assert result.dropped == sum(o.status == NOT_PUT for o in outcomes)
            assert ms_of(result.stream_time) == model.stream_time
            assert_matches_model(store, model)
        for op in reads:
            assert _got(store, op) == op.expect, op


#: One Delta commit per put makes this variant the suite's slowest, so it runs on the scenarios that cover
#: each outcome of a single write once (every scenario's semantics are checked through the model and
#: put_all batches above): out-of-order puts into history, a tombstone put into history in a new segment,
#: a put falling through to an older segment as the latest, a put not put (expired), deletes of a live and
#: an expired version, and an expired read answered by the latest version.
_SINGLE_NAMES = (
    "shouldPutOlderWithNonNullLatest",
    "shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo",
    "shouldFallThroughToExistingOlderSegmentAsLatestDuringPut",
    "shouldNotPutExpired",
    "shouldNotDeleteExpired",
    "shouldGetExpiredIfLatestValue",
)
_SINGLE = [next(s for s in SCENARIOS if s.name == name) for name in _SINGLE_NAMES]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", _SINGLE, ids=[s.name for s in _SINGLE])
def test_scenario_through_put_get_delete(spark: SparkSession, tmp_path, scenario: Scenario) -> None:
    """Each write is one ``put`` or ``delete`` (its status and bounds checked), each read a ``get``."""
    store = create_store(
        spark, str(tmp_path / "store"), scenario.history_retention, scenario.segment_interval
    )
    for op in scenario.ops:
        if isinstance(op, Put):
            put = store.put(op.key, op.value, at(op.ts))
            status = {PutStatus.LATEST: LATEST, PutStatus.NOT_PUT: NOT_PUT, PutStatus.HISTORY: HISTORY}[
                put.status
            ]
            assert (status, ms_of(put.valid_to)) == _expected_put(op.expect), op
        elif isinstance(op, Get):
            assert _got(store, op) == op.expect, op
        else:
            found = store.delete(op.key, at(op.ts))
            assert (None if found is None else (found.value["v"], ms_of(found.valid_from))) == op.expect, op
