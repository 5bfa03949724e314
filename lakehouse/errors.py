"""The error hierarchy: every error lakehouse raises on purpose is a ``LakehouseError``.

Errors about bad input also derive from ``ValueError`` so callers may catch either. Each carries the
structured fields a caller or a test needs (the key, the expected and the actual value) and a message
that names them.
"""

from __future__ import annotations


class LakehouseError(Exception):
    """Base class of every error raised by lakehouse."""


class InvalidConfigError(LakehouseError, ValueError):
    """A configuration key is unknown or has a value of the wrong type."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"configuration key {key!r}: {problem}")


class SchemaMismatchError(LakehouseError, ValueError):
    """A DataFrame lacks required columns or has columns of the wrong type."""

    def __init__(self, what: str, missing: list[str], wrong_type: dict[str, str] | None = None) -> None:
        self.what = what
        self.missing = missing
        self.wrong_type = wrong_type or {}
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if self.wrong_type:
            parts.append("wrong types " + ", ".join(f"{c}: {t}" for c, t in self.wrong_type.items()))
        super().__init__(f"{what}: " + "; ".join(parts))


class InvalidInputError(LakehouseError, ValueError):
    """An argument or a record violates the contract (null key, negative interval, ...)."""


class StoreSettingsConflictError(LakehouseError, ValueError):
    """A table exists already with settings other than the ones asked for."""

    def __init__(self, path: str, setting: str, existing: str, requested: str) -> None:
        self.path = path
        self.setting = setting
        self.existing = existing
        self.requested = requested
        super().__init__(
            f"table at {path} was created with {setting}={existing!r}, not {requested!r}; "
            "open it with its own settings or use another path"
        )


class NotALakehouseTableError(LakehouseError, ValueError):
    """``open`` was given a path that holds no lakehouse table of the kind asked for."""

    def __init__(self, path: str, kind: str, problem: str) -> None:
        self.path = path
        self.kind = kind
        self.problem = problem
        super().__init__(f"no {kind} at {path}: {problem}")


class ReadOnlyReplicaError(LakehouseError, ValueError):
    """A write was attempted on a replica (``lakehouse.replica``); only its sync may write it."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        super().__init__(
            f"the table at {path} is a read-only replica of {source}: write to the source, then sync"
        )


class ConcurrentWriteError(LakehouseError, RuntimeError):
    """Another writer committed to a table after this write read it: nothing of this write was committed."""

    def __init__(self, path: str, step: str, read_version: int, other: str) -> None:
        self.path = path
        self.step = step
        self.read_version = read_version
        self.other = other
        super().__init__(
            f"{step} on {path} read version {read_version} but another writer committed {other} since: "
            "nothing was written (run the batch again)"
        )


class ReplayMismatchWarning(UserWarning):
    """A committed batch id was replayed with input that differs from what its commit recorded.

    The committed result stands and nothing is written (a replay is a no-op); the input changed between
    the runs (a source rewritten, the wrong batch id). ``warnings.simplefilter("error",
    ReplayMismatchWarning)`` makes it an error.
    """


class UnarbitratedWritersWarning(UserWarning):
    """Several writers commit to a table whose Delta log store keeps apart the commits of one Spark driver
    only (Delta's default on S3): two drivers committing at once can silently lose a commit.

    Warned once per table and process (``lakehouse.log_store``); ``warnings.simplefilter("error",
    UnarbitratedWritersWarning)`` turns it into a refusal.
    """


class JarResolutionError(LakehouseError, RuntimeError):
    """The Delta Lake jars could not be resolved from Maven Central."""


class EngineUnsupportedError(LakehouseError, RuntimeError):
    """delta-rs cannot read a table right (a protocol or feature it lacks), or cannot run a statement:
    the caller reads it with Spark instead (``lakehouse.read``)."""


class LakehouseInternalError(LakehouseError, AssertionError):
    """An internal invariant is broken: a bug in lakehouse, never the caller's fault."""


class SparkSetupError(LakehouseError, RuntimeError):
    """The Spark session lacks what lakehouse needs (Delta's jars or SQL extension) and cannot add it."""


class KafkaBrokerError(LakehouseError, RuntimeError):
    """The local Kafka broker could not be started, or a bootstrap server does not answer (the message says
    why, and names the broker's log file or the command that starts one)."""


class DamagedTableError(LakehouseError, RuntimeError):
    """A Delta table's log or files are damaged: named with the damage and the ways to recover."""

    def __init__(self, path: str, damage: str) -> None:
        self.path = path
        self.damage = damage
        super().__init__(
            f"the Delta table {path} is damaged: {damage}. Nothing was read or written: restore it from a "
            f"replica, or `RESTORE TABLE delta.`{path}` TO VERSION AS OF <an earlier version>`, or re-create "
            "it (see docs/recovery.md)"
        )


def first_line(error: BaseException, limit: int = 200) -> str:
    """The first line of an error's message (an engine's errors span many), at most ``limit`` characters."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:limit]
