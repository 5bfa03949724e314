"""Packages whose public names are imported on first use (PEP 562): importing the package imports nothing
heavy (Spark, Delta, pyarrow), so the ``lakehouse`` command can start and say what it does first."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, namespace: dict[str, Any], exports: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package`` (whose globals are ``namespace``), where
    ``exports`` maps each module to the public names it provides; a name is imported on its first use and
    kept in ``namespace``."""
    module_of = {name: module for module, names in exports.items() for name in names}

    def getattr_(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *module_of})

    return sorted(module_of), getattr_, dir_
