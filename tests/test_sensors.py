"""The sensors pipeline: its three outputs against an independent computation over a dirty
generated stream (late, out-of-order, duplicate and malformed readings over many batches), the
over-reporting alert, the accounting, and the output modes as seed 000 teaches them.

Batch boundaries are controlled (one file per micro-batch); nothing waits by sleeping."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.generators import sensors as sensors_generator
from slipstream.generators.streams import Report, StreamSpec, generate
from slipstream.quality.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from tests import stream_reference as ref

pytestmark = pytest.mark.spark

WINDOW, WATERMARK = timedelta(minutes=5), timedelta(minutes=10)
SPEC = StreamSpec(
    duration=timedelta(minutes=40),
    seed=5,
    file_every=timedelta(minutes=1),
    watermark=WATERMARK,
    window=WINDOW,
    out_of_order=0.08,
    late=0.04,
    duplicates=0.05,
    malformed=0.04,
)


# one reading dated 9999 in the second batch: the event-time guard quarantines it, or it would
# move the watermark to year 9999 and every later reading would be dropped as late
POISON = json.dumps({"sensor_id": "s-poison", "event_time": "9999-12-31T00:00:00Z", "value": 1.0})


def _batches(folder: Path) -> list[list[str]]:
    batches = [p.read_text().splitlines() for p in sorted(folder.glob("readings-*.jsonl"))]
    batches[1].append(POISON)
    return batches


@pytest.fixture(scope="module")
def dirty(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run over 40 minutes of readings from 12 sensors (2 noisy, 2 drifting, 2 erroring),
    one file per minute of arrival and one file per batch, all outputs to SQLite."""
    root = tmp_path_factory.mktemp("sensors")
    fleet = sensors_generator.Sensors(12, 2, 2, 2, seed=SPEC.seed)
    report = generate(SPEC, fleet, root / "landing")
    with PipelineHarness(spark, "sensors", root, sink="sqlite", max_files_per_trigger=1) as h:
        for batch in _batches(root / "landing"):
            h.feed(batch)
        h.process()
        tables = {name: h.results(name) for name in h.prepared.outputs}
        totals = dict(h.totals)
        quarantine = read_quarantine(spark, h.prepared.inputs["readings"].quarantine).collect()
    readings, stats = ref.counted(
        _batches(root / "landing"),
        lambda line: ref.sensor_reading(line, datetime.now(UTC)),
        "event_time",
        lambda r: (r["sensor_id"], r["event_time"]),
        WATERMARK,
    )
    return {"report": report, "tables": tables, "totals": totals, "readings": readings,
            "stats": stats, "quarantine": quarantine}  # fmt: skip


def test_the_generator_made_every_kind_of_dirt(dirty: dict[str, Any]) -> None:
    counts = dirty["report"].streams["readings"]
    assert min(counts.late, counts.out_of_order, counts.duplicates, counts.malformed) > 0
    # the independent model sees exactly what the generator says it wrote
    stats = dirty["stats"]
    assert (stats["invalid"], stats["late"], stats["duplicates"]) == (
        counts.malformed + 1,  # + POISON
        counts.late,
        counts.duplicates,
    )


def test_sensor_stats_equal_an_independent_computation(dirty: dict[str, Any]) -> None:
    expected = ref.sensor_stats(dirty["readings"], WINDOW)
    table = {(r["window_start"], r["sensor_id"]): r for r in dirty["tables"]["sensor_stats"]}
    assert set(table) == set(expected)
    for key, want in expected.items():
        got = table[key]
        assert got["readings"] == want["readings"], key
        assert got["window_end"] == ref.iso(datetime.fromisoformat(key[0]) + WINDOW)
        for column in ("mean_value", "min_value", "max_value", "stddev_value"):
            assert ref.close(got[column], want[column]), (key, column, got[column], want[column])
        assert json.loads(got["error_codes"]) == want["error_codes"], key


def test_sensor_baseline_is_the_running_aggregate_over_all_counted_readings(
    dirty: dict[str, Any],
) -> None:
    expected = ref.sensor_baseline(dirty["readings"])
    table = {r["sensor_id"]: r for r in dirty["tables"]["sensor_baseline"]}
    assert set(table) == set(expected)
    for sensor, want in expected.items():
        assert table[sensor]["readings"] == want["readings"]
        assert ref.close(table[sensor]["baseline_value"], want["baseline_value"])
        assert json.loads(table[sensor]["error_codes"]) == want["error_codes"]
    erroring = set(dirty["report"].info["erroring"])
    assert {s for s, r in expected.items() if r["error_codes"]} == erroring


def test_the_alert_fires_for_exactly_the_noisy_sensors_once_per_final_window(
    dirty: dict[str, Any],
) -> None:
    stats = ref.sensor_stats(dirty["readings"], WINDOW)
    final = dirty["stats"]["watermark"]
    expected = {
        key: row["readings"]
        for key, row in stats.items()
        if row["readings"] > 5 and datetime.fromisoformat(key[0]) + WINDOW <= final
    }
    alerts = dirty["tables"]["sensor_alerts"]
    got = {(r["window_start"], r["sensor_id"]): r["readings"] for r in alerts}
    assert len(got) == len(alerts), "a window was alerted twice"
    assert got == expected
    assert all(r["expected"] == 5.0 for r in alerts)
    assert {sensor for _, sensor in got} == set(dirty["report"].info["noisy"])


def test_valid_quarantined_late_and_duplicates_add_up_to_the_lines_sent(
    dirty: dict[str, Any],
) -> None:
    counts = dirty["report"].streams["readings"]
    sent = counts.lines + 1  # + POISON
    valid = sum(r["readings"] for r in dirty["tables"]["sensor_baseline"])
    for output in ("sensor_stats", "sensor_alerts", "sensor_baseline"):
        t = dirty["totals"][f"sensors.{output}"]
        assert t["rows"] == sent
        assert (t["quarantined"], t["late"], t["duplicates"]) == (
            counts.malformed + 1,
            counts.late,
            counts.duplicates,
        ), output
        assert valid + t["quarantined"] + t["late"] + t["duplicates"] == sent
    poisoned = [r.reason for r in dirty["quarantine"] if r.raw == POISON]
    assert len(poisoned) == 1 and poisoned[0].startswith("event_time_too_far_in_future:")


# --- output modes on sensor_stats, as seed 000 teaches them ----------------------------------


def _reading(sensor: str, minute: int, second: int = 0, value: float = 1.0) -> str:
    ts = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minute, seconds=second)
    return json.dumps({"sensor_id": sensor, "event_time": ref.iso(ts), "value": value})


def test_append_writes_a_window_once_only_after_the_watermark_passes_its_end(
    spark: SparkSession, tmp_path: Path
) -> None:
    with PipelineHarness(spark, "sensors", tmp_path, mode="append", max_files_per_trigger=1) as h:
        h.feed([_reading("s1", 1), _reading("s1", 2, value=3.0), _reading("s1", 7)])
        assert h.process() == []  # watermark 07:00 - 10m: no window final
        h.feed([_reading("s1", 14, 59)])  # watermark 04:59: [00:00, 00:05) still open
        assert h.process() == []
        h.feed([_reading("s1", 15)])  # watermark 05:00 reaches the end of [00:00, 00:05)
        rows = h.process()
        assert [(r["window_start"], r["readings"], r["mean_value"]) for r in rows] == [
            ("2026-01-01T00:00:00Z", 2, 2.0)
        ]
        h.feed([_reading("s1", 30)])  # watermark 20:00: final up to [15:00, 20:00)
        rows = h.process()
        assert sorted((r["window_start"], r["readings"]) for r in rows) == [
            ("2026-01-01T00:05:00Z", 1),  # 07:00
            ("2026-01-01T00:10:00Z", 1),  # 14:59
            ("2026-01-01T00:15:00Z", 1),  # 15:00: a window's end is exclusive
        ]


def _state_rows(h: PipelineHarness, output: str) -> list[int]:
    """The aggregation's state rows after each batch that ran, read from progress (not the
    deduplication's, which holds each reading until the watermark passes it + 10m)."""
    assert h.run is not None
    query = h.run.queries[output]
    return [
        next(
            o["numRowsTotal"] for o in p["stateOperators"] if o["operatorName"] == "stateStoreSave"
        )
        for p in query.recentProgress
        if p.get("stateOperators") and p["numInputRows"] > 0
    ]


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_update_drops_window_state_once_the_watermark_passes_and_complete_keeps_it(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    """One reading of each of 3 sensors per minute for 60 minutes, one file per 5 minutes."""
    with PipelineHarness(spark, "sensors", tmp_path, mode=mode, max_files_per_trigger=1) as h:
        for start in range(0, 60, 5):
            h.feed([_reading(s, m) for m in range(start, start + 5) for s in ("a", "b", "c")])
        h.process()
        state = _state_rows(h, "sensor_stats")
    assert len(state) == 12
    if mode == "complete":  # every window of every sensor, for ever
        assert state == [3 * (k + 1) for k in range(12)]
    else:  # the watermark (10m) keeps at most 3 windows a sensor: state stops growing
        assert max(state) <= 3 * 4 and state[-6:] == [state[-1]] * 6


def test_check_warns_that_complete_mode_keeps_all_window_state(tmp_path: Path) -> None:
    from tests.helpers import slipstream

    (tmp_path / "in").mkdir()
    result = slipstream(
        "check", "sensors", "--input", str(tmp_path / "in"), "--state-dir", str(tmp_path / "st"),
        "--mode", "sensor_stats=complete", timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout
    stats = text.split("output      sensor_stats")[1].split("output      ")[0]
    assert "warning     complete mode rewrites every window each batch and keeps all" in stats
    alerts = text.split("output      sensor_alerts")[1].split("output      ")[0]
    assert "a window is written once, when final: when the newest event_time seen passes " \
        "its end + 10m" in alerts  # fmt: skip


def test_generated_readings_report_names_the_misbehaving_sensors(tmp_path: Path) -> None:
    fleet = sensors_generator.Sensors(10, 1, 1, 1, seed=3)
    report: Report = generate(
        StreamSpec(duration=timedelta(minutes=10), seed=3, late=0, malformed=0, duplicates=0),
        fleet,
        tmp_path,
    )
    per_sensor: dict[str, int] = {}
    for path in sorted(tmp_path.glob("readings-*.jsonl")):
        for line in path.read_text().splitlines():
            sensor = json.loads(line)["sensor_id"]
            per_sensor[sensor] = per_sensor.get(sensor, 0) + 1
    noisy = report.info["noisy"]
    assert len(noisy) == 1 and per_sensor[noisy[0]] == 60  # every 10 s
    assert all(n == 10 for s, n in per_sensor.items() if s not in noisy)  # once a minute
