"""Checks that need no JVM, run before Spark starts so a mistake fails in a second with one line.

- :func:`check_spark_conf`: ``--conf`` keys are Spark confs (``spark.*``).
- :func:`check_landed`: the landing folders a pipeline's stages read exist (local paths only: a URI such
  as ``s3a://`` is checked by the stage itself, through Spark).
- :func:`require_broker`: a Kafka bootstrap server answers on its port.
- :func:`preflight_run`: those a pipeline run needs.

Each raises a :class:`~lakehouse.errors.LakehouseError` whose message is the one line to print.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidInputError, KafkaBrokerError
from lakehouse.paths import is_local, local_path

if TYPE_CHECKING:
    from lakehouse.pipeline.spec import PipelineSpec

#: Seconds a bootstrap server has to accept a TCP connection before it counts as not answering.
BROKER_TIMEOUT_S = 1.0
_SOURCES = {"materialize": "changelog", "ingest": "records"}


def check_spark_conf(conf: Mapping[str, str]) -> None:
    """Raise unless every key of ``conf`` is a Spark conf (starts with ``spark.``; Delta's are
    ``spark.databricks.delta.*``).

    Raises:
        InvalidInputError: a key that Spark would ignore, named.
    """
    for key in conf:
        if not key.startswith("spark."):
            raise InvalidInputError(
                f"--conf {key}: not a Spark conf (Spark's keys start with 'spark.'; "
                "lakehouse settings are set with --set KEY=VALUE)"
            )


def preflight_run(spec: PipelineSpec, stages: Iterable[str], continuous: bool = False) -> None:
    """What a run of ``stages`` of ``spec`` needs that is checkable without a JVM: :func:`check_landed`
    (not for a continuous run: its stages wait for their input), and :func:`require_broker` when a stage
    reads a Kafka topic."""
    stages = list(stages)
    if not continuous:
        check_landed(spec, stages)
    servers = kafka_servers(spec, stages)
    if servers is not None:
        require_broker(servers)


def check_landed(spec: PipelineSpec, stages: Iterable[str]) -> None:
    """Raise if a stage among ``stages`` reads a local landing folder that does not exist.

    Raises:
        InvalidInputError: names the folder, the pipeline and how to land data there.
    """
    for stage in stages:
        source = _SOURCES.get(stage)
        if source is None or getattr(spec, f"{source}_format") in ("kafka", "delta"):
            continue
        path = getattr(spec, source)
        if path and is_local(path) and not Path(local_path(path)).exists():
            raise InvalidInputError(
                f"nothing has landed in {path} yet (the {source} folder of pipeline {spec.name!r}): "
                "land files there first (`lakehouse demo` lands the demo's)"
            )


def kafka_servers(spec: PipelineSpec, stages: Iterable[str]) -> str | None:
    """The bootstrap servers ``stages`` of ``spec`` read from, or None if none reads a Kafka topic."""
    for stage in stages:
        source = _SOURCES.get(stage)
        if source is not None and getattr(spec, f"{source}_format") == "kafka":
            return spec.kafka_bootstrap_servers
    return None


def require_broker(bootstrap_servers: str, timeout_s: float = BROKER_TIMEOUT_S) -> None:
    """Raise unless one of ``bootstrap_servers`` (``host:port,...``) accepts a TCP connection.

    Raises:
        KafkaBrokerError: ``no broker at <servers>; run lakehouse kafka start``.
    """
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        if not port.isdigit():
            continue
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
                return
        except OSError:
            continue
    raise KafkaBrokerError(f"no broker at {bootstrap_servers}; run lakehouse kafka start")
