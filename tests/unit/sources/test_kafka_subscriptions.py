"""A Kafka input as Spark subscribes (issue 42 item 2), without a broker or Spark: a topic list
in the path, `subscribePattern` and `assign` with an empty path, exactly one of them, and the
per-partition `startingOffsets` that name what the input reads; then what each means for the
consumer lag, the dead-letter's re-read of a batch and `--from-checkpoint`."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.core.kafka_url import KafkaTopic
from slipstream.errors import CheckpointError, ConfigError
from slipstream.monitor.kafka_lag import partition_lag
from slipstream.runtime.late_plan import _kafka_input_of
from slipstream.settings.config import load_settings
from slipstream.sources import kafka as kafka_source
from slipstream.sources.kafka import kafka_start

HOST = "kafka://127.0.0.1:9092"


@pytest.mark.parametrize(
    ("url", "subscription", "topics", "options"),
    [
        (f"{HOST}/a,b", "subscribe", ("a", "b"), {"subscribe": "a,b"}),
        (f"{HOST}/a, b", "subscribe", ("a", "b"), {"subscribe": "a,b"}),
        (f"{HOST}/?subscribe=a,b", "subscribe", ("a", "b"), {"subscribe": "a,b"}),
        (
            f"{HOST}/?subscribePattern=events-.*",
            "subscribePattern",
            (),
            {"subscribePattern": "events-.*"},
        ),
        (f'{HOST}/?assign={{"a":[0,1]}}', "assign", ("a",), {"assign": '{"a":[0,1]}'}),
    ],
)
def test_a_list_a_pattern_and_partitions_become_sparks_own_options(
    url: str, subscription: str, topics: tuple[str, ...], options: dict[str, str]
) -> None:
    topic = KafkaTopic.parse(url)
    assert (topic.subscription, topic.topics) == (subscription, topics)
    assert topic.spark_options() == {"kafka.bootstrap.servers": "127.0.0.1:9092", **options}
    assert KafkaTopic.parse(topic.describe()) == topic  # what `check` shows parses back


def test_what_each_subscription_reads() -> None:
    listed = KafkaTopic.parse(f"{HOST}/a,b")
    assert listed.reads("a") and listed.reads("b") and not listed.reads("c")
    pattern = KafkaTopic.parse(f"{HOST}/?subscribePattern=events-.*")
    assert pattern.reads("events-a") and not pattern.reads("my-events-a")  # the whole name
    assigned = KafkaTopic.parse(f'{HOST}/?assign={{"a":[1,0],"b":[2]}}')
    assert assigned.assigned == {"a": [0, 1], "b": [2]}
    assert assigned.reads("b") and not assigned.reads("c")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"{HOST}/", "exactly one of"),
        (f"{HOST}/a?subscribePattern=a.*", "got a topic path and subscribePattern"),
        (f'{HOST}/?subscribePattern=a.*&assign={{"a":[0]}}', "subscribePattern and assign"),
        (f"{HOST}/a?subscribe=b", "not both"),
        (f"{HOST}/a,a", "named twice"),
        (f"{HOST}/a,,b", "is not a Kafka topic name"),
        (f"{HOST}/a,b c", "is not a Kafka topic name"),
        (f"{HOST}/?subscribePattern=(", "a regular expression"),
        (f"{HOST}/?subscribePattern=", "a regular expression"),
        (f'{HOST}/?assign={{"a":[]}}', "partitions by topic"),
        (f'{HOST}/?assign={{"a":[-1]}}', "partitions by topic"),
        (f"{HOST}/?assign=a", "partitions by topic"),
        # startingOffsets must name every partition read: Spark refuses any other at start
        (f'{HOST}/a,b?startingOffsets={{"a":{{"0":1}}}}', "it leaves out b"),
        (f'{HOST}/a?startingOffsets={{"a":{{"0":1}},"c":{{"0":1}}}}', "names c"),
        (f'{HOST}/?subscribePattern=e-.*&startingOffsets={{"x":{{"0":1}}}}', "names x"),
        (
            f'{HOST}/?assign={{"a":[0,1]}}&startingOffsets={{"a":{{"0":1}}}}',
            'are not the assigned {"a":[0,1]}',
        ),
    ],
)
def test_a_subscription_other_than_exactly_one_is_refused_before_start(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"input": [url]}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE"
    assert says in err.value.render()


def test_per_partition_starting_offsets_of_each_topic_and_of_the_assigned() -> None:
    listed = KafkaTopic.parse(f'{HOST}/a,b?startingOffsets={{"a":{{"0":5}},"b":{{"0":-2}}}}')
    assert json.loads(listed.option_map["startingOffsets"]) == {"a": {"0": 5}, "b": {"0": -2}}
    KafkaTopic.parse(f'{HOST}/?assign={{"a":[1,0]}}&startingOffsets={{"a":{{"0":3,"1":-1}}}}')


@pytest.mark.parametrize("url", [f"{HOST}/a,b", f"{HOST}/?subscribePattern=a.*"])
def test_a_sink_writes_one_topic(url: str) -> None:
    with pytest.raises(ValueError, match="one topic|not one"):
        KafkaTopic.parse(url, "sink")


# --- the broker's answer, checked before start (a fake admin client) ---------------------------


class _Admin:
    """confluent-kafka's AdminClient.list_topics, answering from `TOPICS`."""

    TOPICS: dict[str, int] = {"a": 2, "b": 1, "events-x": 1, "events-y": 3, "__offsets": 4}

    LEADERLESS: dict[str, int] = {}  # a topic just created: how many answers list it leaderless

    def __init__(self, config: dict[str, Any]) -> None:
        pass

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        from confluent_kafka import KafkaError

        def meta(name: str) -> Any:
            if self.LEADERLESS.get(name, 0) > 0:
                self.LEADERLESS[name] -= 1
                return SimpleNamespace(
                    error=KafkaError(KafkaError.LEADER_NOT_AVAILABLE), partitions={0: None}
                )
            if name not in self.TOPICS:
                return SimpleNamespace(
                    error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), partitions={}
                )
            return SimpleNamespace(error=None, partitions=dict.fromkeys(range(self.TOPICS[name])))

        names = [topic] if topic is not None else list(self.TOPICS)
        return SimpleNamespace(topics={n: meta(n) for n in names})


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("confluent_kafka")
    import confluent_kafka.admin

    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", _Admin)
    monkeypatch.setattr(kafka_source, "client_settings", lambda topic: topic.client_config())


@pytest.mark.parametrize(
    ("url", "read"),
    [
        (f"{HOST}/a,b", {"a": [0, 1], "b": [0]}),
        (f"{HOST}/?subscribePattern=events-.*", {"events-x": [0], "events-y": [0, 1, 2]}),
        (f"{HOST}/?subscribePattern=nothing-yet.*", {}),  # Spark reads one once it is created
        (f"{HOST}/?subscribePattern=__.*|a", {"a": [0, 1]}),  # never an internal topic
        (f'{HOST}/?assign={{"a":[1],"events-y":[0,2]}}', {"a": [1], "events-y": [0, 2]}),
    ],
)
def test_the_partitions_each_subscription_reads_on_the_broker(
    broker: None, url: str, read: dict[str, list[int]]
) -> None:
    topic = KafkaTopic.parse(url)
    assert kafka_source.partitions(topic) == read
    assert kafka_source.check_topic(topic) == sum(map(len, read.values()))


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        (f"{HOST}/a,missing", "KAFKA_TOPIC_NOT_FOUND", "topic 'missing' does not exist"),
        (f'{HOST}/?assign={{"a":[0,7]}}', "KAFKA_TOPIC_NOT_FOUND", "has no partition 7"),
        (f'{HOST}/?assign={{"gone":[0]}}', "KAFKA_TOPIC_NOT_FOUND", "'gone' does not exist"),
        # the partitions named are not those of the topics read: Spark's assertion, before start
        (
            f'{HOST}/a,b?startingOffsets={{"a":{{"0":1}},"b":{{"0":1}}}}',
            "CONFIG_BAD_VALUE",
            'the input reads {"a":[0,1],"b":[0]}',
        ),
    ],
)
def test_topics_and_partitions_the_broker_has_not_are_refused_before_start(
    broker: None, url: str, code: str, says: str
) -> None:
    with pytest.raises(ConfigError) as err:
        kafka_source.check_topic(KafkaTopic.parse(url))
    assert err.value.code == code
    assert says in err.value.render()


def test_a_topic_without_a_leader_yet_is_asked_again_not_called_missing(
    broker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Admin, "LEADERLESS", {"a": 3})
    assert kafka_source.partitions(KafkaTopic.parse(f"{HOST}/a")) == {"a": [0, 1]}
    assert _Admin.LEADERLESS["a"] == 0  # each leaderless answer was asked past
    # one that never gets a leader is refused once the check's bound is over
    monkeypatch.setattr(_Admin, "LEADERLESS", {"a": 10**9})
    with pytest.raises(ConfigError) as err:
        kafka_source.partitions(KafkaTopic.parse(f"{HOST}/a"), timeout_s=0.05)
    assert err.value.code == "KAFKA_TOPIC_NOT_FOUND" and "has no leader" in err.value.message


# --- the consumer lag, the dead-letter's re-read, --from-checkpoint -----------------------------


def test_the_lag_is_per_topic_and_partition_over_every_topic_a_source_reads() -> None:
    progress = {
        "sources": [
            {
                "description": "KafkaV2[SubscribePattern[events-.*]]",
                "endOffset": {"events-x": {"0": 10}, "events-y": {"0": 4, "1": 7}},
                "latestOffset": {"events-x": {"0": 12}, "events-y": {"0": 4, "1": 9}},
            }
        ]
    }
    assert partition_lag(progress) == {"events-x:0": 2, "events-y:0": 0, "events-y:1": 2}


def _offset_log(root: Path, index: int, initial: dict[str, Any], batches: list[Any]) -> None:
    """Offset logs of a query's sources, and source `index`'s initial offsets."""
    (root / "offsets").mkdir()
    (root / "sources" / str(index)).mkdir(parents=True)
    (root / "sources" / str(index) / "0").write_text(f"\x00v1\n{json.dumps(initial)}")
    meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1})
    for batch, offsets in enumerate(batches):
        sources = "\n".join(json.dumps(o) for o in offsets)
        (root / "offsets" / str(batch)).write_text(f"v1\n{meta}\n{sources}\n")


def test_the_dead_letter_finds_the_input_by_its_own_subscription_in_the_plan() -> None:
    """late_plan names a Kafka relation's input by its option as Spark prints it."""

    def bound(url: str) -> Any:
        topic = KafkaTopic.parse(url)
        return SimpleNamespace(source=SimpleNamespace(topic=lambda b, o: topic), binding=None,
                               source_options=None, name=url)  # fmt: skip

    inputs = {n: bound(u) for n, u in
              [("one", f"{HOST}/a"), ("list", f"{HOST}/a,b"),
               ("pattern", f"{HOST}/?subscribePattern=e-.*")]}  # fmt: skip
    prepared: Any = SimpleNamespace(inputs=inputs)

    def found(options: str) -> Any:
        text = f"StreamingRelationV2 KafkaSourceProvider@1, kafka, [{options}]"
        match = _kafka_input_of(prepared, SimpleNamespace(text=text))  # type: ignore[arg-type]
        return match.name if match is not None else None

    assert found("kafka.bootstrap.servers=h:1, subscribe=a, startingOffsets=earliest") == (
        f"{HOST}/a"
    )
    assert found("kafka.bootstrap.servers=h:1, subscribe=a,b") == f"{HOST}/a,b"
    assert found("subscribePattern=e-.*, kafka.bootstrap.servers=h:1") == (
        f"{HOST}/?subscribePattern=e-.*"
    )
    assert found("subscribe=c") is None


OLD = {"a": {"0": 7, "1": 3}, "b": {"0": 4}, "events-x": {"0": 9}}


def test_from_checkpoint_starts_each_topic_where_old_stands(broker: None, tmp_path: Path) -> None:
    listed = KafkaTopic.parse(f"{HOST}/a,b")
    assert kafka_start(tmp_path, "actions", listed, OLD) == {"a": OLD["a"], "b": OLD["b"]}
    # assign: the partitions assigned; one OLD never read starts at its beginning
    assigned = KafkaTopic.parse(f'{HOST}/?assign={{"a":[1,2]}}')
    assert kafka_start(tmp_path, "actions", assigned, OLD) == {"a": {"1": 3, "2": -2}}
    # a pattern: every partition it matches on the broker now (Spark needs them all named)
    pattern = KafkaTopic.parse(f"{HOST}/?subscribePattern=events-.*")
    assert kafka_start(tmp_path, "actions", pattern, OLD) == {
        "events-x": {"0": 9},
        "events-y": {"0": -2, "1": -2, "2": -2},
    }


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"{HOST}/a,c", "never read Kafka c"),
        (f'{HOST}/?assign={{"c":[0]}}', "never read Kafka c"),
        (f"{HOST}/?subscribePattern=z.*", "never read Kafka a topic matching z.*"),
    ],
)
def test_from_checkpoint_refuses_topics_old_never_read(tmp_path: Path, url: str, says: str) -> None:
    with pytest.raises(CheckpointError) as err:
        kafka_start(tmp_path, "actions", KafkaTopic.parse(url), OLD)
    assert err.value.code == "FROM_CHECKPOINT_OTHER_INPUT"
    assert says in err.value.render()


@pytest.mark.parametrize(
    "url",
    [f"{HOST}/other,acts", f"{HOST}/?subscribePattern=ac.*", f'{HOST}/?assign={{"acts":[0]}}'],
)
def test_a_kafka_failure_names_the_topic_of_the_partition_spark_names(url: str) -> None:
    from slipstream.sources.kafka_faults import as_kafka_failure

    text = (
        "KafkaIllegalStateException: Some data may have been lost because they are not "
        "available in Kafka any more; Reason: Partition acts-0 offset was changed from 200 to 10."
    )
    reads = KafkaTopic.parse(url)
    others = KafkaTopic.parse(f"{HOST}/elsewhere")
    error = as_kafka_failure(RuntimeError(text), "mobile.counts", [others, reads])
    assert error is not None and error.code == "KAFKA_DATA_LOST"
    assert "topic acts at 127.0.0.1:9092" in error.message
    assert "failOnDataLoss=false" in error.fix and reads.describe().split("?")[0] in error.fix
