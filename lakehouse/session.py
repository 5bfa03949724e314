"""The SparkSession: the active one (spark-submit, notebooks) or an embedded Delta-enabled one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse._jars import resolve_jars
from lakehouse._resources import resource_dir
from lakehouse.config import Settings, load_settings

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def get_spark(conf: Mapping[str, str] | None = None, settings: Settings | None = None) -> SparkSession:
    """Return the active SparkSession, or build the embedded one.

    Under ``spark-submit`` (or wherever a session is already active) that session is returned unchanged,
    with the Delta jars and confs the platform gave it. Otherwise an embedded session is built from
    ``settings`` (default: :func:`lakehouse.config.load_settings`): Delta's SQL extension and catalog, the
    Delta jars resolved once from Maven Central into ``settings.ivy_cache``, the warehouse folder, and
    quiet logging. ``conf`` entries are extra Spark confs for the embedded session; they win over settings.

    Raises:
        JarResolutionError: the Delta jars could not be resolved (one line, with what to do).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    settings = settings or load_settings()
    jars = resolve_jars(Path(settings.ivy_cache).expanduser(), settings.extra_packages)
    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in embedded_conf(settings, jars, conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.log_level)
    return spark


def embedded_conf(
    settings: Settings, jars: list[str], conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The Spark confs of the embedded session, in precedence order (later entries win)."""
    log4j = resource_dir("conf") / "log4j2.properties"
    return {
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.sql.warehouse.dir": warehouse_uri(settings),
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.driver.memory": settings.driver_memory,
        "spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{log4j}",
        **settings.spark,
        **(conf or {}),
    }


def warehouse_uri(settings: Settings) -> str:
    """The warehouse as an absolute path or URI (``s3a://...`` and other URIs are kept as they are)."""
    if "://" in settings.warehouse:
        return settings.warehouse
    return str(Path(settings.warehouse).expanduser().resolve())
