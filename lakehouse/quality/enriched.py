"""The suite of an as-of join's enriched output (``lakehouse.kind = asof_enriched``).

An output table is declared enriched by :func:`mark_enriched`, which records which columns identify a
stream record, hold its time and hold the matched version's ``valid_from``. One window over the output
(per record) flags:

- ``matched_at_most_once``: each stream record appears at most once (flagged once per record).
- ``valid_from_not_after_record_time``: the matched version's ``valid_from <=`` the record's time
  (unmatched records, ``valid_from`` NULL, pass).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakehouse import delta_ops
from lakehouse.errors import InvalidInputError
from lakehouse.quality.rules import Rule, key_text, violation_rows

KIND = "asof_enriched"
ONCE = Rule("matched_at_most_once", "each stream record appears at most once")
NOT_AFTER = Rule(
    "valid_from_not_after_record_time", "the matched version's valid_from is not after the record's time"
)


def mark_enriched(
    spark: SparkSession, path: str, *, record_id: str | Sequence[str], timestamp: str, valid_from: str
) -> None:
    """Declare the Delta table at ``path`` the enriched output of an as-of join (one metadata commit).

    Args:
        record_id: Column(s) identifying a stream record (e.g. ``("topic", "partition", "offset")``).
        timestamp: The record's time column (the join's ``timestamp``).
        valid_from: The column holding the matched version's ``valid_from`` (``prefix + "valid_from"``).

    Raises:
        InvalidInputError: a named column is not in the table.
    """
    ids = [record_id] if isinstance(record_id, str) else list(record_id)
    columns = spark.read.format("delta").load(path).columns
    missing = [c for c in (*ids, timestamp, valid_from) if c not in columns]
    if missing:
        raise InvalidInputError(f"columns {missing} are not in the table at {path} ({columns})")
    settings = {"record_id": json.dumps(ids), "timestamp": timestamp, "valid_from": valid_from}
    assignments = ", ".join(
        f"'{key}' = '{value}'" for key, value in delta_ops.settings_properties(KIND, settings).items()
    )
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({assignments})")


def enriched_rules() -> tuple[Rule, ...]:
    """The rules of an enriched output's suite."""
    return (ONCE, NOT_AFTER)


def enriched_violations(output: DataFrame, path: str, properties: Mapping[str, str]) -> DataFrame:
    """The rows of an enriched ``output`` that break a rule, as violation rows (one window pass)."""
    found = delta_ops.settings_from_properties(path, properties, KIND)
    ids, timestamp, valid_from = json.loads(found["record_id"]), found["timestamp"], found["valid_from"]
    per_record = Window.partitionBy(*ids).orderBy(F.col(timestamp).asc())
    whole_record = per_record.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    first_of_record = F.row_number().over(per_record) == 1
    flagged = output.select(
        *ids,
        timestamp,
        valid_from,
        (first_of_record & (F.count(F.lit(1)).over(whole_record) > 1)).alias(ONCE.name),
        (F.col(valid_from) > F.col(timestamp)).alias(NOT_AFTER.name),
    )
    detail = F.format_string(
        "%s=%s %s=%s", F.lit(timestamp), F.col(timestamp), F.lit(valid_from), F.col(valid_from)
    )
    return violation_rows(flagged, enriched_rules(), key_text(ids), detail)
