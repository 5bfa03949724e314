"""The pipeline's stages by name, in the order ``all`` runs them, and which of them a run takes.

Light to import (no Spark): the ``lakehouse`` command's parser and its checks before Spark need the names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakehouse.errors import InvalidInputError

if TYPE_CHECKING:
    from lakehouse.pipeline.spec import PipelineSpec

#: Every stage in the order ``all`` runs them: the store is current before records are joined with it.
ORDER = ("materialize", "ingest", "enrich", "maintain", "assign")
ALL = "all"


def stages_of(stage: str, spec: PipelineSpec) -> list[str]:
    """The stages ``stage`` names (``all``: those the spec has sources or tables for, in order).

    Raises:
        InvalidInputError: an unknown stage.
    """
    if stage == ALL:
        wanted = {"materialize": bool(spec.changelog), "ingest": bool(spec.records)}
        wanted["enrich"] = wanted["ingest"] and bool(spec.changelog)
        return [name for name in ORDER if wanted.get(name, True)]
    if stage not in ORDER:
        raise InvalidInputError(f"unknown stage {stage!r}; one of {[*ORDER, ALL]}")
    return [stage]


def stage_names() -> Sequence[str]:
    """The names ``run`` accepts."""
    return [*ORDER, ALL]
