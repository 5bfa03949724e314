"""Typed configuration loaded from ``conf/lakehouse.toml``.

Precedence, later wins: built-in defaults < the chosen profile of the TOML file < ``LAKEHOUSE_<KEY>``
environment variables < explicit overrides (the CLI's ``--set key=value``). Unknown keys, unknown
``LAKEHOUSE_*`` variables and values of the wrong type raise :class:`InvalidConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from lakehouse._resources import resource_dir
from lakehouse.errors import InvalidConfigError
from lakehouse.paths import resolve_path

DEFAULT_PROFILE = "local"
ENV_PREFIX = "LAKEHOUSE_"
# Environment variables that choose the file and profile rather than set a key.
ENV_PROFILE = "LAKEHOUSE_PROFILE"
ENV_CONFIG = "LAKEHOUSE_CONFIG"
_LOG_LEVELS = ("ERROR", "WARN", "INFO", "DEBUG")
#: The top-level TOML table holding one ``[pipeline.<name>]`` job spec per pipeline (not a profile).
PIPELINE_TABLE = "pipeline"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_DURATION_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@dataclass(frozen=True)
class Settings:
    """One resolved configuration profile (see ``conf/lakehouse.toml`` for what each key does)."""

    master: str = "local[*]"
    app_name: str = "lakehouse"
    warehouse: str = "warehouse"
    ivy_cache: str = "~/.cache/lakehouse/ivy"
    log_level: str = "WARN"
    driver_memory: str = "4g"
    shuffle_partitions: int = 8
    extra_packages: tuple[str, ...] = ()
    quiet: bool = True
    s3_endpoint: str = ""
    spark: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.log_level not in _LOG_LEVELS:
            raise InvalidConfigError(
                "log_level", f"must be one of {list(_LOG_LEVELS)}, got {self.log_level!r}"
            )
        if self.shuffle_partitions < 1:
            raise InvalidConfigError("shuffle_partitions", f"must be >= 1, got {self.shuffle_partitions}")
        for key in self.spark:
            if not key.startswith("spark."):
                raise InvalidConfigError(f"spark.{key}", "Spark conf keys must start with 'spark.'")


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def default_config_path() -> Traversable:
    """``conf/lakehouse.toml`` of the working directory if there is one, else the packaged default."""
    local = Path("conf") / "lakehouse.toml"
    return local if local.is_file() else resource_dir("conf") / "lakehouse.toml"


def load_settings(
    profile: str | None = None,
    path: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve the settings of ``profile`` (default: ``$LAKEHOUSE_PROFILE`` or ``local``).

    Args:
        profile: Profile (top-level table) of the TOML file.
        path: TOML file; default ``$LAKEHOUSE_CONFIG``, else :func:`default_config_path`.
        overrides: ``key -> value`` strings, highest precedence (the CLI's ``--set``).
        environ: Environment to read ``LAKEHOUSE_*`` from (default ``os.environ``).

    Raises:
        InvalidConfigError: a missing or malformed file, an unknown profile, key or environment variable,
            or a value of the wrong type.
    """
    env = os.environ if environ is None else environ
    profile = profile_name(profile, env)
    config_path = config_file(path, env)
    document = _read_toml(config_path)
    profiles = sorted(name for name in document if name != PIPELINE_TABLE)
    if profile not in profiles:
        raise InvalidConfigError(
            "profile", f"{profile!r} is not a profile of {config_path} (profiles: {', '.join(profiles)})"
        )
    if not isinstance(document[profile], dict):
        raise InvalidConfigError("profile", f"{profile!r} in {config_path} must be a TOML table")
    values: dict[str, Any] = {}
    for key, raw in document[profile].items():
        values[key] = _typed(key, raw, from_text=False)
    for key, raw in _env_values(env).items():
        values[key] = _typed(key, raw, from_text=True)
    for key, raw in (overrides or {}).items():
        values[key] = _typed(key, raw, from_text=True)
    return Settings(**values)


def profile_name(profile: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The profile chosen: ``profile``, else ``$LAKEHOUSE_PROFILE``, else :data:`DEFAULT_PROFILE`."""
    env = os.environ if environ is None else environ
    return profile or env.get(ENV_PROFILE) or DEFAULT_PROFILE


def _read_toml(path: Traversable) -> dict[str, Any]:
    """The TOML document at ``path``; a missing, unreadable or malformed file is one config error."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise InvalidConfigError("config", f"file {str(path)!r} does not exist") from None
    except OSError as error:
        raise InvalidConfigError("config", f"cannot read {str(path)!r}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidConfigError("config", f"{str(path)!r} is not valid TOML: {error}") from None


def config_file(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Traversable:
    """The TOML file to read: ``path``, else ``$LAKEHOUSE_CONFIG``, else :func:`default_config_path`."""
    env = os.environ if environ is None else environ
    chosen = path or env.get(ENV_CONFIG)
    return Path(chosen) if chosen else default_config_path()


def pipeline_section(name: str, path: str | Path | None = None) -> dict[str, Any]:
    """The raw ``[pipeline.<name>]`` table of the configuration file (a job spec, see ``lakehouse.pipeline``).

    Raises:
        InvalidConfigError: the file has no such pipeline (the message lists those it has).
    """
    config_path = config_file(path)
    pipelines = _read_toml(config_path).get(PIPELINE_TABLE, {})
    if name not in pipelines:
        raise InvalidConfigError("pipeline", f"{name!r} is not in {config_path} (has {sorted(pipelines)})")
    return dict(pipelines[name])


def typed_values(
    fields: Mapping[str, dataclasses.Field[Any]], values: Mapping[str, Any], from_text: bool
) -> dict[str, Any]:
    """``values`` checked against the types of the dataclass ``fields`` (text from env/CLI parsed first).

    Supported field types: ``str``, ``int``, ``bool``, ``timedelta`` (``"90s"``, ``"10m"``, ``"1h"``,
    ``"1d"``, ``"250ms"``; ``timedelta | None`` also ``""`` for None), ``tuple[str, ...]`` (a TOML list,
    or comma-separated text).

    Raises:
        InvalidConfigError: an unknown key or a value of the wrong type, naming the key.
    """
    return {key: _typed(key, raw, from_text, fields) for key, raw in values.items()}


def parse_duration(key: str, text: str) -> timedelta:
    """A duration written as ``<number><unit>`` with unit ``ms``, ``s``, ``m``, ``h`` or ``d``."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise InvalidConfigError(key, f"expected a duration such as '90s', '10m', '1h' or '1d', got {text!r}")
    return timedelta(**{_DURATION_UNITS[found.group(2)]: float(found.group(1))})


def _env_values(env: Mapping[str, str]) -> dict[str, str]:
    values = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in (ENV_PROFILE, ENV_CONFIG):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key not in _FIELDS or key == "spark":
            raise InvalidConfigError(
                name, f"unknown setting; known: {sorted(k for k in _FIELDS if k != 'spark')}"
            )
        values[key] = raw
    return values


def _typed(
    key: str, raw: Any, from_text: bool, fields: Mapping[str, dataclasses.Field[Any]] = _FIELDS
) -> Any:
    """Check ``raw`` against the type of setting ``key``; text (env, CLI) is parsed first."""
    if key not in fields:
        raise InvalidConfigError(key, f"unknown setting; known: {sorted(fields)}")
    kind = fields[key].type
    if key == "spark":
        if from_text or not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise InvalidConfigError(key, "must be a TOML table of string values")
        return dict(raw)
    if kind == "int":
        if from_text:
            try:
                return int(raw)
            except ValueError:
                raise InvalidConfigError(key, f"expected an integer, got {raw!r}") from None
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise InvalidConfigError(key, f"expected an integer, got {type(raw).__name__} {raw!r}")
        return raw
    if kind in _EXTRA_KINDS:
        return _EXTRA_KINDS[kind](key, raw, from_text)
    if kind == "tuple[str, ...]":
        items = [p.strip() for p in raw.split(",") if p.strip()] if from_text else raw
        if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
            raise InvalidConfigError(key, f"expected a list of strings, got {raw!r}")
        return tuple(items)
    if not isinstance(raw, str):
        raise InvalidConfigError(key, f"expected a string, got {type(raw).__name__} {raw!r}")
    return raw


def _bool(key: str, raw: Any, from_text: bool) -> bool:
    if from_text and str(raw).lower() in ("true", "false"):
        return str(raw).lower() == "true"
    if not isinstance(raw, bool):
        raise InvalidConfigError(key, f"expected true or false, got {raw!r}")
    return raw


def _duration(key: str, raw: Any, from_text: bool) -> timedelta:
    if not isinstance(raw, str):
        raise InvalidConfigError(key, f"expected a duration string such as '10m', got {raw!r}")
    return parse_duration(key, raw)


def _optional_duration(key: str, raw: Any, from_text: bool) -> timedelta | None:
    return None if raw == "" else _duration(key, raw, from_text)


_EXTRA_KINDS = {"bool": _bool, "timedelta": _duration, "timedelta | None": _optional_duration}


def warehouse_uri(settings: Settings) -> str:
    """The warehouse as an absolute path or URI (``s3a://...`` and other URIs are kept as they are)."""
    return resolve_path(settings.warehouse)
