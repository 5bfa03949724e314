"""Which suite checks a table: chosen by the table's own ``lakehouse.kind`` property."""

from __future__ import annotations

import posixpath

from pyspark.sql import DataFrame, SparkSession

from lakehouse import delta_ops
from lakehouse.assignment.store import config_from_properties
from lakehouse.dedup.deduplicator import APP_ID as DEDUP_APP_ID
from lakehouse.dedup.deduplicator import Deduplicator
from lakehouse.dedup.settings import DedupSettings
from lakehouse.errors import InvalidInputError
from lakehouse.quality import assignment, dedup, enriched, versioned
from lakehouse.quality._incremental import changed_keys
from lakehouse.quality.rules import TableCheck, no_violations
from lakehouse.quality.versioned import versioned_violations
from lakehouse.versioned.segments import segments_from
from lakehouse.versioned.settings import StoreSettings
from lakehouse.versioned.store import APP_ID as VERSIONED_APP_ID
from lakehouse.versioned.store import VersionedStore

KIND_PROPERTY = f"{delta_ops.PROPERTY_PREFIX}kind"
SUBSCRIPTIONS_TABLE = "subscriptions"
#: Kinds with a suite; other lakehouse tables (a dedup quarantine, the quality results) are skipped.
CHECKED_KINDS = (versioned.KIND, dedup.KIND, assignment.KIND, enriched.KIND)


def table_kind(spark: SparkSession, path: str) -> str | None:
    """The table's ``lakehouse.kind`` property (None for a table lakehouse did not create)."""
    return delta_ops.table_properties(spark, path).get(KIND_PROPERTY)


def check_table(spark: SparkSession, path: str, version: int, since: int | None = None) -> TableCheck:
    """The rules of the table at ``path`` and its violations as of ``version`` (lazy).

    ``since``: the version of an earlier check of this table in which every expectation passed. A
    versioned store is then checked incrementally: only the keys changed since
    (:mod:`lakehouse.quality._incremental`), with the whole table's violations as the result; when that
    cannot be done, or for other kinds, the whole table is checked (the check's ``scope`` says which).

    Raises:
        InvalidInputError: the table's kind has no suite.
    """
    properties = delta_ops.table_properties(spark, path)
    kind = properties.get(KIND_PROPERTY)
    table = spark.read.format("delta").option("versionAsOf", version).load(path)
    if kind == versioned.KIND:
        return _versioned(spark, path, version, table, properties, since)
    if kind == dedup.KIND:
        return _dedup(spark, path, version, table, properties)
    if kind == assignment.KIND:
        return _assignment(spark, path, table, properties)
    if kind == enriched.KIND:
        return TableCheck(
            kind, enriched.enriched_rules(), enriched.enriched_violations(table, path, properties)
        )
    raise InvalidInputError(f"no quality suite for {path}: its lakehouse.kind is {kind!r}")


def _versioned(
    spark: SparkSession,
    path: str,
    version: int,
    table: DataFrame,
    properties: dict[str, str],
    since: int | None,
) -> TableCheck:
    settings = StoreSettings.from_properties(path, properties)
    bound = _int_or_none(delta_ops.last_drop_bound(spark, path, VERSIONED_APP_ID, version))
    store = VersionedStore(spark, path, settings, table.schema)
    horizon_us = store.horizon_us_at(version)
    table = store.versions(version)  # the versions, pending ones resolved, as every read sees them
    kind, rules = versioned.KIND, versioned.versioned_rules(bound)
    changes = (
        None
        if since is None
        else changed_keys(spark, path, settings, since, version, bound, store.horizon_us_at(since))
    )
    if changes is None or changes.full_because is not None:
        scope = "full" if changes is None else f"full: {changes.full_because}"
        return TableCheck(kind, rules, versioned_violations(table, settings, bound, horizon_us), scope)
    scope = f"incremental since version {since}: {changes.count:,} keys"
    if changes.keys is None or changes.count == 0:
        return TableCheck(kind, rules, no_violations(spark), scope)
    if changes.from_segment is not None:  # nothing pending: the versions are the table's rows
        table = table.where(segments_from(changes.from_segment * settings.interval_us, settings.interval_us))
    changed = versioned.rows_of_keys(table, changes.keys, list(settings.keys), changes.count)
    return TableCheck(kind, rules, versioned_violations(changed, settings, bound, horizon_us), scope)


def _dedup(
    spark: SparkSession, path: str, version: int, table: DataFrame, properties: dict[str, str]
) -> TableCheck:
    settings = DedupSettings.from_properties(path, properties)
    bound = _int_or_none(delta_ops.last_drop_bound(spark, path, DEDUP_APP_ID, version))
    stream_times = Deduplicator(spark, path, settings).stream_times()
    return TableCheck(
        dedup.KIND, dedup.dedup_rules(bound), dedup.dedup_violations(table, settings, stream_times, bound)
    )


def _assignment(spark: SparkSession, path: str, table: DataFrame, properties: dict[str, str]) -> TableCheck:
    if "process_id" in table.columns:
        return TableCheck(
            "assignment_subscriptions",
            assignment.subscription_rules(),
            assignment.subscription_violations(table),
        )
    config = config_from_properties(path, properties)
    subscriptions_path = posixpath.join(posixpath.dirname(path.rstrip("/")), SUBSCRIPTIONS_TABLE)
    subscriptions = spark.read.format("delta").load(subscriptions_path)
    return TableCheck(
        "assignment",
        assignment.assignment_rules(config),
        assignment.assignment_violations(table, subscriptions, config),
    )


def _int_or_none(text: str | None) -> int | None:
    return None if text is None else int(text)
