"""Kafka end to end on a real broker (tests/services.py starts one, KRaft, from Maven Central's
jars) with Spark's own Kafka connector: seed 000's read and write examples, pipelines bound to a
topic compared with an independent computation over what was produced, the Kafka sink read
back, and the refusals that come before any query starts. No sleeps: `processAllAvailable`,
available-now runs, and bounded reads of the topics up to their end offsets."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.app.commands import check as check_command
from slipstream.errors import ConfigError
from slipstream.runtime import runner
from slipstream.runtime.explain import explain
from slipstream.settings.config import load_settings
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from slipstream.tools.generators.trending import TrendingSpec, generate, write_catalog
from tests import stream_reference as ref
from tests.helpers import mobile_counts
from tests.services import produce, read_topic
from tests.trending_reference import article_views, counted_events, table_rows

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _topic(kafka: Any, request: pytest.FixtureRequest, partitions: int = 1) -> str:
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return kafka.create_topic(name, partitions)


MOBILE_10M = timedelta(minutes=10)  # mobile's default window and watermark


def _mobile_action(line: str) -> dict[str, Any] | None:
    """A line's valid action (mobile's required fields, its time readable), or None."""
    doc = ref.json_object(line)
    if doc is None or not isinstance(doc.get("id"), str):
        return None
    moment = ref.parse_time(doc.get("ts"))
    if not isinstance(doc.get("action"), str) or moment is None:
        return None
    return {"action": doc["action"], "ts": moment}


def _mobile_lines(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    start = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    lines = []
    for i in range(count):
        ts = start + timedelta(seconds=rng.randrange(0, 3 * 3600))
        action = rng.choice(["open", "close", "crash", "swipe"])
        # both ISO shapes the seed uses: naive (UTC) and with a zone
        text = ts.strftime("%Y-%m-%dT%H:%M:%S") + ("Z" if i % 3 == 0 else "")
        lines.append(json.dumps({"id": f"phone{rng.randrange(50)}", "action": action, "ts": text}))
    return lines


# --- seed 000: "Reading from Kafka" and "Writing to Kafka" --------------------------------------


def test_seed_000_reading_from_kafka(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest
) -> None:
    """spark.readStream.format("kafka").option("kafka.bootstrap.servers", ...)
    .option("subscribe", "event").load(): the source's schema, and every record produced."""
    topic = _topic(kafka, request, partitions=3)
    words = [f"word{i % 17}" for i in range(300)]
    produce(kafka.bootstrap, topic, words, keys=[str(i) for i in range(300)])
    input_df = (
        kafka_spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    assert [(f.name, f.dataType.simpleString()) for f in input_df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
    ]
    query = (
        input_df.selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition")
        .writeStream.format("memory")
        .queryName("seed000_read")
        .start()
    )
    try:
        query.processAllAvailable()
        rows = kafka_spark.table("seed000_read").collect()
    finally:
        query.stop()
    assert sorted((r.k, r.v) for r in rows) == sorted((str(i), w) for i, w in enumerate(words))
    assert {r.partition for r in rows} == {0, 1, 2}


def test_seed_000_writing_to_kafka_word_counts_in_update_mode(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """counts.selectExpr("cast(word as string) as key", "cast(count as string) as value")
    .writeStream.format("kafka").option("topic", "wordCounts").outputMode("update"): the
    latest value of each key is the word's count over all the lines."""
    source, sink = _topic(kafka, request), kafka.create_topic(f"wc-{request.node.name[:40]}")
    lines = ["the cat sat", "the dog sat on the cat", "a cat"]
    produce(kafka.bootstrap, source, lines[:2])
    lines_df = (
        kafka_spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
    )
    counts = (
        lines_df.select(F.explode(F.split(F.col("value"), r"\s")).alias("word"))
        .groupBy("word")
        .count()
    )
    query = (
        counts.selectExpr("cast(word as string) as key", "cast(count as string) as value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", sink)
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        produce(kafka.bootstrap, source, lines[2:])  # a second batch updates two words
        query.processAllAvailable()
    finally:
        query.stop()
    records = read_topic(kafka.bootstrap, sink)
    latest = {r["key"]: int(r["value"]) for r in sorted(records, key=lambda r: r["offset"])}
    assert latest == dict(Counter(" ".join(lines).split()))
    # update mode: the second batch wrote only the words it changed
    assert len(records) == len(set(" ".join(lines[:2]).split())) + 2


# --- pipelines bound to a topic -----------------------------------------------------------------


def test_mobile_from_a_topic_equals_pandas_and_quarantines_with_offsets(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    topic = _topic(kafka, request, partitions=2)
    lines = _mobile_lines(2000, seed=3)
    bad = ['{"id": "p1", "action": "open"', '{"id": "p2", "action": "open", "ts": "soon"}']
    produce(kafka.bootstrap, topic, lines[:1000] + bad + lines[1000:])
    url = kafka.url(topic, startingOffsets="earliest")
    with PipelineHarness(
        kafka_spark,
        "mobile",
        tmp_path,
        sink="sqlite",
        mode="update",
        trigger="available-now",
        source=None,
        input=[url],
    ) as h:
        assert h.prepared.inputs["actions"].source.kind == "kafka"  # type: ignore[union-attr]
        h.process()
        table = h.results()
        totals = h.totals["mobile.counts"]
        quarantine = read_quarantine(kafka_spark, h.prepared.inputs["actions"].quarantine)
        quarantined = quarantine.collect()
    got = (
        pd.DataFrame(table)[["window_start", "action", "count"]]
        .sort_values(["window_start", "action"])
        .reset_index(drop=True)
    )
    assert got.to_dict("records") == mobile_counts(lines).to_dict("records")
    assert totals["quarantined"] == 2
    produced = {r["value"]: r for r in read_topic(kafka.bootstrap, topic)}
    assert sorted(r["source"] for r in quarantined) == sorted(
        f"kafka:{topic}:{produced[b]['partition']}:{produced[b]['offset']}" for b in bad
    )


def test_null_empty_and_blank_values_are_quarantined_with_their_offsets(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """issue 43 break 1: 2 valid records, 2 null values (tombstones), 1 empty and 1 of three
    spaces read as `6 records read = 6 valid`, with 2 rows in the table and none quarantined.
    A Kafka record is a record, whatever its value: each of the 4 is quarantined with its own
    reason and its topic, partition and offset, and the equation holds."""
    topic = _topic(kafka, request)
    lines = _mobile_lines(2, seed=43)
    sent = [lines[0], None, "", None, "   ", lines[1]]
    produce(kafka.bootstrap, topic, sent, keys=[f"k{i}" for i in range(len(sent))])
    url = kafka.url(topic, startingOffsets="earliest")
    with PipelineHarness(
        kafka_spark,
        "mobile",
        tmp_path,
        sink="sqlite",
        mode="update",
        trigger="available-now",
        source=None,
        input=[url],
    ) as h:
        h.process()
        table = h.results()
        totals = h.totals["mobile.counts"]
        quarantined = read_quarantine(kafka_spark, h.prepared.inputs["actions"].quarantine)
        rows = [r.asDict() for r in quarantined.collect()]
    produced = read_topic(kafka.bootstrap, topic)  # what the broker holds, read independently
    reasons = {None: "null value", "": "empty value", "   ": "blank value"}
    empty = [r for r in produced if r["value"] is None or not r["value"].strip()]
    assert len(produced) == 6 and len(empty) == 4
    got = sorted((r["window_start"], r["action"], r["count"]) for r in table)
    assert got == sorted(tuple(r) for r in mobile_counts(lines).values.tolist())
    assert totals["rows"] == len(produced)  # records read
    assert totals["quarantined"] == len(empty)
    assert sorted((r["source"], r["reason"], r["raw"] or "") for r in rows) == sorted(
        (f"kafka:{topic}:{r['partition']}:{r['offset']}", reasons[r["value"]], r["value"] or "")
        for r in empty
    )


def test_trending_from_a_topic_equals_the_independent_computation(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    spec = TrendingSpec(
        articles=40,
        users=300,
        rate=500.0,
        events=1500,
        seed=21,
        out_of_order=0.08,
        late=0.04,
        duplicates=0.05,
        malformed=0.03,
        unknown_article=0.03,
    )
    catalog = write_catalog(tmp_path / "catalog.csv", spec)
    report = generate(replace(spec), tmp_path / "generated")
    lines = [
        line
        for path in sorted((tmp_path / "generated").glob("views-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    topic = _topic(kafka, request, partitions=3)
    produce(kafka.bootstrap, topic, lines)
    with PipelineHarness(
        kafka_spark,
        "trending",
        tmp_path,
        sink="sqlite",
        trigger="available-now",
        source=None,
        input=[f"events={kafka.url(topic, startingOffsets='earliest')}", f"catalog={catalog}"],
    ) as h:
        h.process()
        table = h.results()
        totals = h.totals["trending.views"]
    events, stats = counted_events([lines], timedelta(minutes=10), datetime.now(UTC))
    assert table_rows(table) == article_views(
        events, catalog, timedelta(minutes=10), timedelta(minutes=1)
    )
    assert totals["duplicates"] == stats["duplicates"] == report.duplicates
    assert totals["quarantined"] == stats["invalid"] == report.malformed


# --- Kafka as a sink ----------------------------------------------------------------------------


def test_mobile_into_a_kafka_sink_keys_by_the_output_key_values_as_json(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source = _topic(kafka, request)
    sink = kafka.create_topic(f"out-{request.node.name[:40]}")
    # in event-time order: the second batch's actions are not late for the first's watermark
    lines = sorted(_mobile_lines(600, seed=5), key=lambda line: json.loads(line)["ts"][:19])
    produce(kafka.bootstrap, source, lines[:300])
    with PipelineHarness(
        kafka_spark,
        "mobile",
        tmp_path,
        sink=f"kafka://{kafka.bootstrap}/{sink}",
        mode="update",
        source=None,
        input=[kafka.url(source, startingOffsets="earliest")],
    ) as h:
        assert "at-least-once" in explain(h.prepared)
        h.process()
        produce(kafka.bootstrap, source, lines[300:])
        h.process()
    records = read_topic(kafka.bootstrap, sink)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: r["offset"]):  # one partition: in write order
        key = json.loads(record["key"])
        assert set(key) == {"window_start", "action"}
        value = json.loads(record["value"])
        assert {k: value[k] for k in key} == key
        latest[(key["window_start"], key["action"])] = value
    expected = mobile_counts(lines)
    got = sorted(
        (v["window_start"].replace(".000Z", "Z"), v["action"], v["count"]) for v in latest.values()
    )
    assert got == [tuple(r) for r in expected[["window_start", "action", "count"]].values.tolist()]


# --- refused before any query starts ------------------------------------------------------------


def test_a_topic_that_does_not_exist_is_refused_before_any_query_starts(
    kafka_spark: SparkSession, kafka: Any, tmp_path: Path
) -> None:
    settings = load_settings(
        "mobile",
        {"input": [kafka.url("no-such-topic")], "state_dir": tmp_path / "state"},
        environ={},
    )
    active = len(kafka_spark.streams.active)
    with pytest.raises(ConfigError) as err:
        runner.prepare(settings)
    assert err.value.code == "KAFKA_TOPIC_NOT_FOUND"
    assert "no-such-topic" in err.value.message
    assert len(kafka_spark.streams.active) == active
    assert not (tmp_path / "state" / "checkpoints").exists()


def test_a_sink_topic_that_does_not_exist_is_refused_before_its_query_starts(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    source = _topic(kafka, request)
    harness = PipelineHarness(
        kafka_spark,
        "mobile",
        tmp_path,
        sink=f"kafka://{kafka.bootstrap}/no-such-sink",
        source=None,
        input=[kafka.url(source)],
    )
    with pytest.raises(ConfigError) as err:
        harness.start()
    assert err.value.code == "KAFKA_TOPIC_NOT_FOUND"
    assert not kafka_spark.streams.active


def test_check_with_a_bad_option_is_refused_naming_the_allowed_ones(
    kafka: Any, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    from slipstream.app.cli import main

    topic = _topic(kafka, request)
    code = main(["check", "mobile", "--input", kafka.url(topic, startingOffset="earliest")])
    said = capsys.readouterr().err
    assert code == 2
    assert "[CONFIG_BAD_VALUE]" in said and "'startingOffset' is not one" in said
    assert "startingOffsets, startingTimestamp, maxOffsetsPerTrigger" in said
    assert "Traceback" not in said


def test_check_prints_the_kafka_input_and_the_at_least_once_sink(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import io

    source, sink = _topic(kafka, request), kafka.create_topic(f"chk-{request.node.name[:40]}")
    settings = load_settings(
        "mobile",
        {
            "input": [kafka.url(source, startingOffsets="earliest", maxOffsetsPerTrigger="500")],
            "sink": f"kafka://{kafka.bootstrap}/{sink}",
            "state_dir": tmp_path / "state",
        },
        environ={},
    )
    out = io.StringIO()
    assert check_command(settings, out, spark=kafka_spark) == 0
    text = out.getvalue()
    assert f"kafka topic {source} at {kafka.bootstrap} as json" in text
    assert "at-least-once" in text


def test_the_batch_line_shows_the_consumer_lag_as_a_capped_backfill_catches_up(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import io
    import re

    from slipstream.monitor.listener import ConsoleReporter

    topic = _topic(kafka, request)
    produce(kafka.bootstrap, topic, _mobile_lines(1000, seed=9))
    out = io.StringIO()
    url = kafka.url(topic, startingOffsets="earliest", maxOffsetsPerTrigger="250")
    with PipelineHarness(
        kafka_spark,
        "mobile",
        tmp_path,
        sink="sqlite",
        mode="update",
        trigger="available-now",
        source=None,
        input=[url],
        handlers=[ConsoleReporter(out)],
    ) as h:
        h.process()  # every batch's line printed when it returns
        # the query that reads the topic: the output, or under the ingest stage its ingest query
        reader = (
            "mobile.quarantine.actions" if h.prepared.settings.ingest_stage else "mobile.counts"
        )
    lines = [x for x in out.getvalue().splitlines() if x.startswith(reader)]
    lags = [int(re.search(r"kafka lag ([\d,]+)", x).group(1).replace(",", "")) for x in lines]  # type: ignore[union-attr]
    assert lags[:4] == [750, 500, 250, 0], out.getvalue()


def test_the_readme_kafka_commands_run_as_a_user_types_them(
    kafka_spark: SparkSession, kafka: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/howto/kafka.md (once the README's "## Kafka"): the broker line's topics on the
    session's broker, then every command as written (the port replaced; `run` finite with
    --trigger available-now)."""
    import re
    import shlex
    import sqlite3

    from slipstream.app.cli import main
    from tests.helpers import REPO

    section = (REPO / "docs" / "howto" / "kafka.md").read_text()
    broker, commands = re.findall(r"```text\n(.*?)```", section, re.S)[:2]
    assert "python -m slipstream.tools.kafka_broker start --port 9092" in broker
    for topic in re.findall(r"--topic (\S+)", broker):
        name, _, partitions = topic.partition(":")
        kafka.create_topic(name, int(partitions or 1))
    monkeypatch.chdir(tmp_path)
    for line in commands.strip().splitlines():
        args = shlex.split(line.replace("127.0.0.1:9092", kafka.bootstrap))
        assert args[0] == "slipstream"
        if args[1] == "run":
            # Spark resolves a relative path against its JVM's folder, not this test's chdir
            args = [a.replace("=catalog.csv", f"={tmp_path / 'catalog.csv'}") for a in args]
            args += ["--trigger", "available-now", "--state-dir", str(tmp_path / "state")]
        assert main(args[1:]) == 0, line
    with sqlite3.connect(tmp_path / "state" / "slipstream.db") as conn:
        views = conn.execute("SELECT SUM(views) FROM article_views").fetchone()[0]
    assert views > 0
    latest = {}
    for record in sorted(read_topic(kafka.bootstrap, "mobile-counts"), key=lambda r: r["offset"]):
        value = json.loads(record["value"])
        latest[record["key"]] = (value["window_start"][:19] + "Z", value["action"], value["count"])
    # what `generate mobile` sent, replayed independently: the run's batches are the topic's
    # records in offset order, maxOffsetsPerTrigger at a time (one partition)
    sent = [r["value"] for r in sorted(read_topic(kafka.bootstrap, "actions"),
                                                key=lambda r: r["offset"])]  # fmt: skip
    report = json.loads((tmp_path / "actions_generation-report.json").read_text())
    assert len(sent) == report["streams"]["actions"]["lines"] > 10_000
    batches = [sent[i : i + 10_000] for i in range(0, len(sent), 10_000)]
    kept, stats = ref.counted(batches, _mobile_action, "ts", None, MOBILE_10M, MOBILE_10M)
    assert stats["invalid"] == report["streams"]["actions"]["malformed"] > 0
    expected = Counter((ref.iso(ref.window_start(r["ts"], MOBILE_10M)), r["action"]) for r in kept)
    assert sorted(latest.values()) == sorted((*key, n) for key, n in expected.items())


def test_a_restart_resumes_from_the_checkpoints_offsets_into_sqlite_exactly_once(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two runs on one checkpoint, records produced before, between and after them: the
    second run reads from where the first one's last committed batch ended, and the table
    equals pandas over everything produced (nothing lost, nothing counted twice)."""
    topic = _topic(kafka, request, partitions=2)
    lines = sorted(_mobile_lines(900, seed=17), key=lambda line: json.loads(line)["ts"][:19])
    url = kafka.url(topic, startingOffsets="earliest")

    def run(*chunks: list[str]) -> list[dict[str, Any]]:
        with PipelineHarness(
            kafka_spark, "mobile", tmp_path, sink="sqlite", mode="update", source=None, input=[url]
        ) as h:
            h.process()  # what was produced while no query ran
            for chunk in chunks:
                produce(kafka.bootstrap, topic, chunk)
                h.process()
            return h.results()

    run(lines[:300], lines[300:500])
    produce(kafka.bootstrap, topic, lines[500:700])  # while no query runs
    table = run(lines[700:])
    got = sorted((r["window_start"], r["action"], r["count"]) for r in table)
    expected = mobile_counts(lines)[["window_start", "action", "count"]].values.tolist()
    assert got == sorted(tuple(r) for r in expected)


@pytest.mark.slow
def test_the_trending_demo_runs_over_a_local_broker(
    kafka_spark: SparkSession, tmp_path: Path
) -> None:
    """`slipstream demo --source kafka`: its own broker, the generator sending to a topic, the
    live top ten from it; the broker stops with the demo."""
    import io

    from slipstream.tools.demo_trending import demo
    from slipstream.tools.serving import top_articles

    out = io.StringIO()
    state = tmp_path / "demo-state"
    assert demo(state, out, rate=1000, max_batches=2, dashboard=None, source="kafka") == 0
    text = out.getvalue()
    assert re.search(r"^kafka: broker 4\.1\.1 on 127\.0\.0\.1:\d+ ", text, re.M), text
    assert "input       events: kafka topic trending-events" in text
    assert text.count("top 10 of the current window") >= 2
    report = json.loads((state / "generator" / "trending-report.json").read_text())
    assert report["interrupted"] is True and report["total_lines"] > 0
    assert len(top_articles(state / "slipstream.db")["current"]) == 10


def test_the_dead_letter_of_a_kafka_input_holds_exactly_the_rows_spark_dropped_as_late(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The late-row dead-letter re-reads a Kafka batch's offset ranges (offsets/N-1 to
    offsets/N; batch 0 from the source's initial offsets) with a batch Kafka read: it holds
    the records the watermark dropped, as plain Python predicts them from the batches before,
    each with its topic, partition and offset."""
    from tests.helpers import late_by_window_end, late_records
    from tests.spark.runtime.test_late import action, iso

    topic = _topic(kafka, request, partitions=2)
    window, delay = timedelta(minutes=10), timedelta(minutes=5)
    batches = [
        [action(1, 0), action(2, 12), action(3, 20, "close")],  # the watermark becomes 10:15
        [action(4, 3), action(5, 9 + 59 / 60), action(6, 10), action(7, 14, "close"),
         action(8, 31)],  # 10:03, 10:09:59 late (window ends 10:10); then the watermark 10:26
        [action(9, 19), action(10, 15, "close"), action(11, 21), action(12, 2)],
    ]  # fmt: skip
    with PipelineHarness(
        kafka_spark, "mobile", tmp_path, sink="sqlite", mode="update", window="10m",
        watermark="5m", source=None, input=[kafka.url(topic, startingOffsets="earliest")],
    ) as h:  # fmt: skip
        assert not h.prepared.late["counts"].uncovered, h.prepared.late["counts"]
        for rows in batches:
            lines = [json.dumps(r) for r in rows]
            produce(kafka.bootstrap, topic, lines, keys=[r["id"] for r in rows])
            h.process()
        results = h.results()
        spark_late = h.totals["mobile.counts"]["late"]
    written = late_records(tmp_path / "state", "mobile", "counts")

    late_rows, kept = late_by_window_end(batches, window, delay)
    expected = [(row["id"], iso(mark)) for row, mark in late_rows]
    late = [r for batch in written.values() for r in batch]
    assert sorted((json.loads(r["raw"])["id"], r["watermark"]) for r in late) == sorted(expected)
    assert {e[0] for e in expected} == {"p4", "p5", "p9", "p10", "p12"}
    assert 0 < spark_late <= len(late)
    produced = {r["value"]: r for r in read_topic(kafka.bootstrap, topic)}
    assert sorted(r["source"] for r in late) == sorted(
        f"kafka:{topic}:{produced[r['raw']]['partition']}:{produced[r['raw']]['offset']}"
        for r in late
    )
    frame = pd.DataFrame(kept)
    frame["window_start"] = (
        pd.to_datetime(frame["ts"]).dt.floor("10min").dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    model = frame.groupby(["window_start", "action"]).size().to_dict()
    assert {(r["window_start"], r["action"]): r["count"] for r in results} == model
