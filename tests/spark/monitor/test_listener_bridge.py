"""The run's listener in a real session: Spark's progress events reach it as Spark's own JSON of
them (monitor/listener.py carries each as its text, in one call into the JVM), every batch's,
equal to what the query itself reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.monitor.events import batch_executed
from slipstream.monitor.listener import RunListener

pytestmark = [pytest.mark.spark]


def test_every_progress_arrives_as_the_query_reports_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "in"
    landing.mkdir()
    seen: list[dict[str, Any]] = []
    listener = RunListener("bridge", [seen.append])
    spark.streams.addListener(listener)
    try:
        stream = spark.readStream.schema("k STRING, v LONG").json(str(landing))
        counts = stream.groupBy("k").agg(F.sum("v").alias("total"))
        query = (
            counts.writeStream.queryName("bridge.counts")
            .outputMode("complete")
            .format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        try:
            for i, rows in enumerate([[("a", 1), ("b", 2)], [("a", 3)], [("c", 4), ("a", 5)]]):
                lines = [json.dumps({"k": k, "v": v}) for k, v in rows]
                (landing / f"part-{i}.json").write_text("\n".join(lines) + "\n")
                query.processAllAvailable()
            # an idle report (no batch ran for spark.sql.streaming.noDataProgressEventInterval,
            # which a loaded machine can reach between two files) stays in recentProgress but
            # reaches listeners as onQueryIdle, not as a progress event
            reported = [
                json.loads(p.json)
                for p in query.recentProgress
                if batch_executed(json.loads(p.json))
            ]
        finally:
            query.stop()
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # every event delivered
    finally:
        spark.streams.removeListener(listener)
    progress = [
        r["progress"] for r in seen if r["event"] == "progress" and batch_executed(r["progress"])
    ]
    assert [p["batchId"] for p in progress] == [0, 1, 2]
    assert [p["batchId"] for p in progress] == [p["batchId"] for p in reported]
    assert progress == reported  # Spark's JSON, every field and state metric as reported
    assert [p["numInputRows"] for p in progress if p["numInputRows"]] == [2, 1, 2]
    assert all(r["query"] == "bridge.counts" for r in seen)
    ops = progress[-1]["stateOperators"]
    assert ops and ops[0]["numRowsTotal"] == 3  # a, b, c
