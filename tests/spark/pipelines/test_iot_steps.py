"""iot_steps, seed 004's exercise: the sum of num_steps per 5-minute window under a 10-minute
watermark, appended when final. Proven against an independent computation over a dirty stream,
batch by batch (a window is written once, in the first batch whose watermark reaches its end),
and on the seed's own rows, read with its schema (gzipped, as the seed's files are). The
restart and SIGKILL cases are in the crash suite (tests/e2e/crash/test_crash.py)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from slipstream.pipelines import get_pipeline
from slipstream.testing import PipelineHarness
from slipstream.tools.generators import iot
from slipstream.tools.generators.streams import StreamSpec, generate
from slipstream.tools.views import results_view
from tests import stream_reference as ref
from tests.helpers import check_in_process, late_records

pytestmark = pytest.mark.spark

WINDOW, WATERMARK = timedelta(minutes=5), timedelta(minutes=10)


def test_each_window_is_written_once_in_the_first_batch_whose_watermark_reaches_its_end(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = StreamSpec(
        duration=timedelta(minutes=50), seed=9, file_every=timedelta(minutes=2),
        out_of_order=0.1, late=0.05, duplicates=0.0, malformed=0.03,
    )  # fmt: skip
    report = generate(spec, iot.Devices(rate=1.0), tmp_path / "landing")
    files = sorted((tmp_path / "landing").glob("device-*.jsonl"))
    batches = [p.read_text().splitlines() for p in files]
    with PipelineHarness(spark, "iot_steps", tmp_path, max_files_per_trigger=1) as h:
        for lines in batches:
            h.feed(lines)
        h.process()
        assert h.run is not None and h.collector is not None
        progress = h.progress("steps")
        emitted = h.collector.batches
        totals = h.totals["iot_steps.steps"]
    records, stats = ref.counted(
        batches, lambda line: ref.iot_record(line, datetime.now(UTC)), "timestamp", None,
        WATERMARK, WINDOW,
    )  # fmt: skip
    counts = report.streams["device"]
    assert stats["late"] == counts.late > 0 and stats["invalid"] == counts.malformed > 0
    assert totals["quarantined"] == counts.malformed
    # Spark counts late rows where the state is, after the partial aggregation: a batch's late
    # records of one window arrive there as one row. The sums below prove which were dropped.
    assert 0 < totals["late"] <= counts.late
    # the dead-letter holds the late records themselves: exactly the ones the model drops
    late = late_records(tmp_path / "state", "iot_steps", "steps")
    assert sum(len(b) for b in late.values()) == stats["late"]

    sums = ref.step_sums(records, WINDOW)
    final = {s: n for s, n in sums.items() if _end(s) <= stats["watermark"]}
    written = [(batch, row) for batch, rows in sorted(emitted.items()) for row in rows]
    assert sorted(row["window_start"] for _, row in written) == sorted(final)  # once each
    assert {row["window_start"]: row["num_steps"] for _, row in written} == final
    watermark = {p["batchId"]: _moment(p["eventTime"].get("watermark")) for p in progress}
    assert len(watermark) == max(watermark) + 1, "a batch's progress is missing"
    for batch, row in written:
        end = _end(row["window_start"])
        assert row["window_end"] == ref.iso(end)
        assert watermark[batch] >= end, "written before it was final"
        assert batch == 0 or watermark[batch - 1] < end, "final a batch earlier, written late"


def _end(start: str) -> datetime:
    return datetime.fromisoformat(start.replace("Z", "+00:00")) + WINDOW


def _moment(text: str | None) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else ref.EPOCH


# seed 004's rows, as its notebook shows them (timestamp as printed: ms and a +0000 offset)
SEED_ROWS = """\
950000,24,5,5014,2.507,250.7,2018-07-22T06:44:25.732+0000
950001,24,13,2536,1.268,126.8,2018-07-21T01:18:10.732+0000
950002,4,5,7314,3.657,365.7,2018-07-24T12:42:53.732+0000
950003,22,10,9796,4.898,489.8,2018-07-23T22:56:23.732+0000
950004,34,13,5603,2.8015,280.15,2018-07-21T13:50:39.732+0000
950005,21,1,11832,5.916,591.6,2018-07-23T11:05:48.732+0000
950006,7,12,10962,5.481,548.1,2018-07-23T02:10:39.732+0000
950007,33,4,5448,2.724,272.4,2018-07-22T17:42:18.732+0000
950008,16,5,7637,3.8185,381.85,2018-07-21T12:21:21.732+0000
950009,27,8,11709,5.8545,585.44995,2018-07-22T12:40:55.732+0000"""

# seed 004's device_schema, as DDL (parsed by Spark, inside the test)
SEED_DDL = (
    "id BIGINT NOT NULL, user_id BIGINT, device_id BIGINT, num_steps BIGINT, "
    "miles_walked FLOAT, calories_burnt FLOAT, timestamp TIMESTAMP, value STRING"
)


def test_the_seed_rows_are_read_with_the_seed_schema_from_gzipped_json(
    spark: SparkSession, tmp_path: Path
) -> None:
    seed_schema = StructType.fromDDL(SEED_DDL)
    assert get_pipeline("iot_steps").inputs[0].schema == seed_schema
    lines = []
    for row in SEED_ROWS.splitlines():
        i, user, device, steps, miles, calories, ts = row.split(",")
        inner = {"user_id": int(user), "num_steps": int(steps), "device_id": int(device)}
        lines.append(json.dumps({
            "id": int(i), "user_id": int(user), "device_id": int(device),
            "num_steps": int(steps), "miles_walked": float(miles),
            "calories_burnt": float(calories), "timestamp": ts, "value": json.dumps(inner),
        }))  # fmt: skip
    landing = tmp_path / "input"
    landing.mkdir()
    with gzip.open(landing / "part-00000.json.gz", "wt") as handle:
        handle.write("\n".join(lines) + "\n")
    out = tmp_path / "steps"
    with PipelineHarness(
        spark, "iot_steps", tmp_path, sink=f"parquet:{out}", trigger="available-now"
    ) as h:
        h.process()
        totals = h.totals["iot_steps.steps"]
        view = results_view(h.prepared)  # what the dashboard shows, read from the files
    assert (totals["rows"], totals["quarantined"]) == (10, 0)
    # the seed's own query, as a batch job over the same file
    seed = (
        spark.read.schema(seed_schema)
        .json(str(landing))
        .groupBy(F.window("timestamp", "5 minutes"))
        .agg({"num_steps": "sum"})
    )
    newest = max(datetime.fromisoformat(r.split(",")[-1]) for r in SEED_ROWS.splitlines())
    watermark = newest - WATERMARK
    expected = {
        r["window"]["start"].replace(tzinfo=UTC): r["sum(num_steps)"]
        for r in seed.collect()
        if r["window"]["end"].replace(tzinfo=UTC) <= watermark
    }
    got = {
        r["window_start"].replace(tzinfo=UTC): r["num_steps"]
        for r in spark.read.parquet(str(out)).collect()
    }
    assert len(expected) == 9 and got == expected  # all but the newest window are final
    assert view is not None and view["columns"] == ["window_start", "window_end", "num_steps"]
    shown = {row[0]: row[2] for row in view["rows"]}
    assert {ref.parse_time(start): n for start, n in shown.items()} == expected


def test_check_explains_that_a_window_is_written_once_final(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The delay follows the parameters: with --window 2m --watermark 7m a window is final 7m
    after its end, so the newest written one ends about 9m behind the newest input."""
    text = check_in_process(spark, "iot_steps", tmp_path, "--input", str(tmp_path / "in"),
                            "--window", "2m", "--watermark", "7m")  # fmt: skip
    assert "output      steps: append to parquet" in text
    assert (
        "final       a window is written once, when final: when the newest timestamp seen "
        "passes its end + 7m; the newest written window ends about 9m of event time behind "
        "the newest input"
    ) in text
