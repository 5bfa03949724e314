"""What a quality suite checks: named rules, and a table reduced to the rows that break them.

Every suite has the same shape. A kind-specific function reads the table once and returns its
**violations**: one row per (rule, offending row) with the columns ``rule``, ``key`` (the offending key as
text) and ``detail``. Each rule then becomes one Great Expectations expectation, "no violation row of this
rule", so a table that breaks nothing yields an empty frame and every expectation passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

RULE_COL = "rule"
KEY_COL = "key"
DETAIL_COL = "detail"
VIOLATIONS_SCHEMA = T.StructType(
    [T.StructField(name, T.StringType()) for name in (RULE_COL, KEY_COL, DETAIL_COL)]
)


@dataclass(frozen=True)
class Rule:
    """One invariant of a state table: a stable name (stored in the results) and what it requires."""

    name: str
    description: str


@dataclass(frozen=True)
class TableCheck:
    """A table's rules and its violations (lazy: computing them reads the table once more; building them
    may have run a job already, as the versioned suite's per-key aggregate does)."""

    kind: str
    rules: tuple[Rule, ...]
    violations: DataFrame
    #: What the violations cover: ``full`` (why, when an incremental check was asked for and could not
    #: be made), or ``incremental since version N: K keys``.
    scope: str = "full"


def key_text(columns: Sequence[str]) -> Column:
    """The key columns as one string: the value itself for one column, else JSON of all of them."""
    if len(columns) == 1:
        return F.col(columns[0]).cast("string")
    return F.to_json(F.struct(*columns))


def violation_rows(flagged: DataFrame, rules: Sequence[Rule], key: Column, detail: Column) -> DataFrame:
    """One row per set flag of ``flagged``: its boolean columns named after ``rules`` become rows.

    A NULL flag counts as not set. Rows breaking no rule produce nothing (``explode`` of an empty array).
    """
    hits = F.array(*[F.when(F.col(rule.name), F.lit(rule.name)) for rule in rules])
    broken = F.filter(hits, lambda name: name.isNotNull())
    return flagged.select(F.explode(broken).alias(RULE_COL), key.alias(KEY_COL), detail.alias(DETAIL_COL))


def violations_of(rule: Rule, rows: DataFrame, key: Column, detail: Column) -> DataFrame:
    """``rows`` (each one breaks ``rule``) in the violations shape."""
    return rows.select(F.lit(rule.name).alias(RULE_COL), key.alias(KEY_COL), detail.alias(DETAIL_COL))


def no_violations(spark: SparkSession) -> DataFrame:
    """An empty frame of the violations shape, held by the driver (``DataFrame.isLocal()``): a query of it
    reads no table and runs at most one small job (``createDataFrame`` of a Python list would go through a
    Python RDD instead)."""
    jvm_session = spark._jsparkSession
    rows = spark.sparkContext._jvm.java.util.ArrayList()  # type: ignore[union-attr]
    schema = jvm_session.parseDataType(VIOLATIONS_SCHEMA.json())
    return DataFrame(jvm_session.createDataFrame(rows, schema), spark)
