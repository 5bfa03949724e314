"""Every table schema lakehouse writes, declared once as JSON ``StructType`` files in ``schemas/``."""

from __future__ import annotations

import json
from functools import cache

from pyspark.sql import types as T

from lakehouse._resources import resource_dir
from lakehouse.errors import SchemaMismatchError


@cache
def load_schema(name: str) -> T.StructType:
    """Return the schema declared in ``schemas/<name>.json``."""
    path = resource_dir("schemas") / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no schema {name!r}; known: {schema_names()}")
    schema = T.StructType.fromJson(json.loads(path.read_text()))
    return schema


def schema_names() -> list[str]:
    """Names of all declared schemas."""
    return sorted(
        p.name.removesuffix(".json") for p in resource_dir("schemas").iterdir() if p.name.endswith(".json")
    )


def require_columns(actual: T.StructType, required: T.StructType, what: str) -> None:
    """Raise unless ``actual`` has every field of ``required`` with the same data type.

    Nullability is not compared here: callers check nulls in the data where the contract forbids them.

    Raises:
        SchemaMismatchError: lists the missing columns and those of the wrong type.
    """
    have = {f.name: f.dataType for f in actual.fields}
    missing = [f.name for f in required.fields if f.name not in have]
    wrong = {
        f.name: f"expected {f.dataType.simpleString()}, got {have[f.name].simpleString()}"
        for f in required.fields
        if f.name in have and have[f.name] != f.dataType
    }
    if missing or wrong:
        raise SchemaMismatchError(what, missing, wrong)
