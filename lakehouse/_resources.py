"""Where the project's data folders (``schemas/``, ``conf/``) are: installed, zipped, or in a checkout."""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Traversable:
    """Return the folder ``name`` (``"schemas"`` or ``"conf"``).

    A wheel carries it as ``lakehouse/_data/<name>``, read through :mod:`importlib.resources` so it also
    works when the wheel itself is on ``sys.path`` (spark-submit's ``--py-files``); an editable install
    reads the repository's top-level ``<name>/`` folder, so there is a single copy of each file.
    """
    for candidate in (files("lakehouse").joinpath("_data", name), _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"lakehouse data folder {name!r} not found next to {_PACKAGE_DIR}")
