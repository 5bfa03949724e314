from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse._jars import hadoop_aws_coordinate
from lakehouse.config import Settings, load_settings
from lakehouse.errors import InvalidConfigError
from lakehouse.session import embedded_conf


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lakehouse.toml"
    path.write_text(text)
    return path


def test_packaged_local_profile_loads_with_types() -> None:
    settings = load_settings("local", environ={})
    assert settings.master == "local[*]"
    assert isinstance(settings.shuffle_partitions, int)
    assert settings.spark["spark.sql.session.timeZone"] == "UTC"


def test_cluster_profile_loads() -> None:
    assert load_settings("cluster", environ={}).shuffle_partitions == 200


def test_s3_profile_reaches_an_endpoint_from_the_environment_with_pyspark_s_hadoop_aws() -> None:
    settings = load_settings("s3", environ={"LAKEHOUSE_S3_ENDPOINT": "http://127.0.0.1:8333"})
    # hadoop-aws must be the version of pyspark's own Hadoop jars, or S3A fails to load.
    assert settings.extra_packages == (hadoop_aws_coordinate(),)
    assert settings.warehouse.startswith("s3a://")
    conf = embedded_conf(settings, jars=[])
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert not any("secret" in key or "access.key" in key for key in conf)  # credentials: environment only
    aws = embedded_conf(load_settings("s3", environ={}), jars=[])
    assert "spark.hadoop.fs.s3a.endpoint" not in aws


def test_precedence_defaults_file_env_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, '[p]\nwarehouse = "from-file"\nshuffle_partitions = 3\n')
    assert load_settings("p", path, environ={}).warehouse == "from-file"
    assert load_settings("p", path, environ={}).app_name == Settings().app_name
    env = {"LAKEHOUSE_WAREHOUSE": "from-env", "LAKEHOUSE_SHUFFLE_PARTITIONS": "5"}
    from_env = load_settings("p", path, environ=env)
    assert (from_env.warehouse, from_env.shuffle_partitions) == ("from-env", 5)
    assert load_settings("p", path, {"warehouse": "from-cli"}, environ=env).warehouse == "from-cli"


def test_profile_and_file_from_environment(tmp_path: Path) -> None:
    path = _write(tmp_path, '[mine]\nlog_level = "ERROR"\n')
    env = {"LAKEHOUSE_CONFIG": str(path), "LAKEHOUSE_PROFILE": "mine"}
    assert load_settings(environ=env).log_level == "ERROR"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[p]\nwarehous = "typo"\n', "warehous"),
        ('[p]\nshuffle_partitions = "8"\n', "shuffle_partitions"),
        ("[p]\nshuffle_partitions = 0\n", "shuffle_partitions"),
        ('[p]\nlog_level = "LOUD"\n', "log_level"),
        ("[p]\nextra_packages = [1]\n", "extra_packages"),
        ('[p.spark]\n"sql.shuffle.partitions" = "2"\n', "spark.sql.shuffle.partitions"),
        ('[p.spark]\n"spark.x" = 2\n', "spark"),
    ],
)
def test_bad_file_keys_are_rejected_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        load_settings("p", _write(tmp_path, text), environ={})
    assert raised.value.key == key
    assert key in str(raised.value)


def test_unknown_environment_variable_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, "[p]\n")
    with pytest.raises(InvalidConfigError, match="LAKEHOUSE_WAREHOUS"):
        load_settings("p", path, environ={"LAKEHOUSE_WAREHOUS": "x"})


def test_bad_override_type_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="shuffle_partitions"):
        load_settings("p", _write(tmp_path, "[p]\n"), {"shuffle_partitions": "many"}, environ={})


def test_unknown_profile_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="nope"):
        load_settings("nope", _write(tmp_path, "[p]\n"), environ={})


def test_list_settings_parse_from_text(tmp_path: Path) -> None:
    settings = load_settings("p", _write(tmp_path, "[p]\n"), {"extra_packages": "a:b:1, c:d:2"}, environ={})
    assert settings.extra_packages == ("a:b:1", "c:d:2")
