"""A Kafka input over several topics on a real broker (issue 42 item 2): `mobile` over a topic
list (`/a,b`) and over a pattern (`?subscribePattern=`), each compared with pandas over every
record produced; the consumer lag per topic and partition; the late-row dead-letter re-reading
a batch of two topics; `--from-checkpoint` starting each topic of a list where OLD stands. No
sleeps: available-now runs and `processAllAvailable`."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.monitor.kafka_lag import partition_lag
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from tests.e2e.kafka.test_kafka import _mobile_lines
from tests.helpers import mobile_counts
from tests.services import produce, read_topic
from tests.spark.checkpoint.test_from_checkpoint import expected, mobile, table

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _name(request: pytest.FixtureRequest, suffix: str) -> str:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"s-{base}-{suffix}"


def _counted(
    spark: SparkSession, tmp_path: Path, url: str
) -> tuple[pd.DataFrame, list[Any], dict[str, int] | None]:
    """mobile over `url` from the earliest offsets, available-now: its table, its
    quarantine, and the consumer lag its last batch reported."""
    with PipelineHarness(
        spark, "mobile", tmp_path, sink="sqlite", mode="update", trigger="available-now",
        source=None, input=[url],
    ) as h:  # fmt: skip
        h.process()
        table_rows = h.results()
        quarantine = read_quarantine(spark, h.prepared.inputs["actions"].quarantine).collect()
        progress = h.progress()[-1]
    got = (
        pd.DataFrame(table_rows)[["window_start", "action", "count"]]
        .sort_values(["window_start", "action"])
        .reset_index(drop=True)
    )
    return got, quarantine, partition_lag(progress or {})


def _sources(bootstrap: str, topics: list[str], values: list[str]) -> list[str]:
    """`kafka:TOPIC:PARTITION:OFFSET` of each of `values` as produced to `topics`."""
    where = {
        r["value"]: f"kafka:{topic}:{r['partition']}:{r['offset']}"
        for topic in topics
        for r in read_topic(bootstrap, topic)
    }
    return sorted(where[v] for v in values)


def test_mobile_over_a_topic_list_equals_pandas_over_both_topics(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    first = kafka.create_topic(_name(request, "a"), 2)
    second = kafka.create_topic(_name(request, "b"), 1)
    lines = _mobile_lines(1200, seed=21)
    bad = ['{"id": "p1", "action": "open"']
    produce(kafka.bootstrap, first, lines[:700])
    produce(kafka.bootstrap, second, lines[700:] + bad)
    got, quarantine, lag = _counted(
        kafka_spark, tmp_path, kafka.url(f"{first},{second}", startingOffsets="earliest")
    )
    assert got.to_dict("records") == mobile_counts(lines).to_dict("records")
    assert sorted(r["source"] for r in quarantine) == _sources(
        kafka.bootstrap, [first, second], bad
    )
    assert lag == {f"{first}:0": 0, f"{first}:1": 0, f"{second}:0": 0}  # every one read


def test_mobile_over_a_pattern_equals_pandas_over_the_topics_it_matches(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    prefix = _name(request, "p")
    matched = [kafka.create_topic(f"{prefix}-x", 2), kafka.create_topic(f"{prefix}-y", 1)]
    other = kafka.create_topic(f"{prefix}other", 1)  # "PREFIX-.*" does not match it
    lines = _mobile_lines(900, seed=22)
    produce(kafka.bootstrap, matched[0], lines[:400])
    produce(kafka.bootstrap, matched[1], lines[400:])
    produce(kafka.bootstrap, other, _mobile_lines(300, seed=23))
    got, quarantine, lag = _counted(
        kafka_spark,
        tmp_path,
        kafka.url("", subscribePattern=f"{prefix}-.*", startingOffsets="earliest"),
    )
    assert got.to_dict("records") == mobile_counts(lines).to_dict("records")
    assert quarantine == []
    assert lag == {f"{matched[0]}:0": 0, f"{matched[0]}:1": 0, f"{matched[1]}:0": 0}


def test_the_dead_letter_of_a_topic_list_holds_the_late_rows_of_both_topics(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """As tests/e2e/kafka/test_kafka.py's dead-letter test, each batch's rows produced to two
    topics by turns: the dead-letter re-reads both topics' offset ranges of a batch."""
    from tests.helpers import late_by_window_end, late_records
    from tests.spark.runtime.test_late import action, iso

    topics = [
        kafka.create_topic(_name(request, "a"), 1),
        kafka.create_topic(_name(request, "b"), 2),
    ]
    window, delay = timedelta(minutes=10), timedelta(minutes=5)
    batches = [
        [action(1, 0), action(2, 12), action(3, 20, "close")],  # the watermark becomes 10:15
        [action(4, 3), action(5, 9 + 59 / 60), action(6, 10), action(7, 14, "close"),
         action(8, 31)],  # 10:03, 10:09:59 late (window ends 10:10); then the watermark 10:26
        [action(9, 19), action(10, 15, "close"), action(11, 21), action(12, 2)],
    ]  # fmt: skip
    url = kafka.url(",".join(topics), startingOffsets="earliest")
    with PipelineHarness(
        kafka_spark, "mobile", tmp_path, sink="sqlite", mode="update", window="10m",
        watermark="5m", source=None, input=[url],
    ) as h:  # fmt: skip
        assert not h.prepared.late["counts"].uncovered, h.prepared.late["counts"]
        for rows in batches:
            for turn, topic in enumerate(topics):
                mine = rows[turn :: len(topics)]
                produce(kafka.bootstrap, topic, [json.dumps(r) for r in mine],
                        keys=[r["id"] for r in mine])  # fmt: skip
            h.process()
    written = late_records(tmp_path / "state", "mobile", "counts")
    late_rows, _ = late_by_window_end(batches, window, delay)
    late = [r for batch in written.values() for r in batch]
    assert sorted((json.loads(r["raw"])["id"], r["watermark"]) for r in late) == sorted(
        (row["id"], iso(mark)) for row, mark in late_rows
    )
    assert {r["source"].split(":")[1] for r in late} == set(topics)  # from both topics
    assert sorted(r["source"] for r in late) == _sources(
        kafka.bootstrap, topics, [r["raw"] for r in late]
    )


def test_from_checkpoint_starts_each_topic_of_a_list_where_old_stands(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """OLD reads two topics; NEW, on a new checkpoint from OLD's, counts exactly what was
    produced to either after OLD's last batch (without the offsets it would start at latest
    and count nothing)."""
    topics = [
        kafka.create_topic(_name(request, "a"), 2),
        kafka.create_topic(_name(request, "b"), 1),
    ]
    lines = sorted(_mobile_lines(600, seed=24), key=lambda line: json.loads(line)["ts"])
    old, new = lines[:300], lines[300:]
    produce(kafka.bootstrap, topics[0], old[:150])
    produce(kafka.bootstrap, topics[1], old[150:])
    url = kafka.url(",".join(topics), startingOffsets="earliest")
    with mobile(kafka_spark, tmp_path, "old", source=None, input=[url]) as h:
        h.process()
    assert table(tmp_path / "old" / "slipstream.db") == expected(old, "10min")
    produce(kafka.bootstrap, topics[0], new[:100])
    produce(kafka.bootstrap, topics[1], new[100:])
    url = kafka.url(",".join(topics))
    with mobile(kafka_spark, tmp_path, "new", source=None, input=[url], window="5m",
                from_checkpoint=tmp_path / "old") as h:  # fmt: skip
        h.process()
    assert table(tmp_path / "new" / "slipstream.db") == expected(new, "5min")


def test_mobile_over_assigned_partitions_equals_pandas_over_those_partitions(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    topic = kafka.create_topic(_name(request, "a"), 2)
    lines = _mobile_lines(800, seed=25)
    produce(kafka.bootstrap, topic, lines, keys=[json.loads(line)["id"] for line in lines])
    in_one = [r["value"] for r in read_topic(kafka.bootstrap, topic) if r["partition"] == 1]
    assert 0 < len(in_one) < len(lines)  # both partitions hold records
    url = kafka.url("", assign=json.dumps({topic: [1]}), startingOffsets="earliest")
    got, quarantine, lag = _counted(kafka_spark, tmp_path, url)
    assert got.to_dict("records") == mobile_counts(in_one).to_dict("records")
    assert quarantine == [] and lag == {f"{topic}:1": 0}


def test_from_checkpoint_of_a_pattern_reads_a_topic_created_since_from_its_beginning(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """OLD reads the one topic its pattern matches; a second one that matches is created
    after. NEW starts the first where OLD stands and the second from its beginning (Spark
    takes per-partition offsets only naming every partition read): it counts exactly what
    was produced after OLD's last batch."""
    prefix = _name(request, "p")
    first = kafka.create_topic(f"{prefix}-x", 2)
    lines = sorted(_mobile_lines(600, seed=26), key=lambda line: json.loads(line)["ts"])
    old, new = lines[:300], lines[300:]
    produce(kafka.bootstrap, first, old)
    pattern = f"{prefix}-.*"
    url = kafka.url("", subscribePattern=pattern, startingOffsets="earliest")
    with mobile(kafka_spark, tmp_path, "old", source=None, input=[url]) as h:
        h.process()
    assert table(tmp_path / "old" / "slipstream.db") == expected(old, "10min")
    second = kafka.create_topic(f"{prefix}-y", 1)
    produce(kafka.bootstrap, first, new[:100])
    produce(kafka.bootstrap, second, new[100:])
    url = kafka.url("", subscribePattern=pattern)
    with mobile(kafka_spark, tmp_path, "new", source=None, input=[url], window="5m",
                from_checkpoint=tmp_path / "old") as h:  # fmt: skip
        h.process()
    assert table(tmp_path / "new" / "slipstream.db") == expected(new, "5min")
