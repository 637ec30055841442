"""The pipelines not covered by tests/e2e/kafka/test_kafka.py (sensors, iot_steps, activity,
temperature_load, ads), every stream input bound to a topic on the session's broker, each
table against the independent computation its file test uses over the same records.

The generators' dirty streams (out of order, late, duplicate, malformed) are produced in file
order. The single-stream pipelines read one partition `maxOffsetsPerTrigger` records at a time,
so their micro-batches are known: consecutive chunks of that many records, which is what the
models replay. The joins read everything in one batch (their models do not model batches;
temperature_load's and ads' file tests assert nothing is late). The pipelines' queries run at
once (activity's on their own), once for the module; every quarantined record names the
topic, partition and offset it was produced at. No sleeps: `processAllAvailable` on each
query."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from slipstream.tools.generators import activity, iot, sensors
from slipstream.tools.generators import ads as ads_generator
from slipstream.tools.generators import temperature_load as temperature_generator
from slipstream.tools.generators.streams import Report, StreamSpec, generate
from tests import stream_reference as ref
from tests.helpers import data_batch_ids, landed_batches, late_records
from tests.join_reference import (
    ads_records,
    check_ads,
    temperature_load_pairs,
    temperature_load_reading,
)
from tests.services import produce, read_topic
from tests.spark.pipelines.test_activity import check_every_output
from tests.spark.pipelines.test_sensors import _assert_alerts, _assert_baseline
from tests.spark.pipelines.test_sensors import _assert_stats_equal as assert_stats_equal

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

FIVE, TEN = timedelta(minutes=5), timedelta(minutes=10)


@dataclass
class Case:
    """A pipeline's run: what was produced to which topic, and what came out."""

    pipeline: str
    root: Path
    sent: dict[str, list[str]]  # stream input -> its lines, in produce order
    topics: dict[str, str]  # stream input -> topic
    report: Report
    per_batch: int | None = None  # maxOffsetsPerTrigger (one partition), or one batch of all
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    totals: dict[str, dict[str, Any]] = field(default_factory=dict)
    quarantine: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)  # output -> dead-letter records
    checkpoints: dict[str, Path] = field(default_factory=dict)  # output -> its query's
    watermark: datetime | None = None

    def batches(self, stream: str) -> list[list[str]]:
        """The micro-batches the query read: consecutive chunks of `per_batch` records."""
        lines = self.sent[stream]
        size = self.per_batch or len(lines)
        return [lines[i : i + size] for i in range(0, len(lines), size)]

    def replay(
        self,
        output: str,
        stream: str,
        parse: Callable[[str], Any],
        time: str,
        key: Any,
        window: timedelta | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """`stream_reference.counted` over those micro-batches, under a 10-minute watermark,
        at the batch ids `output`'s query ran them: back to back when it read the topic, which
        held every record before it started; with the ingest stage it reads each batch once
        the ingest query has written it, and may catch up and run a no-data batch between
        two (`data_batch_ids`)."""
        ids = data_batch_ids(self.checkpoints[output])
        return ref.counted(self.batches(stream), parse, time, key, TEN, window, ids)


def _lines(folder: Path, stream: str) -> list[str]:
    return [line for batch in landed_batches(folder, stream) for line in batch]


def _case(
    kafka: Any,
    root: Path,
    pipeline: str,
    spec: StreamSpec,
    workload: Any,
    partitions: int = 1,
    per_batch: int | None = None,
) -> Case:
    """Generate the workload's streams and produce each, in file order, to a topic of its own."""
    report = generate(spec, workload, root / "landing")
    names = [shape.name for shape in workload.shapes]
    nested = len(names) > 1  # several streams: one folder each
    sent = {n: _lines(root / "landing" / n if nested else root / "landing", n) for n in names}
    topics = {n: kafka.create_topic(f"pipes-{pipeline}-{n}", partitions) for n in names}
    for name, lines in sent.items():
        produce(kafka.bootstrap, topics[name], lines)
    return Case(pipeline, root, sent, topics, report, per_batch)


def _harness(spark: SparkSession, kafka: Any, case: Case, *extra: str) -> PipelineHarness:
    options = {"startingOffsets": "earliest"}
    if case.per_batch:
        options["maxOffsetsPerTrigger"] = str(case.per_batch)
    inputs = [f"{n}={kafka.url(t, **options)}" for n, t in case.topics.items()]
    return PipelineHarness(
        spark, case.pipeline, case.root, sink="sqlite", source=None, input=[*inputs, *extra]
    )


def _collect(spark: SparkSession, h: PipelineHarness, case: Case) -> None:
    """Run the pipeline's queries until idle; keep its tables, totals, quarantines and
    dead-letter counts (and ads' final watermark)."""
    h.process()
    case.tables = {o: h.results(o) for o in h.prepared.outputs if "." not in o}
    case.totals = dict(h.totals)
    case.quarantine = {
        n: [r.asDict() for r in read_quarantine(spark, h.prepared.inputs[n].quarantine).collect()]
        for n in case.topics
    }
    case.late = {
        o: sum(map(len, late_records(case.root / "state", case.pipeline, o).values()))
        for o in case.tables
    }
    case.checkpoints = {o: Path(h.prepared.outputs[o].ctx.checkpoint) for o in case.tables}
    if case.pipeline == "ads":
        case.watermark = h.watermark("ad_impressions_outcome")


def _run_at_once(spark: SparkSession, kafka: Any, cases: dict[str, Case], **extra: str) -> None:
    """Start every case's queries, then run each until idle (`extra`: more inputs by name)."""
    harnesses = [
        _harness(spark, kafka, case, *([extra[name]] if name in extra else []))
        for name, case in cases.items()
    ]
    with ExitStack() as stack:
        for harness in harnesses:
            stack.enter_context(harness)
        for harness, case in zip(harnesses, cases.values(), strict=True):
            _collect(spark, harness, case)


@pytest.fixture(scope="module")
def runs(
    kafka_spark: SparkSession, kafka: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Case]:
    """sensors, iot_steps, temperature_load and ads: their queries (thirteen, and five
    quarantines) at once."""
    root = tmp_path_factory.mktemp("kafka-pipelines")
    ads = ads_generator.Ads(rate=0.012, ads=6, users=300, ctr=0.2, seed=8)
    cases = {
        "sensors": _case(
            kafka, root / "sensors", "sensors",
            StreamSpec(duration=timedelta(minutes=35), seed=5, file_every=timedelta(minutes=1),
                       watermark=TEN, window=FIVE, out_of_order=0.08, late=0.06,
                       duplicates=0.05, malformed=0.04),
            sensors.Sensors(5, 1, 1, 1, seed=5), per_batch=60,
        ),
        "iot_steps": _case(
            kafka, root / "iot_steps", "iot_steps",
            StreamSpec(duration=timedelta(minutes=25), seed=9, file_every=timedelta(minutes=1),
                       out_of_order=0.1, late=0.05, duplicates=0.0, malformed=0.03),
            iot.Devices(rate=0.25), per_batch=60,
        ),
        "temperature_load": _case(
            kafka, root / "temperature_load", "temperature_load",
            replace(temperature_generator.DEFAULTS, duration=timedelta(hours=4),
                    file_every=timedelta(minutes=15), malformed=0.03),
            temperature_generator.Locations(6), partitions=2,
        ),
        "ads": _case(
            kafka, root / "ads", "ads",
            replace(ads_generator.DEFAULTS, duration=timedelta(hours=5),
                    file_every=timedelta(minutes=30), malformed=0.03, duplicates=0.02),
            ads, partitions=2,
        ),
    }  # fmt: skip
    catalog = ads.write_catalog(root / "ads" / "catalog.csv")
    _run_at_once(kafka_spark, kafka, cases, ads=f"catalog={catalog}")
    return cases


@pytest.fixture(scope="module")
def activity_run(
    kafka_spark: SparkSession, kafka: Any, tmp_path_factory: pytest.TempPathFactory
) -> Case:
    """activity on its own (`-k activity` runs only it): Spark gives the Python worker of its
    transformWithState queries a fixed 10 s to connect back to the JVM. On the shared 2-core
    machine at a load of 25-37 it missed that, alone or beside the other queries, and so did
    tests/spark/pipelines/test_activity.py's; at a load of 11 both passed."""
    case = _case(
        kafka, tmp_path_factory.mktemp("kafka-activity"), "activity",
        StreamSpec(duration=timedelta(hours=2), seed=12, file_every=timedelta(minutes=4),
                   watermark=TEN, out_of_order=0.05, late=0.04, duplicates=0.03, malformed=0.03),
        activity.Users(users=10, bursty=1, idle=timedelta(minutes=100), seed=12), per_batch=50,
    )  # fmt: skip
    _run_at_once(kafka_spark, kafka, {"activity": case})
    return case


def _assert_quarantined(
    kafka: Any, case: Case, parse: Callable[[str, str], object | None], count: int
) -> None:
    """Each input's quarantine holds exactly the records `parse(input, line)` rejects (None),
    `count` of them in all and some, each with `kafka:TOPIC:PARTITION:OFFSET` as the broker
    holds it."""
    total = 0
    for stream, topic in case.topics.items():
        produced = read_topic(kafka.bootstrap, topic)
        assert sorted(r["value"] for r in produced) == sorted(case.sent[stream])
        rejected = [r for r in produced if parse(stream, r["value"]) is None]
        assert sorted((r["raw"], r["source"]) for r in case.quarantine[stream]) == sorted(
            (r["value"], f"kafka:{topic}:{r['partition']}:{r['offset']}") for r in rejected
        ), stream
        total += len(rejected)
    assert total == count > 0


def test_sensors_from_a_topic_equal_the_independent_replay(
    runs: dict[str, Case], kafka: Any
) -> None:
    case = runs["sensors"]
    now = datetime.now(UTC)
    assert len(case.batches("readings")) > 4
    sent = len(case.sent["readings"])
    for output in ("sensor_stats", "sensor_alerts", "sensor_baseline"):
        readings, stats = case.replay(
            output, "readings", lambda x: ref.sensor_reading(x, now), "event_time",
            lambda r: (r["sensor_id"], r["event_time"]),
        )  # fmt: skip
        run = {"report": case.report, "tables": case.tables, "readings": readings,
               "stats": stats}  # fmt: skip
        if output == "sensor_stats":
            assert_stats_equal(case.tables[output], ref.sensor_stats(readings, FIVE), FIVE)
        elif output == "sensor_alerts":
            _assert_alerts(run, FIVE)
        else:
            _assert_baseline(run)
        totals = case.totals[f"sensors.{output}"]
        assert totals["rows"] == sent
        counts = (totals["quarantined"], totals["late"], totals["duplicates"])
        assert counts == (stats["invalid"], stats["late"], stats["duplicates"]), output
        assert case.late[output] == totals["late"], output  # the dead-letter: Spark's late rows
        if output != "sensor_alerts":  # every counted reading is in one row's count
            valid = sum(r["readings"] for r in case.tables[output])
            assert valid + sum(counts) == sent, output
    _assert_quarantined(kafka, case, lambda _, x: ref.sensor_reading(x, now), stats["invalid"])


def test_iot_steps_from_a_topic_equal_the_independent_replay(
    runs: dict[str, Case], kafka: Any
) -> None:
    case = runs["iot_steps"]
    now = datetime.now(UTC)
    records, stats = case.replay(
        "steps", "device", lambda x: ref.iot_record(x, now), "timestamp", None, FIVE
    )
    final = {
        start: steps
        for start, steps in ref.step_sums(records, FIVE).items()
        if datetime.fromisoformat(start) + FIVE <= stats["watermark"]
    }
    table = case.tables["steps"]
    assert {r["window_start"]: r["num_steps"] for r in table} == final
    assert len(table) == len(final) > 1  # appended once each, when final
    assert all(
        r["window_end"] == ref.iso(datetime.fromisoformat(r["window_start"]) + FIVE) for r in table
    )
    totals = case.totals["iot_steps.steps"]
    assert totals["rows"] == len(case.sent["device"])
    assert totals["quarantined"] == stats["invalid"] > 0
    assert case.late["steps"] == stats["late"]  # the dead-letter: the records the model drops
    assert (totals["late"] > 0) == (stats["late"] > 0)
    _assert_quarantined(kafka, case, lambda _, x: ref.iot_record(x, now), stats["invalid"])


def test_activity_from_a_topic_equals_the_independent_replay(
    activity_run: Case, kafka: Any
) -> None:
    case = activity_run
    batches = case.batches("actions")
    assert len(batches) > 4
    stats = check_every_output(
        {**case.tables, "totals": case.totals}, batches, case.report.info["bursty"]
    )
    now = datetime.now(UTC)
    _assert_quarantined(kafka, case, lambda _, x: ref.activity_action(x, now), stats["invalid"])


def test_temperature_load_from_two_topics_joins_as_pandas_does(
    runs: dict[str, Case], kafka: Any
) -> None:
    case = runs["temperature_load"]
    parsed = {
        stream: [r for r in map(lambda x: temperature_load_reading(stream, x), lines) if r]
        for stream, lines in case.sent.items()
    }
    expected = temperature_load_pairs(parsed["temperature"], parsed["load"])
    rows = case.tables["temperature_load"]
    got = {(r["location_id"], r["temp_taken_time"], r["load_taken_time"]) for r in rows}
    assert len(rows) == len(expected) > 0 and got == expected
    sent = sum(map(len, case.sent.values()))
    invalid = sent - sum(map(len, parsed.values()))  # valid + quarantined = sent
    _assert_quarantined(kafka, case, temperature_load_reading, invalid)
    totals = case.totals["temperature_load.temperature_load"]
    assert totals["rows"] == sent and totals["quarantined"] == invalid
    assert totals["late"] == totals["duplicates"] == 0


def test_ads_from_two_topics_equals_pandas(runs: dict[str, Case], kafka: Any) -> None:
    """Impressions and clicks each on a topic; the catalog a CSV file (a static table)."""
    case = runs["ads"]
    catalog = ads_generator.read_catalog(case.root / "catalog.csv")
    imps = ads_records("impressions", case.sent["impressions"])
    clicks = ads_records("clicks", case.sent["clicks"])
    check_ads(case.tables, case.watermark, imps, clicks, catalog)
    # quarantined: what the generator made malformed, each at the offset the broker holds it
    malformed = sum(c.malformed for c in case.report.streams.values())
    quarantined = {n: {r["raw"] for r in rows} for n, rows in case.quarantine.items()}
    _assert_quarantined(kafka, case, lambda n, x: x not in quarantined[n] or None, malformed)
    totals = case.totals["ads.ad_clicks_attributed"]
    assert totals["rows"] == sum(map(len, case.sent.values()))
    assert totals["quarantined"] == malformed
