"""What Spark 4.3's real-time mode can run of each built-in pipeline, read from the real plans
(`slipstream.analysis.realtime` on the frames `build` returns; the source kind is given as
Kafka, the only one real-time mode reads), and the two deduplication forms of `watermarked`
against each other on a running query.

The forms: `within-watermark` (dropDuplicatesWithinWatermark(unique)) and `event-time`
(dropDuplicates(unique + event time), what real-time mode runs). They keep the same records
when a repeat carries the same event time, and differ for a repeat with another event time."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.analysis.plan import plan_of
from slipstream.analysis.realtime import blockers
from slipstream.api.frames import dedup_difference, watermarked
from slipstream.api.schema import parse_ddl
from slipstream.pipelines.registry import get_pipeline
from tests.helpers import built

pytestmark = pytest.mark.spark


def _plans(spark: SparkSession, name: str, tmp_path: Path, **params: str) -> dict[str, Any]:
    pipeline = get_pipeline(name)
    tmp_path.mkdir(parents=True, exist_ok=True)
    tables = {}
    for spec in pipeline.inputs:
        if spec.static:  # an empty CSV with the header: the plan is all `check` reads
            path = tmp_path / f"{spec.name}.csv"
            path.write_text(",".join(f.name for f in spec.schema.fields) + "\n")
            tables[spec.name] = path
    (tmp_path / "in").mkdir(parents=True, exist_ok=True)
    frames = built(spark, pipeline, tmp_path / "in", params, **tables)
    return {out: plan_of(frame) for out, frame in frames.items()}


def test_what_real_time_mode_runs_of_each_pipeline(spark: SparkSession, tmp_path: Path) -> None:
    """Every output of every pipeline under real-time mode into SQLite, in update mode where
    the output offers it (the mode a real-time run picks): trending's views and sensors
    (event-time form) run, as does iot_steps (mobile and wordcount:
    tests/e2e/kafka/test_realtime.py); temperature_load, ads and activity are each refused
    naming the operator, one line per output, with the mode's reason where the output offers
    append only."""
    offered = {
        name: {o.name: o.modes for o in get_pipeline(name).outputs}
        for name in ("iot_steps", "sensors", "trending", "temperature_load", "ads", "activity")
    }
    found: dict[tuple[str, str], list[str]] = {}
    for name, params in [
        ("iot_steps", {}),
        ("sensors", {"dedup": "event-time"}),
        ("trending", {"dedup": "event-time"}),
        ("temperature_load", {}),
        ("ads", {}),
        ("activity", {}),
    ]:
        for out, plan in _plans(spark, name, tmp_path / name, **params).items():
            mode = "update" if "update" in offered[name][out] else offered[name][out][0]
            found[name, out] = blockers(plan, mode, "sqlite", "kafka")
    runs = [k for k, why in found.items() if not why]
    assert sorted(runs) == [
        ("iot_steps", "steps"),
        ("sensors", "sensor_alerts"),
        ("sensors", "sensor_baseline"),
        ("sensors", "sensor_stats"),
        ("trending", "views"),
    ], found
    update_only = "real-time mode runs update mode only"
    # trending's archive (off unless given a sink) is views' query in append mode, its only one
    assert found["trending", "archive"] == [
        "--mode append: real-time mode runs update mode only "
        "(Spark: STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED)"
    ]
    join = "operator stream-stream join (it emits in append mode only)"
    assert found["temperature_load", "temperature_load"][-1] == join
    assert update_only in found["temperature_load", "temperature_load"][0]
    for out in ("ad_clicks_attributed", "ad_impressions_outcome"):
        assert join in found["ads", out] and update_only in found["ads", out][0], found
    # campaign_stats reads a union, not the join: only the deduplication stops it
    assert found["ads", "campaign_stats"] == [
        "operator dropDuplicatesWithinWatermark (StreamingDeduplicateWithinWatermarkExec is not "
        "in Spark's real-time allow-list: STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_"
        "ALLOWLIST)"
    ]
    tws = "operator transformWithState / flatMapGroupsWithState (not in Spark's real-time"
    assert any(w.startswith(tws) for w in found["activity", "user_status"])
    assert any(w.startswith(tws) for w in found["activity", "user_alerts"])
    assert "operator session window (no update mode)" in found["activity", "user_sessions"]


def test_within_watermark_is_what_stops_trending_and_sensors(
    spark: SparkSession, tmp_path: Path
) -> None:
    """With `--dedup within-watermark` (a micro-batch run's form) the deduplication is the one
    blocker of trending's views and of sensors' stats."""
    for name, out in (("trending", "views"), ("sensors", "sensor_stats")):
        plan = _plans(spark, name, tmp_path / name, dedup="within-watermark")[out]
        [why] = blockers(plan, "update", "sqlite", "kafka")
        assert why.startswith("operator dropDuplicatesWithinWatermark"), why


def test_dedup_by_timers_is_refused_by_name_in_real_time_mode(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`--dedup timers` is a transformWithState: real-time mode's refusal names the flag and
    the forms it runs, and the plan counts it as a deduplication keyed by event_id."""
    plan = _plans(spark, "trending", tmp_path, dedup="timers")["views"]
    assert (plan.dedup, plan.dedup_timers, plan.dedup_within_watermark) == (True, True, False)
    [why] = blockers(plan, "update", "sqlite", "kafka")
    assert why.startswith("--dedup timers (a transformWithState"), why
    assert "--dedup auto or event-time" in why
    assert dedup_difference(("event_id",), "ts", "timers").startswith(
        "dropDuplicatesWithinWatermark(event_id) by event-time timers"
    )


SCHEMA = parse_ddl("event_id STRING, ts TIMESTAMP")


def _kept(spark: SparkSession, folder: Path, dedup: str, checkpoint: Path) -> list[tuple[str, str]]:
    """The (event_id, ts) rows `watermarked(..., unique=(event_id,), dedup)` keeps from the
    files of `folder`, one micro-batch per file in name order (availableNow)."""
    frame = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(folder))
    kept = watermarked(frame, "ts", timedelta(minutes=10), ("event_id",), dedup)
    name = f"dedup_{dedup.replace('-', '_')}_{folder.name}"
    query = (
        kept.select("event_id", kept.ts.cast("string").alias("ts"))
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint / name))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted((r.event_id, r.ts) for r in spark.table(name).collect())


def _files(folder: Path, batches: list[list[tuple[str, str]]]) -> Path:
    folder.mkdir(parents=True)
    for i, rows in enumerate(batches):
        lines = [json.dumps({"event_id": e, "ts": f"2026-03-02T{t}:00Z"}) for e, t in rows]
        (folder / f"{i:02d}.json").write_text("\n".join(lines) + "\n")
    return folder


def test_the_two_deduplications_agree_on_exact_repeats_and_differ_on_a_new_time(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Three micro-batches (one file each) under a 10-minute watermark. Batch 1: e1 at 10:00
    twice, e2 at 10:05, e3 at 10:30 (the watermark becomes 10:20). Batch 2: e1 at 10:00 again
    (late under both forms: at or before 10:20) and e3 at 10:30 again (held under both: a
    duplicate). Batch 3: e3 re-sent at 10:35, another time: within-watermark drops it (e3 is
    held until the watermark passes 10:30 + 10m), event-time keeps it as a new record. The
    expected rows are written out from those rules (pandas has no watermark to compare)."""
    folder = _files(
        tmp_path / "in",
        [
            [("e1", "10:00"), ("e1", "10:00"), ("e2", "10:05"), ("e3", "10:30")],
            [("e1", "10:00"), ("e3", "10:30")],
            [("e3", "10:35")],
        ],
    )
    same = [
        ("e1", "2026-03-02 10:00:00"),
        ("e2", "2026-03-02 10:05:00"),
        ("e3", "2026-03-02 10:30:00"),
    ]
    assert _kept(spark, folder, "within-watermark", tmp_path / "cp") == same
    assert _kept(spark, folder, "event-time", tmp_path / "cp") == [
        *same,
        ("e3", "2026-03-02 10:35:00"),
    ]
    text = dedup_difference(("event_id",), "ts", "event-time")
    assert text.startswith("dropDuplicates(event_id, ts): ")
    assert "another ts is kept by dropDuplicates(event_id, ts)" in text
    assert dedup_difference(("sensor_id", "event_time"), "event_time", "event-time").endswith(
        "event_time is among the keys, so every repeat carries the same time"
    )
