"""A local master looks up a batch's files on the driver (settings/session.py): over 32 files
Spark would otherwise run a job of one task per file to do it, each deserializing the Hadoop
configuration (0.6 s of CPU a batch of 500 files). Told by the stages Spark ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.settings.session import LOCAL_LISTING

pytestmark = pytest.mark.spark

FILES = 40  # over Spark's threshold of 32
[(KEY, OURS)] = LOCAL_LISTING.items()


def stage_tasks(spark: SparkSession, landing: Path, threshold: str, tmp_path: Path) -> list[int]:
    """The task count of every stage a one-batch file stream over `landing` ran."""
    spark.conf.set(KEY, threshold)
    try:
        query = (
            spark.readStream.schema("n INT")
            .json(str(landing))
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / f"ck-{threshold}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    finally:
        spark.conf.set(KEY, OURS)
    tracker = spark.sparkContext.statusTracker()
    tasks = []
    for job in tracker.getJobIdsForGroup(str(query.runId)):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            if (stage_info := tracker.getStageInfo(stage)) is not None:
                tasks.append(stage_info.numTasks)
    return tasks


def test_a_batch_of_many_files_is_listed_without_a_job(spark: SparkSession, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    for i in range(FILES):
        (landing / f"f{i}.json").write_text(f'{{"n": {i}}}\n')
    assert spark.conf.get(KEY) == OURS  # the session's default on a local master
    ours = stage_tasks(spark, landing, OURS, tmp_path)
    sparks = stage_tasks(spark, landing, "32", tmp_path)  # Spark's own threshold
    assert ours and FILES not in ours, ours
    assert FILES in sparks, sparks  # the listing job: a task per file
