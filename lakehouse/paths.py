"""Table locations: relative paths resolve against the working directory, URIs pass through untouched."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")
#: How deep under a root tables are looked for (``lakehouse tables``): at most this many path parts.
MAX_TABLE_DEPTH = 4


def resolve_path(path: str) -> str:
    """``path`` as Spark and Delta need it: an absolute local path, or the URI as given.

    ``s3a://bucket/x``, ``file:/tmp/x`` and other URIs (anything with a scheme) are returned unchanged;
    ``~`` is expanded; a relative path (``warehouse/rates``) is resolved against the working directory,
    like the warehouse setting.
    """
    if "://" in path or path.startswith("file:"):
        return path
    return str(Path(path).expanduser().resolve())


def is_local(path: str) -> bool:
    """Whether ``path`` is on the local file system (a plain path or a ``file:`` URI)."""
    return urlparse(path).scheme in ("", "file")


def local_path(path: str) -> str:
    """``path`` without a ``file:`` scheme."""
    parsed = urlparse(path)
    return parsed.path if parsed.scheme == "file" else path


def table_name(parts: Sequence[str]) -> str:
    """The SQL name of the table at the relative path ``parts`` under a root (``demo/store`` ->
    ``demo_store``): the parts joined by ``_``, anything not a letter, digit or ``_`` replaced by ``_``."""
    return _NOT_IDENTIFIER.sub("_", "_".join(parts))
