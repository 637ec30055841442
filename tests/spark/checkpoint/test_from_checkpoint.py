"""A new version beside the old (issue 28 item 3): mobile runs on checkpoint OLD, more files
land, and mobile with another window runs on a new state dir `--from-checkpoint OLD`. Its table
must count exactly the records of the files landed after OLD's position (pandas over those
files), none of OLD's files reach it (not even as quarantined records), and a restart on its own
checkpoint, with no flag, reads only what landed since, without doubling anything."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.checkpoint.logs import logged_files
from slipstream.checkpoint.start import RECORD, read_record
from slipstream.runtime.ingest_stage import MARK as STAGED
from slipstream.testing import PipelineHarness
from tests.helpers import mobile_counts
from tests.services import produce

pytestmark = pytest.mark.spark

BASE = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def land(folder: Path, k: int, bad: bool = False) -> list[str]:
    """File k: 150 records in its own 7 minutes (a 5- or 10-minute window spans two files),
    in order of k by modification time; `bad` adds a line the parser quarantines."""
    rng = random.Random(k)
    lines = [
        json.dumps(
            {
                "id": f"phone{rng.randrange(20)}",
                "action": rng.choice(["open", "close", "crash"]),
                "ts": (BASE + timedelta(minutes=7 * k, seconds=rng.randrange(420))).isoformat(),
            }
        )
        for _ in range(150)
    ]
    path = folder / f"file{k}.json"
    path.write_text("\n".join([*lines, *(["not json"] if bad else [])]) + "\n")
    os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))
    return lines


def table(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT window_start, action, count FROM mobile_action_counts")
        return sorted(rows.fetchall())


def expected(lines: list[str], window: str) -> list[tuple[str, str, int]]:
    return sorted(mobile_counts(lines, window).itertuples(index=False, name=None))


def quarantined(state: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((state / "quarantine" / "mobile").rglob("*.json"))
        for line in path.read_text().splitlines()
    ]


def mobile(spark: SparkSession, workdir: Path, state: str, **settings: Any) -> PipelineHarness:
    return PipelineHarness(
        spark,
        "mobile",
        workdir,
        sink="sqlite",
        trigger="available-now",
        state_dir=workdir / state,
        **settings,
    )


def test_a_new_window_from_the_old_checkpoint_counts_each_new_record_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    old_lines = land(folder, 0, bad=True) + land(folder, 1)
    with mobile(spark, tmp_path, "old") as h:
        h.process()
    old_db = tmp_path / "old" / "slipstream.db"
    assert table(old_db) == expected(old_lines, "10min")

    new_lines = land(folder, 2, bad=True) + land(folder, 3)
    old = tmp_path / "old"
    with mobile(spark, tmp_path, "new", window="5m", from_checkpoint=old) as h:
        h.process()
    new_db = tmp_path / "new" / "slipstream.db"
    # exactly the records landed after OLD's position, in the new 5-minute windows
    assert table(new_db) == expected(new_lines, "5min")
    # OLD's files were listed by the new checkpoint (seen) but none of their records arrived,
    # not even the bad line of file0: only file2's is in the new quarantine
    root = tmp_path / "new" / "checkpoints" / "mobile"
    # the query that reads the raw files: the output, or under the ingest stage its ingest query
    raw = "quarantine.actions" if (root / "counts" / STAGED).is_file() else "counts"
    seen = {Path(f.path).name for f in logged_files(root / raw)}
    assert {"file0.json", "file1.json", "file2.json", "file3.json"} <= seen
    assert [r["source"].rsplit("/", 1)[-1] for r in quarantined(tmp_path / "new")] == ["file2.json"]
    start = read_record(root)
    assert start is not None and start.recorded and (root / RECORD).stat().st_mode & 0o077 == 0
    assert sorted(Path(f).name for f in start.inputs["actions"].files) == [
        "file0.json",
        "file1.json",
    ]

    # a restart on the new checkpoint, without the flag: the same files skipped, file4 read
    new_lines += land(folder, 4)
    with mobile(spark, tmp_path, "new", window="5m") as h:
        # every query committed the batch that listed OLD's files: Spark never lists them
        # again, so the restart's plan carries no filter
        assert h.prepared.inputs["actions"].binding.skip_files == frozenset()
        h.process()
    assert table(new_db) == expected(new_lines, "5min")
    assert table(old_db) == expected(old_lines, "10min")  # OLD untouched
    assert len(quarantined(tmp_path / "new")) == 1


@pytest.mark.kafka
def test_kafka_starts_at_the_old_checkpoints_offsets(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The same over a Kafka topic of 2 partitions: the new checkpoint starts at OLD's
    committed end offsets (without them it would start at `latest` and read nothing)."""
    topic = kafka.create_topic("t-from-checkpoint", 2)
    lines = sorted(_mobile_lines(600), key=lambda line: json.loads(line)["ts"])
    produce(kafka.bootstrap, topic, lines[:300])

    def run(state: str, url: str, **settings: Any) -> None:
        with mobile(kafka_spark, tmp_path, state, source=None, input=[url], **settings) as h:
            h.process()

    run("old", kafka.url(topic, startingOffsets="earliest"))
    assert table(tmp_path / "old" / "slipstream.db") == expected(lines[:300], "10min")
    produce(kafka.bootstrap, topic, lines[300:600])
    run("new", kafka.url(topic), window="5m", from_checkpoint=tmp_path / "old")
    assert table(tmp_path / "new" / "slipstream.db") == expected(lines[300:600], "5min")
    # (a restart is the files test's: Spark reads startingOffsets on a new checkpoint only)


def _mobile_lines(count: int) -> list[str]:
    rng = random.Random(11)
    return [
        json.dumps(
            {
                "id": f"phone{rng.randrange(30)}",
                "action": rng.choice(["open", "close", "crash"]),
                "ts": (BASE + timedelta(seconds=rng.randrange(3 * 3600))).isoformat(),
            }
        )
        for _ in range(count)
    ]
