"""Where the project's data folders (``schemas/``, ``conf/``) are, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """Return the folder ``name`` (``"schemas"`` or ``"conf"``).

    A wheel carries it as ``lakehouse/_data/<name>``; an editable install reads the repository's
    top-level ``<name>/`` folder, so there is a single copy of each file.
    """
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"lakehouse data folder {name!r} not found next to {_PACKAGE_DIR}")
