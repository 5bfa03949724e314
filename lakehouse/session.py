"""The SparkSession: the active one, the one spark-submit prepared, or an embedded Delta-enabled one."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from lakehouse._jars import DELTA_COORDINATE, resolve_jars
from lakehouse._resources import resource_dir
from lakehouse.config import Settings, load_settings, warehouse_uri
from lakehouse.errors import SparkSetupError

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_EXTENSIONS = "spark.sql.extensions"
_CATALOG = "spark.sql.catalog.spark_catalog"
# pyspark's own signal that a JVM (spark-submit's, or a notebook's) is already running this process.
_GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"


def get_spark(conf: Mapping[str, str] | None = None, settings: Settings | None = None) -> SparkSession:
    """Return the active SparkSession, the submitted one, or build the embedded one.

    - A session is already active (a notebook, a test, an earlier call): it is returned unchanged.
    - Under ``spark-submit`` (a JVM was started before Python, so its conf already holds ``spark.master``
      and every ``--conf``): the session is built from that conf, which wins; lakehouse only adds what
      is missing (Delta's SQL extension and catalog, the warehouse, the shuffle partitions, the profile's
      ``[spark]`` confs and ``conf``). Delta's jars and the log configuration must come from the submit
      command. Its JVM's stdout is handled as below (never mixed with a job's JSON lines).
    - Otherwise an embedded session is built from ``settings`` (default: :func:`load_settings`): the
      profile's master, Delta's extension and catalog, the Delta jars resolved once from Maven Central
      into ``settings.ivy_cache``, the warehouse folder and quiet logging. ``conf`` entries win there.

    With ``settings.quiet`` (the default) the embedded session logs through ``conf/log4j2.properties``
    (warnings and errors, minus known harmless ones), drops what the JVM prints to its stdout (Delta's
    ``Deleted N files`` of VACUUM) and its known harmless stderr notices (:data:`_JVM_NOTICES`);
    ``quiet = false`` (the CLI's ``--verbose``) keeps Spark's own log configuration and sends the JVM's
    stdout to stderr.

    Raises:
        JarResolutionError: the Delta jars could not be resolved (embedded session; one line).
        SparkSetupError: the submitted JVM lacks Delta's classes (one line naming what to add).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    settings = settings or load_settings()
    if _jvm_started():
        return _submitted_session(settings, conf)
    jars = resolve_jars(Path(settings.ivy_cache).expanduser(), settings.extra_packages)
    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in embedded_conf(settings, jars, conf).items():
        builder = builder.config(key, value)
    if settings.quiet:
        with _without_stderr_lines(_JVM_NOTICES):
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    return _console(spark, settings)


def _console(spark: SparkSession, settings: Settings) -> SparkSession:
    """``spark`` at the settings' log level, the JVM's stdout dropped (quiet) or sent to stderr."""
    if settings.quiet:
        _drop_jvm_console(spark)
    else:
        jvm_console_to_stderr(spark)
    spark.sparkContext.setLogLevel(settings.log_level)
    return spark


#: What the JVM prints on stderr outside its log, known harmless: Spark's launcher adds the incubating
#: Vector API module (``--add-modules=jdk.incubator.vector``) and Java announces it as it starts; the AWS SDK
#: bundle of hadoop-aws (``s3a://``) carries its own copy of SLF4J 1.x, which finds no logging binding of
#: its own and says so in three ``SLF4J:`` lines at the first S3 request (it then logs nothing; S3A's own
#: log goes through Hadoop's, to Spark's log4j).
_JVM_NOTICES = ("WARNING: Using incubator modules:", "SLF4J:")


@contextmanager
def _without_stderr_lines(prefixes: tuple[str, ...]) -> Iterator[None]:
    """Inside, file descriptor 2 is a pipe whose lines are copied to the real stderr except those starting
    with one of ``prefixes``; a process started inside (the JVM) keeps writing through the copy."""
    try:
        saved, real = os.dup(2), os.dup(2)
    except OSError:  # no stderr to filter (a closed descriptor 2)
        yield
        return
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)

    def copy() -> None:
        with os.fdopen(read, "rb") as lines, os.fdopen(real, "wb", buffering=0) as out:
            for line in lines:
                if not line.decode(errors="replace").startswith(prefixes):
                    out.write(line)

    threading.Thread(target=copy, name="lakehouse-jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _drop_jvm_console(spark: SparkSession) -> None:
    """Drop what the JVM prints to its stdout (only ``println`` of libraries, e.g. VACUUM's ``Deleted N
    files and directories``: Spark's logs go to stderr)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.java.lang.System.setOut(jvm.java.io.PrintStream(jvm.java.io.OutputStream.nullOutputStream()))


def jvm_console_to_stderr(spark: SparkSession) -> None:
    """Send what the JVM prints to its console to stderr, keeping stdout for a job's JSON lines.

    Delta's VACUUM prints ``Deleted N files and directories ...`` with ``println``; on stdout that line
    would break a consumer reading one JSON object per line. Python's own prints stay on stdout (under
    spark-submit they are copied by a thread that holds the original stream).
    """
    system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    system.setOut(system.err)


def embedded_conf(
    settings: Settings, jars: list[str], conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The Spark confs of the embedded session, in precedence order (later entries win)."""
    log4j = resource_dir("conf") / "log4j2.properties"
    logging = {"spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{log4j}"}
    return {
        "spark.jars": ",".join(jars),
        "spark.driver.memory": settings.driver_memory,
        **(logging if settings.quiet else {}),
        **_lakehouse_conf(settings),
        **(conf or {}),
    }


def _lakehouse_conf(settings: Settings) -> dict[str, str]:
    """The confs lakehouse needs in any session (embedded or submitted), later entries winning."""
    return {
        _EXTENSIONS: DELTA_EXTENSION,
        _CATALOG: DELTA_CATALOG,
        "spark.sql.warehouse.dir": warehouse_uri(settings),
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        **_s3_endpoint_conf(settings.s3_endpoint),
        **settings.spark,
    }


def _s3_endpoint_conf(endpoint: str) -> dict[str, str]:
    """S3A's confs for an S3-compatible store at ``endpoint`` (``http://host:port`` or ``https://...``;
    "" = AWS itself, no confs): that endpoint, plain HTTP when its scheme says so."""
    if not endpoint:
        return {}
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(not endpoint.startswith("http://")).lower(),
    }


def _jvm_started() -> bool:
    """Whether a JVM already runs for this Python process (spark-submit, or a SparkContext made by hand)."""
    return _GATEWAY_ENV in os.environ or SparkContext._active_spark_context is not None


def _submitted_session(settings: Settings, conf: Mapping[str, str] | None) -> SparkSession:
    """The session of a JVM that spark-submit started: its conf wins, lakehouse adds what is missing."""
    SparkContext._ensure_initialized()
    submitted = SparkConf()  # loads the submitted JVM's spark.* properties
    _require_delta_classes()
    builder = SparkSession.builder
    for key, value in {**_lakehouse_conf(settings), **(conf or {})}.items():
        if key == _EXTENSIONS:
            value = _with_delta_extension(submitted.get(key))
        elif submitted.contains(key):
            continue
        builder = builder.config(key, value)
    return _console(builder.getOrCreate(), settings)


def _with_delta_extension(extensions: str | None) -> str:
    """``spark.sql.extensions`` with Delta's extension appended when it is not listed yet."""
    listed = [name.strip() for name in (extensions or "").split(",") if name.strip()]
    return ",".join(listed if DELTA_EXTENSION in listed else [*listed, DELTA_EXTENSION])


def _require_delta_classes() -> None:
    """Fail in one line when the submitted JVM cannot load Delta (no ``--packages`` on the submit)."""
    jvm = SparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        jvm.java.lang.Class.forName(DELTA_EXTENSION, False, loader)
    except Exception:  # py4j raises Py4JJavaError wrapping ClassNotFoundException
        raise SparkSetupError(
            "Delta Lake is not on the submitted session's classpath: add "
            f"--packages {DELTA_COORDINATE} --conf {_EXTENSIONS}={DELTA_EXTENSION} "
            f"--conf {_CATALOG}={DELTA_CATALOG} to spark-submit"
        ) from None
