"""The late-row dead-letter (runtime/deadletter.py): `STATE_DIR/late/PIPELINE/OUTPUT/batch-N.jsonl`
holds exactly the records Spark dropped as late, as plain Python predicts them from the rule
of the first stateful operator and the previous batch's watermark (the watermark after the
batches before, which Spark's no-data batch carries into the next one)."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from tests.helpers import late_by_window_end, late_records

T0 = datetime(2018, 3, 2, 10, 0, tzinfo=UTC)


pytestmark = pytest.mark.spark


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def action(n: int, minutes: float, what: str = "open") -> dict[str, str]:
    return {"id": f"p{n}", "action": what, "ts": iso(at(minutes))}


def test_mobile_dead_letter_holds_the_rows_late_by_the_window_end_rule(
    spark: SparkSession, tmp_path: Path
) -> None:
    window, delay = timedelta(minutes=10), timedelta(minutes=5)
    batches = [
        # batch A: newest 10:20, so the watermark becomes 10:15
        [action(1, 0), action(2, 12), action(3, 20, "close")],
        # batch B, judged by 10:15: 10:03 and 10:09:59 are in a window ending 10:10 (late);
        # 10:10 and 10:14 are at or before the watermark but their window ends 10:20 (kept)
        [
            action(4, 3),
            action(5, 9 + 59 / 60),
            action(6, 10),
            action(7, 14, "close"),
            action(8, 31),
        ],  # fmt: skip
        # batch C, judged by 10:26 (31 - 5): windows ending 10:20 are late now, 10:30 is not
        [action(9, 19), action(10, 15, "close"), action(11, 21), action(12, 2)],
    ]
    far = {"id": "p13", "action": "open", "ts": "9999-12-31T00:00:00Z"}
    extra = ['{"id": "bad"', json.dumps(far)]  # quarantined (not JSON, the guard), not late
    db = tmp_path / "out.db"
    with PipelineHarness(
        spark, "mobile", tmp_path, sink=f"sqlite:{db}", mode="update",
        window="10m", watermark="5m", max_files_per_trigger=1,
    ) as h:  # fmt: skip
        for index, rows in enumerate(batches):
            h.feed([json.dumps(r) for r in rows] + (extra if index == 1 else []))
            h.process()
        results = h.results()
        spark_late = h.totals["mobile.counts"]["late"]
    folder = tmp_path / "state" / "late" / "mobile" / "counts"
    written = late_records(tmp_path / "state", "mobile", "counts")

    # the independent model: each batch is judged by the watermark the batches before made
    late, kept = late_by_window_end(batches, window, delay)
    expected = [(row["id"], iso(mark)) for row, mark in late]
    lines = [r for batch in written.values() for r in batch]
    assert sorted((json.loads(r["raw"])["id"], r["watermark"]) for r in lines) == sorted(expected)
    assert sorted(expected) == [("p10", "2018-03-02T10:26:00Z"), ("p12", "2018-03-02T10:26:00Z"),
                                ("p4", "2018-03-02T10:15:00Z"), ("p5", "2018-03-02T10:15:00Z"),
                                ("p9", "2018-03-02T10:26:00Z")]  # fmt: skip
    p4 = next(r for r in lines if json.loads(r["raw"])["id"] == "p4")
    assert p4["reason"] == (
        "late: ts 2018-03-02T10:03:00Z in a window ending 2018-03-02T10:10:00Z "
        "<= watermark 2018-03-02T10:15:00Z"
    )
    assert p4["input"] == "actions" and p4["output"] == "counts"
    assert p4["source"].endswith(".json") and p4["event_time"] == "2018-03-02T10:03:00Z"
    # each record sits in the file of the batch that dropped it, once
    assert all(r["batch"] == b for b, batch in written.items() for r in batch)
    assert len({r["raw"] for r in lines}) == len(lines) == 5
    # Spark counts partial aggregates (late rows of one window and partition count once)
    assert 0 < spark_late <= len(lines)

    # written by the query's own tasks (one read): their files are gone once gathered
    assert not [p for p in (folder / "_tasks").rglob("*") if p.is_file()]

    # the results are the counts of the rows that were not late, as pandas computes them
    frame = pd.DataFrame(kept)
    frame["window_start"] = pd.to_datetime(frame["ts"]).dt.floor("10min")
    model = frame.groupby(["window_start", "action"]).size()
    got = {(pd.Timestamp(r["window_start"]).tz_localize(None), r["action"]): r["count"]
           for r in results}  # fmt: skip
    assert got == {(k[0].tz_localize(None), k[1]): v for k, v in model.items()}

    # private, like the quarantine
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.iterdir() if p.is_file())


def reading(kind: str, location: str, minutes: float) -> dict[str, Any]:
    value, time = (
        ("temp", "temp_taken_time") if kind == "temperature" else ("load", "load_taken_time")
    )
    return {"location_id": location, value: 1.0, time: iso(at(minutes))}


def test_temperature_load_dead_letter_holds_each_side_late_by_its_row_time(
    spark: SparkSession, tmp_path: Path
) -> None:
    delays = {"temperature": timedelta(hours=1), "load": timedelta(hours=2)}
    # Within a step the two files may be read in one batch or in two: no step but the one
    # with a single file moves the watermark, so every row of a step is judged by one value.
    steps = [
        # the watermark after: min(10:30 - 1h, 12:00 - 2h) = 9:30
        {"temperature": [("a", 0), ("b", 30)], "load": [("a", 20), ("b", 120)]},
        # judged by 9:30 (at or before it: late)
        {
            "temperature": [("c", -60), ("d", -30), ("e", -29)],
            "load": [("c", -40), ("d", -30), ("e", -15)],
        },  # fmt: skip
        # the watermark after: min(13:00 - 1h, 12:00 - 2h) = 10:00
        {"temperature": [("f", 180)]},
        # judged by 10:00
        {"temperature": [("g", -10), ("h", 1)], "load": [("g", 0), ("h", 5)]},
    ]
    with PipelineHarness(spark, "temperature_load", tmp_path, max_files_per_trigger=1) as h:
        for step in steps:
            h.step(**{kind: [reading(kind, *r) for r in rows] for kind, rows in step.items()})
        spark_late = h.totals["temperature_load.temperature_load"]["late"]
    written = late_records(tmp_path / "state", "temperature_load", "temperature_load")
    lines = [r for batch in written.values() for r in batch]

    # the model: one watermark, the slower input's, from the batches before; row time <= it
    expected, newest = [], {}
    for step in steps:
        marks = [newest[k] - delays[k] for k in delays if k in newest]
        mark = min(marks) if len(marks) == len(delays) else datetime(1970, 1, 1, tzinfo=UTC)
        for kind, rows in step.items():
            for location, minutes in rows:
                if at(minutes) <= mark:
                    expected.append((kind, location, iso(mark)))
            times = [at(m) for _, m in rows] + ([newest[kind]] if kind in newest else [])
            newest[kind] = max(times)
    got = [(r["input"], json.loads(r["raw"])["location_id"], r["watermark"]) for r in lines]
    assert sorted(got) == sorted(expected)
    assert {(k, loc) for k, loc, _ in expected} == {
        ("temperature", "c"), ("temperature", "d"), ("load", "c"), ("load", "d"),
        ("temperature", "g"), ("load", "g"),
    }  # fmt: skip
    # the join drops (and counts) input rows one by one: Spark's count is the dead-letter's
    assert spark_late == len(lines)
    d = next(
        r for r in lines if r["input"] == "load" and json.loads(r["raw"])["location_id"] == "d"
    )
    assert (
        d["reason"]
        == "late: load_taken_time 2018-03-02T09:30:00Z <= watermark 2018-03-02T09:30:00Z"
    )


def test_a_restart_writes_no_batch_twice_and_catches_up_and_reset_clears_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    import io

    from slipstream.app.reset import reset as reset_command

    settings = {"mode": "update", "window": "10m", "watermark": "5m", "max_files_per_trigger": 1}
    folder = tmp_path / "state" / "late" / "mobile" / "counts"
    with PipelineHarness(spark, "mobile", tmp_path, **settings) as h:
        h.feed([json.dumps(action(1, 20))])
        h.process()
        h.feed([json.dumps(action(2, 3))])  # late against 10:15
        h.process()
    first = sorted(folder.glob("batch-*.jsonl"))
    assert len(first) == 1
    kept = {p.name: (p.stat().st_mtime_ns, p.read_text()) for p in first}
    # a crash after the batch committed and before its late rows were gathered: the next
    # start catches up; what was gathered already is not written again
    (folder / ".done").unlink()
    with PipelineHarness(spark, "mobile", tmp_path, **settings) as h:
        h.process()  # nothing new: the catch-up alone
        assert {p.name: (p.stat().st_mtime_ns, p.read_text()) for p in first} == kept
        # the state such a crash leaves: the batch's task files, no batch file, no `.done`
        batch = first[0].stem.split("-")[1]
        tasks = folder / "_tasks" / "actions" / f"batch-{batch}.app-1.part-00000.json"
        tasks.write_text(first[0].read_text())
        first[0].unlink()
        (folder / ".done").unlink()
        h.feed([json.dumps(action(3, 4)), json.dumps(action(4, 40))])
        h.process()
        settings_ = h.settings
    again = late_records(tmp_path / "state", "mobile", "counts")
    ids = [json.loads(r["raw"])["id"] for batch in again.values() for r in batch]
    assert sorted(ids) == ["p2", "p3"]  # each once: p2 gathered by the catch-up, p3 new
    assert (
        again[int(first[0].stem.split("-")[1])][0]["raw"]
        == json.loads(kept[first[0].name][1])["raw"]
    )

    # reset --outputs clears the dead-letter with the other outputs
    out = io.StringIO()
    assert reset_command(settings_, outputs=True, yes=True, out=out) == 0
    assert not folder.parent.exists(), out.getvalue()


def test_late_rows_false_only_counts(spark: SparkSession, tmp_path: Path) -> None:
    settings = {"mode": "update", "window": "10m", "watermark": "5m", "max_files_per_trigger": 1}
    with PipelineHarness(spark, "mobile", tmp_path, late_rows=False, **settings) as h:
        h.feed([json.dumps(action(1, 20))])
        h.process()
        h.feed([json.dumps(action(2, 3))])  # late against 10:15, as in the test above
        h.process()
        late = h.totals["mobile.counts"]["late"]
        # the terminal's long-batch watch reads each query under the listener's name, idle now
        assert h.run is not None
        status = h.run.batch_status()
        assert set(status) == {"mobile.counts"}, status
        assert all(not processing and last is not None for processing, last in status.values())
    assert not (tmp_path / "state" / "late").exists()
    assert late == 1  # still counted


def test_in_order_batches_leave_nothing_and_a_late_row_is_written_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The query's own tasks write the late rows (one read): in-order batches leave no file
    and no line; a late row is one line, as Spark counts it."""
    settings = {"mode": "update", "window": "10m", "watermark": "5m", "max_files_per_trigger": 1}
    folder = tmp_path / "state" / "late" / "mobile" / "counts"
    with PipelineHarness(spark, "mobile", tmp_path, **settings) as h:
        assert h.run is not None and h.run.dead_letter is not None
        letter = h.run.dead_letter
        for n in (20, 21, 22):  # in order: nothing is late
            h.feed([json.dumps(action(n, n))])
            h.process()
        assert letter.written == 0 and not [p for p in folder.rglob("*") if p.is_file()
                                            and p.name.startswith("batch-")]  # fmt: skip
        h.feed([json.dumps(action(99, 3))])  # late against 10:17
        h.process()
        assert letter.written == 1
        late = h.totals["mobile.counts"]["late"]
    written = late_records(tmp_path / "state", "mobile", "counts")
    assert [json.loads(r["raw"])["id"] for b in written.values() for r in b] == ["p99"]
    assert late == 1


def test_what_the_dead_letter_covers_is_read_from_each_output_plan(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Built, not started: each output's late rules (and what they leave out) come from the
    plan Spark analyzed."""
    from slipstream.runtime import runner
    from slipstream.tools.generators.trending import TrendingSpec, write_catalog

    ads = tmp_path / "ads.csv"
    ads.write_text("ad_id,campaign,cost_per_click\nad001,spring,0.50\n")
    cases: list[tuple[str, dict[str, Any]]] = [
        ("mobile", {"mode": "update"}), ("mobile", {"mode": "complete"}), ("iot_steps", {}),
        ("sensors", {"slide": "2m"}), ("temperature_load", {}), ("activity", {}),
        ("trending", {"catalog": write_catalog(tmp_path / "trending.csv", TrendingSpec())}),
        ("ads", {"catalog": ads}),
    ]  # fmt: skip
    found = {}
    for index, (name, settings) in enumerate(cases):
        h = PipelineHarness(spark, name, tmp_path / str(index), **settings)
        runner.build(spark, h.prepared)
        found[(name, settings.get("mode", ""))] = {
            out: (sorted(r.describe() for r in late.rules), list(late.uncovered))
            for out, late in h.prepared.late.items()
        }
    rule = "{}: {} <= watermark ({}, the previous batch's watermark)"
    window = rule.format("actions", "the end of its ts window", "tumbling-window aggregation")
    assert found[("mobile", "update")] == {"counts": ([window], [])}
    assert found[("mobile", "complete")] == {"counts": ([], [])}  # complete mode drops nothing
    steps = rule.format("device", "the end of its timestamp window", "tumbling-window aggregation")
    assert found[("iot_steps", "")] == {"steps": ([steps], [])}
    dedup = "readings: event_time <= watermark (deduplication, the previous batch's watermark)"
    assert found[("sensors", "")] == {
        o: ([dedup], []) for o in ("sensor_stats", "sensor_alerts", "sensor_baseline")
    }
    join = "{}: {} <= watermark (stream-stream join, the previous batch's watermark)"
    assert found[("temperature_load", "")] == {
        "temperature_load": (sorted([join.format("load", "load_taken_time"),
                                     join.format("temperature", "temp_taken_time")]), [])
    }  # fmt: skip
    assert found[("activity", "")]
    for out, (rules, _) in found[("activity", "")].items():
        assert rules == [
            "actions: ts <= watermark (deduplication, the previous batch's watermark)"
        ], out
    assert found[("trending", "")]["views"] == (
        ["events: ts <= watermark (deduplication, the previous batch's watermark)"],
        [],
    )
    stats = found[("ads", "")]["campaign_stats"]
    assert stats[0] == [] and all("not the input's event-time column" in u for u in stats[1])
