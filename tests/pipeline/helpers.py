"""Tiny landing folders and a pipeline spec over them, for the pipeline tests."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lakehouse.pipeline import PipelineSpec, spec_from_values

T0 = datetime(2024, 1, 1, tzinfo=UTC)
RECORDS_DDL = (
    "key string, txn_id string, currency string, amount double, topic string, partition int, "
    "offset long, timestamp timestamp"
)
CHANGELOG_DDL = (
    "currency string, rate double, deleted boolean, event_time timestamp, partition int, offset long"
)


def at(minutes: float) -> str:
    """``T0`` plus ``minutes`` as an ISO timestamp (as JSON carries it)."""
    return (T0 + timedelta(minutes=minutes)).isoformat()


def land(folder: Path, name: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write one JSON-lines file into a landing folder (written aside, then renamed: atomic)."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.tmp"
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    partial.rename(folder / f"{name}.json")


def txn(n: int, currency: str, minute: float, offset: int, partition: int = 0) -> dict[str, Any]:
    return {
        "key": f"t{n}",
        "txn_id": f"t{n}",
        "currency": currency,
        "amount": 10.0 * (n + 1),
        "topic": "transactions",
        "partition": partition,
        "offset": offset,
        "timestamp": at(minute),
    }


def rate(currency: str, value: float | None, minute: float, offset: int) -> dict[str, Any]:
    return {
        "currency": currency,
        "rate": value,
        "deleted": value is None,
        "event_time": at(minute),
        "partition": 0,
        "offset": offset,
    }


def spec(tmp_path: Path, **overrides: Any) -> PipelineSpec:
    """A pipeline over ``tmp_path/landing/{transactions,rates}`` with its tables under ``tmp_path/wh``."""
    return spec_from_values("tiny", spec_values(tmp_path, **overrides), str(tmp_path / "wh"))


def spec_values(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    """The TOML values of :func:`spec`'s pipeline."""
    return {
        "records": str(tmp_path / "landing" / "transactions"),
        "records_format": "json",
        "records_schema": RECORDS_DDL,
        "dedup_by": ["txn_id"],
        "dedup_interval": "1h",
        "changelog": str(tmp_path / "landing" / "rates"),
        "changelog_format": "json",
        "changelog_schema": CHANGELOG_DDL,
        "store_key": ["currency"],
        "store_values": ["rate"],
        "changelog_timestamp": "event_time",
        "changelog_deletes": "deleted",
        "history_retention": "1h",
        "join_prefix": "rate_",
        "max_files_per_trigger": 1,
        "seal_min_rows": 1,  # maintain seals whenever versions are pending (the tests' data is tiny)
        **overrides,
    }


# Spark confs of the jobs the tests start: tiny data needs few tasks (Spark's defaults plan 50 for a Delta
# snapshot and 10 000 for VACUUM's file listing).
_FAST_SPARK = {
    "spark.ui.enabled": "false",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}


def write_config(
    tmp_path: Path, spark_confs: Mapping[str, str] | None = None, profile: str = "local", **overrides: Any
) -> Path:
    """A configuration file (``tmp_path/lakehouse.toml``): one profile (plus ``spark_confs``) and
    :func:`spec`'s pipeline as ``[pipeline.tiny]``, for the ``jobs/`` entry points (``--config``).

    ``profile`` ``local``: a warehouse under ``tmp_path``; another name: that profile of the repository's
    ``conf/lakehouse.toml`` (``s3``: hadoop-aws, path-style access; the endpoint and keys come from the
    job's environment, ``ObjectStore.env()``), with the same warehouse and fast confs.
    """
    values = {"root": str(tmp_path / "wh" / "tiny"), **spec_values(tmp_path, **overrides)}
    base = {} if profile == "local" else dict(_repository_profile(profile))
    confs = {**base.pop("spark", {}), **_FAST_SPARK, **(spark_confs or {})}
    base.update(warehouse=str(tmp_path / "wh"), shuffle_partitions=2)
    lines = [f"[{profile}]", *(f"{key} = {json.dumps(value)}" for key, value in base.items()), ""]
    lines += [f"[{profile}.spark]", *(f'"{key}" = "{value}"' for key, value in confs.items()), ""]
    lines += ["[pipeline.tiny]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    path = tmp_path / "lakehouse.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _repository_profile(profile: str) -> dict[str, Any]:
    """The ``[profile]`` table of the repository's ``conf/lakehouse.toml``."""
    with (Path(__file__).parents[2] / "conf" / "lakehouse.toml").open("rb") as file:
        found: dict[str, Any] = tomllib.load(file)[profile]
    return found
