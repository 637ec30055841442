"""The sensors pipeline: its three outputs against an independent computation over a dirty
generated stream (late, out-of-order, duplicate and malformed readings over many batches), the
over-reporting alert, the accounting, and the output modes as seed 000 teaches them.

Batch boundaries are controlled (one file per micro-batch); nothing waits by sleeping."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from slipstream.tools.generators import sensors as sensors_generator
from slipstream.tools.generators.streams import Report, StreamSpec, generate
from slipstream.tools.views import results_view
from tests import stream_reference as ref
from tests.helpers import check_in_process, landed_batches, late_records

pytestmark = pytest.mark.spark

WINDOW, WATERMARK = timedelta(minutes=5), timedelta(minutes=10)
SPEC = StreamSpec(
    duration=timedelta(minutes=40),
    seed=5,
    file_every=timedelta(minutes=4),
    watermark=WATERMARK,
    window=WINDOW,
    out_of_order=0.08,
    late=0.04,
    duplicates=0.05,
    malformed=0.04,
)


def _run(
    spark: SparkSession,
    root: Path,
    spec: StreamSpec,
    fleet: sensors_generator.Sensors,
    lateness: timedelta = WATERMARK,
    **settings: Any,
) -> dict[str, Any]:
    """Generate `spec`'s readings, run every output over them to SQLite, one file per batch,
    and replay the same files through the independent model."""
    report = generate(spec, fleet, root / "landing")
    batches = landed_batches(root / "landing", "readings")
    with PipelineHarness(
        spark, "sensors", root, sink="sqlite", max_files_per_trigger=1, **settings
    ) as h:
        for batch in batches:
            h.feed(batch)
        h.process()
        tables = {n: h.results(n) for n, o in h.prepared.outputs.items() if o.is_output}
        folder = h.prepared.inputs["readings"].quarantine
        quarantine = [r.asDict() for r in read_quarantine(spark, folder).collect()]
        totals = dict(h.totals)
        view = results_view(h.prepared)  # what the dashboard shows
    late = {  # the late-row dead-letter's records, per output
        name: sum(len(b) for b in late_records(root / "state", "sensors", name).values())
        for name in tables
    }
    now = datetime.now(UTC)
    readings, stats = ref.counted_readings(batches, lateness)
    malformed = [x for b in batches for x in b if ref.sensor_reading(x, now) is None]
    return {"report": report, "tables": tables, "quarantine": quarantine, "totals": totals,
            "readings": readings, "stats": stats, "view": view, "malformed": malformed,
            "late": late}  # fmt: skip


@pytest.fixture(scope="module")
def dirty(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run over 40 minutes of readings from 12 sensors (2 noisy, 2 drifting, 2 erroring),
    one file per four minutes of arrival and one file per batch (12 batches), all outputs to
    SQLite."""
    fleet = sensors_generator.Sensors(12, 2, 2, 2, seed=SPEC.seed)
    return _run(spark, tmp_path_factory.mktemp("sensors"), SPEC, fleet)


def test_the_generator_made_every_kind_of_dirt(dirty: dict[str, Any]) -> None:
    counts = dirty["report"].streams["readings"]
    assert min(counts.late, counts.out_of_order, counts.duplicates, counts.malformed) > 0
    # the independent model sees exactly what the generator says it wrote
    stats = dirty["stats"]
    assert (stats["invalid"], stats["late"], stats["duplicates"]) == (
        counts.malformed,
        counts.late,
        counts.duplicates,
    )


def _assert_stats_equal(rows: list[dict[str, Any]], expected: dict, window: timedelta) -> None:
    table = {(r["window_start"], r["sensor_id"]): r for r in rows}
    assert len(table) == len(rows), "a window's row twice"
    assert set(table) == set(expected)
    for key, want in expected.items():
        got = table[key]
        assert got["readings"] == want["readings"], key
        assert got["window_end"] == ref.iso(datetime.fromisoformat(key[0]) + window)
        for column in ("mean_value", "min_value", "max_value", "stddev_value"):
            assert ref.close(got[column], want[column]), (key, column, got[column], want[column])
        assert json.loads(got["error_codes"]) == want["error_codes"], key


def _assert_alerts(run: dict[str, Any], window: timedelta, slide: timedelta | None = None) -> None:
    """Alerted: exactly the final windows (end at or before the last watermark) in which a
    sensor sent more than one reading per minute of window, each once; those sensors are the
    ones the generator made noisy."""
    stats = ref.sensor_stats(run["readings"], window, slide)
    most = window / timedelta(minutes=1)
    final = run["stats"]["watermark"]
    expected = {
        key: row["readings"]
        for key, row in stats.items()
        if row["readings"] > most and datetime.fromisoformat(key[0]) + window <= final
    }
    alerts = run["tables"]["sensor_alerts"]
    got = {(r["window_start"], r["sensor_id"]): r["readings"] for r in alerts}
    assert len(got) == len(alerts), "a window was alerted twice"
    assert got == expected
    assert all(r["expected"] == most for r in alerts)
    assert {sensor for _, sensor in got} == set(run["report"].info["noisy"])


def test_sensor_stats_equal_an_independent_computation(dirty: dict[str, Any]) -> None:
    expected = ref.sensor_stats(dirty["readings"], WINDOW)
    _assert_stats_equal(dirty["tables"]["sensor_stats"], expected, WINDOW)


def test_sensor_baseline_is_the_running_aggregate_over_all_counted_readings(
    dirty: dict[str, Any],
) -> None:
    _assert_baseline(dirty)


def _assert_baseline(run: dict[str, Any]) -> None:
    """sensor_baseline: per sensor, every counted reading; error codes from the erroring ones."""
    expected = ref.sensor_baseline(run["readings"])
    table = {r["sensor_id"]: r for r in run["tables"]["sensor_baseline"]}
    assert set(table) == set(expected)
    for sensor, want in expected.items():
        assert table[sensor]["readings"] == want["readings"]
        assert ref.close(table[sensor]["baseline_value"], want["baseline_value"])
        assert json.loads(table[sensor]["error_codes"]) == want["error_codes"]
    erroring = set(run["report"].info["erroring"])
    assert {s for s, r in expected.items() if r["error_codes"]} == erroring


def test_the_alert_fires_for_exactly_the_noisy_sensors_once_per_final_window(
    dirty: dict[str, Any],
) -> None:
    _assert_alerts(dirty, WINDOW)


def test_valid_quarantined_late_and_duplicates_add_up_to_the_lines_sent(
    dirty: dict[str, Any],
) -> None:
    counts = dirty["report"].streams["readings"]
    _assert_accounts(dirty, counts.lines, counts.malformed, counts.late, counts.duplicates)
    # the quarantine holds exactly the lines the independent parser rejects
    quarantined = dirty["quarantine"]
    assert sorted(r["raw"] for r in quarantined) == sorted(dirty["malformed"])
    assert len(quarantined) == counts.malformed


def _assert_accounts(
    run: dict[str, Any], sent: int, quarantined: int, late: int, duplicates: int
) -> None:
    """Each output's counts are the ones given, its dead-letter holds as many records as Spark
    counted late, and valid + quarantined + late + duplicates = the lines sent."""
    valid = sum(r["readings"] for r in run["tables"]["sensor_baseline"])
    for output in ("sensor_stats", "sensor_alerts", "sensor_baseline"):
        t = run["totals"][f"sensors.{output}"]
        assert t["rows"] == sent
        assert (t["quarantined"], t["late"], t["duplicates"]) == (quarantined, late, duplicates)
        assert run["late"][output] == t["late"], output
        assert valid + t["quarantined"] + t["late"] + t["duplicates"] == sent


def test_the_dashboard_shows_all_three_outputs(dirty: dict[str, Any]) -> None:
    view = dirty["view"]
    assert view["title"] == "sensor_stats, latest windows first"
    assert view["columns"][:3] == ["window_start", "window_end", "sensor_id"]
    starts = [row[0] for row in view["rows"]]
    newest = max(r["window_start"] for r in dirty["tables"]["sensor_stats"])
    assert starts == sorted(starts, reverse=True) and starts[0] == newest
    more = {panel["title"]: panel for panel in view["more"]}
    assert set(more) == {"sensor_alerts: sensor_alerts, newest rows",
                         "sensor_baseline: sensor_baseline, newest rows"}  # fmt: skip
    for name in ("sensor_alerts", "sensor_baseline"):
        panel, table = more[f"{name}: {name}, newest rows"], dirty["tables"][name]
        shown = [dict(zip(panel["columns"], row, strict=True)) for row in panel["rows"]]
        assert 0 < len(shown) <= len(table)
        assert all(row in table for row in shown), name


def test_sliding_windows_under_another_watermark_equal_an_independent_computation(
    spark: SparkSession, tmp_path: Path
) -> None:
    """--window 6m --slide 2m --watermark 4m: each reading counts in three windows; late,
    out-of-order, duplicate and malformed readings over 13 batches."""
    window, slide, watermark = timedelta(minutes=6), timedelta(minutes=2), timedelta(minutes=4)
    spec = replace(SPEC, duration=timedelta(minutes=24), seed=8, watermark=watermark,
                   window=window, file_every=timedelta(minutes=2))  # fmt: skip
    run = _run(
        spark, tmp_path, spec, sensors_generator.Sensors(8, 1, 1, 1, seed=spec.seed),
        watermark, window="6m", slide="2m", watermark="4m",
    )  # fmt: skip
    counts = run["report"].streams["readings"]
    assert run["stats"]["late"] == counts.late > 0 and counts.out_of_order > 0
    expected = ref.sensor_stats(run["readings"], window, slide)
    assert {len(ref.window_starts(r["event_time"], window, slide)) for r in run["readings"]} == {3}
    _assert_stats_equal(run["tables"]["sensor_stats"], expected, window)
    _assert_alerts(run, window, slide)


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
    return [
        next(
            o["numRowsTotal"] for o in p["stateOperators"] if o["operatorName"] == "stateStoreSave"
        )
        for p in h.progress(output)
        if p.get("stateOperators") and p["numInputRows"] > 0
    ]


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_update_drops_window_state_once_the_watermark_passes_and_complete_keeps_it(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    """Sensors a and b report once a minute, c twice, for 60 minutes, one file per 10 minutes.
    sensor_baseline runs in the same mode: not time-based, its state is one row per sensor."""
    modes = {"sensor_stats": mode, "sensor_baseline": mode}
    with PipelineHarness(spark, "sensors", tmp_path, mode=modes, max_files_per_trigger=1) as h:
        for start in range(0, 60, 10):
            h.feed([_reading(s, m, second, value=m % 7) for m in range(start, start + 10)
                    for s, second in (("a", 0), ("b", 0), ("c", 0), ("c", 30))])  # fmt: skip
        h.process()
        state = _state_rows(h, "sensor_stats")
        baseline = {r["sensor_id"]: r for r in h.results("sensor_baseline")}
        alerts = h.results("sensor_alerts")
        assert h.collector is not None
        first = h.collector.batches[min(h.collector.batches)][0]
    assert list(first) == ["window_start", "window_end", "sensor_id", "readings", "mean_value",
                           "min_value", "max_value", "stddev_value", "error_codes"]  # fmt: skip
    mean = sum(m % 7 for m in range(60)) / 60
    assert {s: r["readings"] for s, r in baseline.items()} == {"a": 60, "b": 60, "c": 120}
    assert all(ref.close(r["baseline_value"], mean) for r in baseline.values())
    assert list(baseline["a"]) == ["sensor_id", "readings", "baseline_value", "error_codes"]
    # c sends 10 readings per 5-minute window, twice the 5 allowed; a window is alerted once
    # final: its end at or before the last watermark, 59:30 - 10m
    assert sorted((r["window_start"][11:16], r["sensor_id"], r["readings"]) for r in alerts) == [
        (f"00:{m:02d}", "c", 10) for m in range(0, 45, 5)
    ]
    assert list(alerts[0]) == ["window_start", "window_end", "sensor_id", "readings", "expected"]
    assert all(r["expected"] == 5.0 for r in alerts)
    assert len(state) == 6
    if mode == "complete":  # every window of every sensor, for ever: two more a file
        assert state == [3 * 2 * (k + 1) for k in range(6)]
    else:  # a batch evicts by the watermark before it (newest - 10m): at most the windows
        # of the last 15 minutes and of its own 10 a sensor, so state stops growing
        assert max(state) <= 3 * 5 and state[-4:] == [state[-1]] * 4


def test_check_warns_that_complete_mode_keeps_all_window_state(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`slipstream check`, parsed by the CLI's parser, on the test session (no JVM of its own)."""
    text = check_in_process(
        spark, "sensors", tmp_path, "--input", str(tmp_path / "in"),
        "--mode", "sensor_stats=complete",
    )  # fmt: skip
    stats = text.split("output      sensor_stats")[1].split("output      ")[0]
    assert "warning     complete mode rewrites every window each batch and keeps all" in stats
    alerts = text.split("output      sensor_alerts")[1].split("output      ")[0]
    assert "a window is written once, when final: when the newest event_time seen passes " \
        "its end + 10m" in alerts  # fmt: skip


def test_generated_readings_report_names_the_misbehaving_sensors(tmp_path: Path) -> None:
    fleet = sensors_generator.Sensors(10, 1, 1, 1, seed=3)
    report: Report = generate(
        StreamSpec(duration=timedelta(minutes=30), seed=3, late=0, malformed=0, duplicates=0),
        fleet,
        tmp_path,
    )
    readings: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(tmp_path.glob("readings-*.jsonl")):
        for line in path.read_text().splitlines():
            doc = json.loads(line)
            readings.setdefault(doc["sensor_id"], []).append(doc)
    noisy, drifting, erroring = (report.info[k] for k in ("noisy", "drifting", "erroring"))
    assert len(noisy) == len(drifting) == len(erroring) == 1
    assert len({*noisy, *drifting, *erroring}) == 3
    assert len(readings[noisy[0]]) == 180  # every 10 s
    assert all(len(r) == 30 for s, r in readings.items() if s not in noisy)  # once a minute

    def slope(docs: list[dict[str, Any]]) -> float:
        """Least-squares change of value per minute of event time."""
        points = [(ref.parse_time(d["event_time"]).timestamp() / 60, d["value"]) for d in docs]  # type: ignore[union-attr]
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        covariance = sum((x - mx) * (y - my) for x, y in points)
        return covariance / sum((x - mx) ** 2 for x, _ in points)

    # drifting: +0.5 a minute (the default --drift); the others hold their baseline
    assert {s for s, docs in readings.items() if slope(docs) > 0.25} == set(drifting)
    assert all(abs(slope(docs)) < 0.1 for s, docs in readings.items() if s not in drifting)
    coded = {s for s, docs in readings.items() if any(d["error_code"] for d in docs)}
    assert coded == set(erroring)
