"""Work-arounds for the libraries we run with, in one place."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def import_great_expectations() -> ModuleType:
    """Import ``great_expectations`` safely under ``python -c`` and from stdin.

    GX imports ``pyspark.sql.connect`` (inside ``try/except ImportError``). With PySpark 4.2 and no
    ``grpc`` installed, that import calls ``sys.exit(0)`` when ``__main__`` has no file (PySpark takes it
    for a doctest run), silently ending the process. The check is skipped when ``sys.ps1`` exists, so it is
    set for the import; PySpark then raises the ``ImportError`` GX expects and GX works without Connect.
    """
    if "great_expectations" in sys.modules:
        return sys.modules["great_expectations"]
    had_ps1 = hasattr(sys, "ps1")
    if not had_ps1:
        sys.ps1 = ""
    try:
        return importlib.import_module("great_expectations")
    finally:
        if not had_ps1:
            del sys.ps1
