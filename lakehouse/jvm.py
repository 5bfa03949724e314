"""JVM classes reached through Py4J, resolved once per process.

Each step of ``spark.sparkContext._jvm.org.apache...`` is a Py4J round trip (and a class lookup in the JVM):
code that runs per batch or per commit names its classes through :func:`jvm_class` instead.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession


def jvm_class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (its full name) for calls of its static methods and constructors, resolved once
    per process and gateway."""
    client = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
    key = (id(client), name)
    if key not in _CLASSES:
        _CLASSES[key] = JavaClass(name, client)
    return _CLASSES[key]


#: :func:`jvm_class`'s classes, by gateway and name.
_CLASSES: dict[tuple[int, str], Any] = {}


def list_items(java_list: Any) -> list[Any]:
    """The items of a JVM ``java.util.List``, one Py4J round trip each (plus one for its size). Iterating the
    list itself (Py4J's ``JavaList``) measured about thirty round trips per item."""
    return [java_list.get(index) for index in range(java_list.size())]
