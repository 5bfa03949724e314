"""A table's newest commits read again after more commits: only the new ones are read, and the result is
what a fresh read gives."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse.history import NewestCommits, recent_commits

SCHEMA = T.StructType([T.StructField("id", T.LongType())])


def test_newest_commits_read_again_equal_a_fresh_read(spark: SparkSession, table_path: str) -> None:
    def append(ids: list[int]) -> None:
        spark.createDataFrame([(i,) for i in ids], SCHEMA).write.format("delta").mode("append").save(
            table_path
        )

    append([1])
    commits = NewestCommits(spark)
    first = commits.of(table_path)
    assert [c.version for c in first] == [0]
    assert commits.of(table_path) == first  # nothing new: the same commits
    append([2, 3])
    append([4])
    again = commits.of(table_path)
    assert again == recent_commits(spark, table_path)
    assert [(c.version, c.rows_added) for c in again] == [(2, 1), (1, 2), (0, 1)]
