"""Table locations: relative paths resolve against the working directory, URIs pass through untouched."""

from __future__ import annotations

from pathlib import Path


def resolve_path(path: str) -> str:
    """``path`` as Spark and Delta need it: an absolute local path, or the URI as given.

    ``s3a://bucket/x``, ``file:/tmp/x`` and other URIs (anything with a scheme) are returned unchanged;
    ``~`` is expanded; a relative path (``warehouse/rates``) is resolved against the working directory,
    like the warehouse setting.
    """
    if "://" in path or path.startswith("file:"):
        return path
    return str(Path(path).expanduser().resolve())
