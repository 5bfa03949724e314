"""Damaged Delta tables are named in one line, not mis-read, and nothing is written on top of them."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.cli import build_parser
from lakehouse.dedup import Deduplicator
from lakehouse.doctor import run_table_doctor, table_health
from lakehouse.errors import DamagedTableError
from lakehouse.versioned import VersionedStore
from tests.dedup.helpers import frame
from tests.reference.dedup import Rec
from tests.versioned.helpers import batch_frame, create_store


@pytest.fixture(scope="module")
def sound_store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of four commits with a checkpoint at version 1, to be copied and damaged."""
    path = tmp_path_factory.mktemp("damage") / "store"
    store = create_store(spark, str(path), retention_ms=10_000_000)
    store.put_all(batch_frame(spark, [("a", "a1", 100, 0, 0)]))
    jvm = spark.sparkContext._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))
    none = jvm.scala.Option.empty()
    log.checkpoint(log.update(False, none, none), none)
    store.put_all(batch_frame(spark, [("a", "a2", 200, 0, 1), ("b", "b1", 200, 0, 2)]))
    store.put_all(batch_frame(spark, [("a", "a3", 300, 0, 3)]))
    return path


@pytest.fixture
def store(sound_store: Path, tmp_path: Path) -> Path:
    """A copy of the sound store, to damage."""
    path = tmp_path / "store"
    shutil.copytree(sound_store, path)
    return path


def _commits(log: Path) -> list[Path]:
    return sorted(log.glob("*.json"))


def _rewrite(file: Path, content: bytes) -> None:
    """Write ``content`` over ``file`` as a hand edit or a torn write would (no checksum sidecar left)."""
    file.write_bytes(content)
    (file.parent / f".{file.name}.crc").unlink(missing_ok=True)


def _zero_byte_last_commit(log: Path) -> None:
    _rewrite(_commits(log)[-1], b"")


def _truncated_last_commit(log: Path) -> None:
    last = _commits(log)[-1]
    text = last.read_bytes()
    _rewrite(last, text[: len(text) // 2])


def _last_line_cut(log: Path) -> None:
    last = _commits(log)[-1]
    lines = last.read_bytes().splitlines(keepends=True)
    _rewrite(last, b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])


def _missing_middle_commit(log: Path) -> None:
    (log / f"{2:020d}.json").unlink()  # after the checkpoint (version 1): the newest state needs it


def _truncated_checkpoint(log: Path) -> None:
    checkpoint = next(log.glob("*.checkpoint.parquet"))
    _rewrite(checkpoint, checkpoint.read_bytes()[:100])
    _only_the_checkpoint_leads_to_version_1(log)


def _missing_checkpoint(log: Path) -> None:
    next(log.glob("*.checkpoint.parquet")).unlink()
    _only_the_checkpoint_leads_to_version_1(log)


def _only_the_checkpoint_leads_to_version_1(log: Path) -> None:
    """Delete commits 0 and 1 (as log cleanup does once a checkpoint holds them)."""
    for commit in _commits(log)[:2]:
        commit.unlink()


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "zero-byte last commit": (_zero_byte_last_commit, "empty file"),
    "truncated last commit": (_truncated_last_commit, "cannot be parsed"),
    "last line cut": (_last_line_cut, "cannot be parsed"),
    "missing middle commit": (_missing_middle_commit, "DELTA_TRUNCATED_TRANSACTION_LOG"),
    "truncated checkpoint": (_truncated_checkpoint, "checkpoint"),
    "missing checkpoint": (_missing_checkpoint, "DELTA_MISSING_PART_FILES"),
}


READS_AND_WRITES: dict[str, Callable[[VersionedStore, SparkSession], object]] = {
    "get": lambda store, spark: store.get("a"),
    "seal": lambda store, spark: store.seal(),
    # At a3's time: the batch replaces that pending version, so its MERGE reaches the file holding it (a
    # batch of other times skips the file by its statistics).
    "put_all": lambda store, spark: store.put_all(batch_frame(spark, [("a", "a4", 300, 0, 4)])),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_log_is_named_in_one_line_and_nothing_is_written(
    spark: SparkSession, store: Path, damage: str
) -> None:
    harm, says = DAMAGES[damage]
    harm(store / "_delta_log")
    _refused_in_one_line(spark, store, says, READS_AND_WRITES["get"])
    _refused_in_one_line(spark, store, says, READS_AND_WRITES["put_all"])  # no write on top either
    assert not table_health(spark, str(store)).sound


def _refused_in_one_line(
    spark: SparkSession, path: Path, says: str, call: Callable[[VersionedStore, SparkSession], object]
) -> str:
    """``call`` on the store at ``path`` raises one ``DamagedTableError`` line naming the table, the
    damage (``says``) and the recovery, and writes nothing; the message."""
    files = sorted(p.name for p in (path / "_delta_log").iterdir())
    with pytest.raises(DamagedTableError, match=says) as raised:
        call(VersionedStore.open(spark, str(path)), spark)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message and "RESTORE TABLE" in message
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == files
    return message


def test_a_store_whose_folder_or_data_file_is_deleted_under_it_is_named(
    spark: SparkSession, store: Path
) -> None:
    path = store
    opened = VersionedStore.open(spark, str(path))
    assert opened.get("a") is not None and table_health(spark, str(path)).sound
    data = sorted(p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)
    data[-1].unlink()
    health = table_health(spark, str(path))
    assert not health.sound and "missing" in health.problems[0] and data[-1].name in health.problems[0]
    lines: list[str] = []
    assert run_table_doctor(spark, str(path), echo=lines.append) == 1  # `lakehouse doctor TABLE`
    assert lines[0].startswith("DAMAGED:") and "RESTORE TABLE" in lines[-1]
    assert build_parser().parse_args(["doctor", str(path)]).table == str(path)
    shutil.rmtree(path)
    with pytest.raises(DamagedTableError, match=r"no commit|deleted"):
        opened.get("a")
    assert not table_health(spark, str(path)).sound


def _delete_last_data_file(path: Path) -> str:
    """Delete the data file the store's last commit added (it holds key a's latest version); its name."""
    last = json.loads(
        next(line for line in _commits(path / "_delta_log")[-1].read_text().splitlines() if '"add"' in line)
    )
    name = unquote(last["add"]["path"])
    (path / name).unlink()
    return name


@pytest.mark.parametrize("call", list(READS_AND_WRITES))
def test_a_deleted_data_file_reached_by_a_read_or_write_is_named_and_nothing_is_written(
    spark: SparkSession, store: Path, call: str
) -> None:
    name = _delete_last_data_file(store)
    assert name in _refused_in_one_line(spark, store, "is missing", READS_AND_WRITES[call])


def test_a_deduplicators_damaged_sink_or_index_is_named_in_one_line_and_nothing_is_written(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The library's other tables go through the same checks: a sink whose last commit is an empty file
    (also on the path of a sink append, records with a `topic` column), an index whose last commit's
    last line is cut off, an index data file deleted."""
    index, sink = tmp_path / "index", tmp_path / "sink"
    dedup = Deduplicator.create(spark, str(index), by="id", interval=timedelta(seconds=10))
    records = frame(spark, [Rec(("a",), 100, 0, 0, "a")], ("id",)).withColumn("topic", F.lit("t"))
    dedup.run(records, 0, str(sink))

    def logs() -> dict[Path, list[str]]:
        return {t: sorted(p.name for p in (t / "_delta_log").iterdir()) for t in (index, sink)}

    cases = ((sink, _zero_byte_last_commit, "empty file"), (index, _last_line_cut, "cannot be parsed"))
    for table, harm, says in cases:
        last = _commits(table / "_delta_log")[-1]
        sound = last.read_bytes()
        harm(table / "_delta_log")
        files = logs()
        with pytest.raises(DamagedTableError, match=says) as raised:
            dedup.run(records, 1, str(sink))
        message = str(raised.value)
        assert "\n" not in message and str(table) in message and "RESTORE TABLE" in message
        assert logs() == files
        _rewrite(last, sound)  # repaired: the next case damages the other table alone
    name = _delete_last_data_file(index)  # batch 0's entry of id a, which batch 1 reads
    with pytest.raises(DamagedTableError, match="is missing") as raised:
        dedup.run(records, 1, str(sink))
    assert "\n" not in str(raised.value) and name in str(raised.value)
    assert logs() == files
