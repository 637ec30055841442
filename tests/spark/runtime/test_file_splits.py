"""A live run's file reads split across the cores (runtime/partitions.py): Spark takes the open
cost a live run's session is built with (`launch.session_options`, from `Choice.conf`), reads one
file of a batch in as many tasks as the session has cores, and every line once; with Spark's own
(4 MiB) the same file is one task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.inproc import sql_conf  # the settings for a block, the session's own again after
from pyspark.sql import DataFrame, SparkSession

from slipstream.runtime import runner
from slipstream.runtime.launch import session_options
from slipstream.runtime.partitions import OPEN_COST
from slipstream.settings.config import load_settings

pytestmark = pytest.mark.spark

SPARKS_OPEN_COST = 4 * 2**20  # Spark's own: 4 MiB


def read_once(spark: SparkSession, folder: Path, checkpoint: Path) -> tuple[int, list[str]]:
    """One available-now batch of the folder: its read tasks and its lines."""
    seen: dict[str, object] = {}

    def batch(frame: DataFrame, batch_id: int) -> None:
        seen["tasks"] = frame.rdd.getNumPartitions()
        seen["lines"] = [r.value for r in frame.collect()]

    query = (
        spark.readStream.format("text").load(str(folder)).writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    return seen["tasks"], seen["lines"]  # type: ignore[return-value]


def test_one_file_of_a_live_batch_is_read_by_every_core_and_every_line_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    sent = [json.dumps({"id": f"p{n}", "action": "open", "pad": "x" * 60}) for n in range(10_000)]
    (folder / "actions.json").write_text("\n".join(sent) + "\n")  # about 1 MB: 10,000 events
    live = runner.prepare(
        load_settings(
            "mobile",
            {"input": str(folder), "state_dir": tmp_path / "state", "master": "local[2]"},
            environ={},
        )
    )
    conf = session_options(live)["conf"]
    assert OPEN_COST in conf
    cores = spark.sparkContext.defaultParallelism
    with sql_conf(spark, {OPEN_COST: str(SPARKS_OPEN_COST)}):
        tasks, lines = read_once(spark, folder, tmp_path / "spark-default")
    assert tasks == 1 and sorted(lines) == sorted(sent)
    with sql_conf(spark, {OPEN_COST: conf[OPEN_COST]}):
        tasks, lines = read_once(spark, folder, tmp_path / "live")
    assert cores > 1 and tasks == cores
    assert sorted(lines) == sorted(sent)  # split at byte offsets: no line lost, none twice
