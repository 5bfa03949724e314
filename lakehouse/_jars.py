"""Resolve the Delta Lake jars from Maven Central once, into a known Ivy cache.

The first start resolves ``configure_spark_with_delta_pip``'s coordinates in a child process (so Ivy's
long report and any failure are captured, and a failure becomes a one-line error) and writes a manifest
of the resolved jar files next to the cache. Every later start passes those files as ``spark.jars``:
no Ivy run, no network, no download. Processes starting at once on a fresh cache (two jobs, two test
workers) resolve one at a time under a lock file in the cache: Ivy's cache is not safe for two writers
(the loser sees jars "not found"), and the second finds the first's manifest.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyspark

from lakehouse.errors import JarResolutionError

_RESOLVE_TIMEOUT_S = 900
_SPARK_MINOR = ".".join(pyspark.__version__.split(".")[:2])
# The Maven coordinate of Delta's jar for this pyspark and delta-spark (what configure_spark_with_delta_pip
# resolves, and what a spark-submit command needs in --packages).
DELTA_COORDINATE = f"io.delta:delta-spark_{_SPARK_MINOR}_2.13:{importlib.metadata.version('delta-spark')}"
# Spark's Kafka source (``spark.readStream.format("kafka")``), resolved with Delta's jars into every
# embedded session: a session's jars are fixed at its start, so it is there from the start.
KAFKA_SOURCE_COORDINATE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
SESSION_PACKAGES = (KAFKA_SOURCE_COORDINATE,)
_UNRESOLVED = re.compile(r"unresolved dependency: ([^\s:]+[^\s]*?): (not found|.*)")


def hadoop_aws_coordinate() -> str:
    """The Maven coordinate of Hadoop's S3A file system (``s3a://`` paths; the ``s3`` profile) at the
    version of the Hadoop jars of pyspark's Spark home, which it must match. Read when called, not on
    import: under spark-submit pyspark may be imported from a zip, with no jars beside it."""
    from pyspark.find_spark_home import _find_spark_home

    client = next(Path(_find_spark_home()).glob("jars/hadoop-client-api-*.jar"))
    return f"org.apache.hadoop:hadoop-aws:{client.stem.rsplit('-', 1)[1]}"


def manifest_path(ivy_cache: Path, extra_packages: Sequence[str], with_delta: bool = True) -> Path:
    """Manifest of the jars for this pyspark, delta-spark and ``extra_packages`` (one file per line).

    ``with_delta=False`` is the manifest of ``extra_packages`` alone (e.g. the Kafka broker's jars).
    """
    head = [pyspark.__version__, importlib.metadata.version("delta-spark"), *SESSION_PACKAGES]
    key = ",".join([*(head if with_delta else ["no-delta"]), *extra_packages])
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return ivy_cache / f"lakehouse-jars-{digest}.txt"


def resolve_jars(ivy_cache: Path, extra_packages: Sequence[str] = (), with_delta: bool = True) -> list[str]:
    """Return local paths of the Delta jars and Spark's Kafka source (plus ``extra_packages``).

    They are resolved on first use and read from the manifest afterwards. ``with_delta=False`` resolves
    ``extra_packages`` alone, into their own manifest (a classpath for another JVM, e.g. a Kafka broker).

    Raises:
        JarResolutionError: Maven Central could not serve a jar; the message says which and what to do.
    """
    manifest = manifest_path(ivy_cache, extra_packages, with_delta)
    jars = _read_manifest(manifest)
    if jars is not None:
        return jars
    ivy_cache.mkdir(parents=True, exist_ok=True)
    with _resolving(ivy_cache):
        return _read_manifest(manifest) or _resolve(ivy_cache, manifest, extra_packages, with_delta)


@contextmanager
def _resolving(ivy_cache: Path) -> Iterator[None]:
    """Hold the cache's resolution lock (blocking until another process's resolution ends)."""
    with (ivy_cache / "lakehouse-resolve.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _resolve(ivy_cache: Path, manifest: Path, extra_packages: Sequence[str], with_delta: bool) -> list[str]:
    """Resolve the packages in a child process into ``ivy_cache`` and return the manifest it wrote."""
    packages = [*SESSION_PACKAGES, *extra_packages] if with_delta else list(extra_packages)
    command = [
        sys.executable,
        "-m",
        "lakehouse._jars",
        str(ivy_cache),
        str(manifest),
        str(with_delta),
        *packages,
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_RESOLVE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise JarResolutionError(
            f"resolving the Delta jars into {ivy_cache} took over {_RESOLVE_TIMEOUT_S}s: "
            "check access to Maven Central (repo1.maven.org), then run `lakehouse doctor`"
        ) from None
    jars = _read_manifest(manifest)
    if done.returncode != 0 or jars is None:
        raise JarResolutionError(_one_line_reason(done.stdout + done.stderr, ivy_cache)) from None
    return jars


def _read_manifest(manifest: Path) -> list[str] | None:
    if not manifest.is_file():
        return None
    jars = [line for line in manifest.read_text().splitlines() if line]
    return jars if jars and all(Path(j).is_file() for j in jars) else None


def _one_line_reason(output: str, ivy_cache: Path) -> str:
    missing = _UNRESOLVED.search(output)
    what = f"{missing.group(1)} ({missing.group(2)})" if missing else "the Delta Lake jars"
    return (
        f"could not resolve {what} from Maven Central into {ivy_cache}: check network access to "
        "repo1.maven.org (or set spark.jars.repositories to a mirror) and that delta-spark and pyspark "
        "are the pinned versions, then run `lakehouse doctor`"
    )


def _resolve_in_child(ivy_cache: str, manifest: str, with_delta: bool, extra_packages: list[str]) -> None:
    """Child process: start a throwaway session that resolves the packages, then write the manifest."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("lakehouse-resolve-jars")
        .config("spark.jars.ivy", ivy_cache)
        .config("spark.ui.enabled", "false")
    )
    if with_delta:
        builder = configure_spark_with_delta_pip(builder, extra_packages=extra_packages)
    else:
        builder = builder.config("spark.jars.packages", ",".join(extra_packages))
    spark = builder.getOrCreate()
    uris = spark.sparkContext.getConf().get("spark.jars", "")
    spark.stop()
    paths = [uri.removeprefix("file://") for uri in uris.split(",") if uri]
    written = Path(f"{manifest}.tmp")  # then renamed: a start reading the manifest never sees half of it
    written.write_text("\n".join(paths) + "\n")
    written.replace(manifest)


if __name__ == "__main__":
    _resolve_in_child(sys.argv[1], sys.argv[2], sys.argv[3] == "True", sys.argv[4:])
