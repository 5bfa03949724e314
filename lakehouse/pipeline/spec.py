"""A pipeline's job spec: one ``[pipeline.<name>]`` table of ``conf/lakehouse.toml``, typed and checked.

The keys are the same in the TOML file, in ``lakehouse run --spec KEY=VALUE`` and in the jobs'
``--spec KEY=VALUE``. Unknown keys and values of the wrong type raise :class:`InvalidConfigError` naming
the key. In paths, ``{warehouse}`` stands for the profile's warehouse; paths without a scheme are
resolved against the working directory (a ``kafka`` source names a topic, not a path). ``root`` defaults
to ``{warehouse}/<name>`` and every table of the pipeline lives under it (see :class:`Tables`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pyspark.sql import types as T

from lakehouse.config import pipeline_section, typed_values
from lakehouse.errors import InvalidConfigError
from lakehouse.paths import resolve_path
from lakehouse.schemas import load_schema, schema_names

FORMATS = ("delta", "json", "parquet", "kafka")
#: Written in a path of the spec, stands for the warehouse of the configuration profile.
WAREHOUSE = "{warehouse}"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline: its sources, the settings of its state tables and where they live.

    Attributes:
        name: The pipeline (the ``[pipeline.<name>]`` table).
        root: Folder of the pipeline's tables (default ``<warehouse>/<name>``).
        checkpoints: Folder of the streaming checkpoints, one per stage (default ``<root>/_checkpoints``).
        max_files_per_trigger: Source files (or Delta files) per micro-batch; 0 = everything new at once.
        records / records_format / records_schema: The records to deduplicate: a Delta table, a
            landing folder of ``json``/``parquet`` files, or a ``kafka`` topic (those need a schema of the
            files or of the topic's JSON values: a name in ``schemas/`` or a DDL string). They need
            ``partition``, ``offset`` and ``timestamp`` columns (a topic brings them: ``timestamp`` is
            Kafka's record timestamp).
        records_incarnation: Which life of the records source the pipeline reads (default 0). Bump it
            to acknowledge that the source's offsets started again (a Kafka topic deleted and
            re-created, a Delta source table re-created, a landing folder re-used with offsets from 0):
            its records are then processed as new, also those identical to records the sink holds
            (:mod:`lakehouse.dedup.incarnation`). A ``kafka`` or ``delta`` source is read from its
            start again under a checkpoint of the incarnation's own (``<checkpoints>/ingest-<N>``); a
            landing folder keeps its checkpoint (it remembers every file it read: only files landed
            since are read).
        records_kafka_key / changelog_kafka_key: For a ``kafka`` source, the name of the column that
            holds the record key (a string; a tombstone keeps only its key).
        kafka_bootstrap_servers / max_offsets_per_trigger: The brokers of ``kafka`` sources, and the
            Kafka records per micro-batch (0 = everything new at once; Spark's ``maxOffsetsPerTrigger``).
        dedup_by / dedup_interval / quarantine: The deduplicator (KIP-655): id columns, interval, and
            whether dropped duplicates are kept in a quarantine table.
        changelog / changelog_format / changelog_schema: The table changelog materialized into the
            versioned store (same kinds of source as ``records``; a compacted topic's tombstones, null
            values, have every value column NULL and take Kafka's record timestamp as event time).
        store_key / store_values: Key and value columns of the versioned store.
        changelog_timestamp / changelog_deletes / changelog_sequence_by: Event-time column of the
            changelog, an SQL boolean expression marking tombstones ("" = all values NULL), and an order
            column when the changelog has no ``partition``/``offset``.
        history_retention: The store's history retention (KIP-889), also its grace for late updates.
        join_timestamp / join_prefix / grace: The as-of join of the deduplicated records with the store:
            their event-time column, a prefix for the added columns, and an optional grace period
            (KIP-923; "" = join at once).
        seal_min_rows: ``maintain`` seals the store (:meth:`VersionedStore.seal`) once the commits since
            its last seal wrote this many rows into its pending partition (1 = whenever versions are
            pending). A seal reads and rewrites the sealed versions of the pending keys, however few rows
            are pending; until then reads resolve the pending rows themselves (same answers).
        seal_pending_percent: ``materialize`` seals the store after a batch once its pending rows reach
            this percentage of its live keys (and 10 000; :class:`~lakehouse.versioned.policy.SealPolicy`),
            so reads stay bounded whatever schedule runs ``maintain``; 0 = only ``maintain`` seals.
        optimize_min_files: ``maintain`` compacts a table (``OPTIMIZE``) once the commits since its last
            OPTIMIZE added this many files (0 = never).
        vacuum_interval: ``maintain`` VACUUMs the store at most once per this interval (and only once the
            store is older than its file retention); 0 = whenever it runs.
        assignment_root: Folder of an assignment store the ``assign`` stage assigns ("" = no such stage).
    """

    name: str
    root: str = ""
    checkpoints: str = ""
    max_files_per_trigger: int = 0
    records: str = ""
    records_format: str = "delta"
    records_schema: str = ""
    records_kafka_key: str = "key"
    records_incarnation: int = 0
    dedup_by: tuple[str, ...] = ("key",)
    dedup_interval: timedelta = timedelta(days=1)
    quarantine: bool = True
    changelog: str = ""
    changelog_format: str = "delta"
    changelog_schema: str = ""
    changelog_kafka_key: str = "key"
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    max_offsets_per_trigger: int = 0
    store_key: tuple[str, ...] = ()
    store_values: tuple[str, ...] = ()
    changelog_timestamp: str = "timestamp"
    changelog_deletes: str = ""
    changelog_sequence_by: str = ""
    history_retention: timedelta = timedelta(days=1)
    join_timestamp: str = "timestamp"
    join_prefix: str = ""
    grace: timedelta | None = None
    seal_min_rows: int = 50_000
    seal_pending_percent: int = 10
    optimize_min_files: int = 16
    vacuum_interval: timedelta = timedelta(days=1)
    assignment_root: str = ""

    def __post_init__(self) -> None:
        if not _IDENTIFIER.fullmatch(self.name):
            raise InvalidConfigError(
                "pipeline", f"a pipeline name must be an SQL identifier, got {self.name!r}"
            )
        for key in ("records_format", "changelog_format"):
            if getattr(self, key) not in FORMATS:
                raise InvalidConfigError(key, f"must be one of {list(FORMATS)}, got {getattr(self, key)!r}")
        for key in ("max_files_per_trigger", "max_offsets_per_trigger", "records_incarnation"):
            if getattr(self, key) < 0:
                raise InvalidConfigError(key, f"must be >= 0, got {getattr(self, key)}")
        if self.seal_min_rows < 1:
            raise InvalidConfigError("seal_min_rows", f"must be >= 1, got {self.seal_min_rows}")
        if self.seal_pending_percent < 0:
            raise InvalidConfigError("seal_pending_percent", f"must be >= 0, got {self.seal_pending_percent}")
        if self.optimize_min_files < 0:
            raise InvalidConfigError("optimize_min_files", f"must be >= 0, got {self.optimize_min_files}")
        if self.vacuum_interval < timedelta(0):
            raise InvalidConfigError("vacuum_interval", f"must be >= 0, got {self.vacuum_interval}")
        if self.changelog and (not self.store_key or not self.store_values):
            raise InvalidConfigError(
                "store_key", "a pipeline with a changelog names store_key and store_values"
            )

    @property
    def tables(self) -> Tables:
        """Where the pipeline's tables and checkpoints are."""
        # A landing folder's checkpoint lists the files read: a new incarnation must not read them again.
        restarts = self.records_incarnation if self.records_format in ("kafka", "delta") else 0
        return Tables(self.root, self.checkpoints or f"{self.root}/_checkpoints", restarts)


@dataclass(frozen=True)
class Tables:
    """The paths of a pipeline's tables (all under ``root``) and of its stages' checkpoints.

    ``records_incarnation`` > 0 gives ``ingest`` the checkpoint ``ingest-<N>``: it reads its source from
    the start again.
    """

    root: str
    checkpoints: str
    records_incarnation: int = 0

    @property
    def dedup_index(self) -> str:
        return f"{self.root}/dedup_index"

    @property
    def quarantine(self) -> str:
        return f"{self.root}/dedup_quarantine"

    @property
    def deduped(self) -> str:
        return f"{self.root}/deduped"

    @property
    def store(self) -> str:
        return f"{self.root}/store"

    @property
    def enriched(self) -> str:
        return f"{self.root}/enriched"

    @property
    def pending(self) -> str:
        return f"{self.root}/enrich_pending"

    def checkpoint(self, stage: str) -> str:
        if stage == "ingest" and self.records_incarnation:
            return f"{self.checkpoints}/{stage}-{self.records_incarnation}"
        return f"{self.checkpoints}/{stage}"


_FIELDS = {f.name: f for f in dataclasses.fields(PipelineSpec) if f.name != "name"}


def spec_from_values(
    name: str, values: Mapping[str, object], warehouse: str, overrides: Mapping[str, str] | None = None
) -> PipelineSpec:
    """The spec of pipeline ``name`` from its TOML ``values`` and ``KEY=VALUE`` text ``overrides``.

    Raises:
        InvalidConfigError: an unknown key, a value of the wrong type or an inconsistent spec.
    """
    typed = {
        **typed_values(_FIELDS, values, from_text=False),
        **typed_values(_FIELDS, overrides or {}, from_text=True),
    }
    for key in ("root", "checkpoints", "records", "changelog", "assignment_root"):
        if typed.get(key) and typed.get(f"{key}_format") != "kafka":  # a topic is not a path
            typed[key] = resolve_path(typed[key].replace(WAREHOUSE, warehouse))
    typed["root"] = typed.get("root") or resolve_path(f"{warehouse}/{name}")
    return PipelineSpec(name=name, **typed)


def load_pipeline(
    name: str, warehouse: str, path: str | Path | None = None, overrides: Mapping[str, str] | None = None
) -> PipelineSpec:
    """The spec of ``[pipeline.<name>]`` in the configuration file (see :func:`spec_from_values`)."""
    return spec_from_values(name, pipeline_section(name, path), warehouse, overrides)


def source_schema(key: str, text: str) -> T.StructType | str:
    """A landing folder's schema: a schema declared in ``schemas/`` by name, or a DDL string."""
    if not text:
        raise InvalidConfigError(key, "a json or parquet landing folder needs a schema (a name or DDL)")
    if _IDENTIFIER.fullmatch(text):
        if text not in schema_names():
            raise InvalidConfigError(key, f"no schema {text!r} in schemas/ (known: {schema_names()})")
        return load_schema(text)
    return text
