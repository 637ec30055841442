"""Kafka: a stream input bound to a topic, `--input [NAME=]kafka://HOST:PORT/TOPIC?OPTIONS`.

Spark's own Kafka source reads it (its connector is added to the session by
`session.build_session(kafka=True)`, see settings/kafka_connector.py). Each record's value is
the raw line (JSON, CSV or text, as the input's format says) that the same strict parser,
event-time guard, expectations and quarantine judge as a file's line; `_source` names where it
came from as `kafka:TOPIC:PARTITION:OFFSET`. A record without a value (a compacted topic's
tombstone), with an empty or a blank one, is quarantined (`null value`, `empty value`,
`blank value`), not skipped: each record read is valid, quarantined, late or a duplicate.
Kafka is replayable: a batch's offset range is in the checkpoint and is read again after a
failure.

Before Spark starts, `validate` asks the broker (with the Python client, confluent-kafka)
whether the topic exists: a missing topic is KAFKA_TOPIC_NOT_FOUND, a broker that does not
answer KAFKA_UNREACHABLE, both before any query starts. The older flags `--source kafka
--kafka-bootstrap HOST:PORT --kafka-topic TOPIC` still bind the one stream input."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.checkpoint.old import FLAG
from slipstream.checkpoint.start import InputStart
from slipstream.core import values
from slipstream.core.kafka_url import KafkaTopic
from slipstream.core.options import Option
from slipstream.errors import CheckpointError, ConfigError
from slipstream.ingest.records import EMPTY, SOURCE, empty_reason
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, spark_stream

if TYPE_CHECKING:
    from slipstream.checkpoint.old import OldPosition

#: how long the topic check waits for the broker
CHECK_TIMEOUT_S = 10.0


def bound_topic(binding: Binding, options: SourceOptions) -> KafkaTopic:
    """The input's topic: its kafka:// URL, else --kafka-bootstrap and --kafka-topic."""
    if binding.topic is not None:
        return binding.topic
    if not options["kafka_bootstrap"] or not options["kafka_topic"]:
        raise ConfigError(
            "CONFIG_MISSING",
            f"input {binding.name} reads Kafka, but no topic was given",
            f"pass {binding.flag} kafka://HOST:PORT/TOPIC (or --kafka-bootstrap HOST:PORT "
            "and --kafka-topic TOPIC)",
        )
    return KafkaTopic(str(options["kafka_bootstrap"]), str(options["kafka_topic"]))


def check_topic(topic: KafkaTopic, timeout_s: float | None = None) -> int:
    """The number of partitions `topic` reads (or its sink topic has); KAFKA_UNREACHABLE,
    KAFKA_TOPIC_NOT_FOUND, or CONFIG_BAD_VALUE for startingOffsets that do not name them."""
    found = partitions(topic, timeout_s)
    check_offsets(topic, found)
    return sum(len(parts) for parts in found.values())


def partitions(topic: KafkaTopic, timeout_s: float | None = None) -> dict[str, list[int]]:
    """The partitions `topic` reads now, by topic, as the broker says: every partition of the
    topics named (each must exist) or of those the pattern matches (none is no error: Spark
    reads a matching topic once it is created), or the partitions assigned (each must
    exist). KAFKA_UNREACHABLE or KAFKA_TOPIC_NOT_FOUND before any query starts."""
    timeout_s = CHECK_TIMEOUT_S if timeout_s is None else timeout_s
    try:  # an optional dependency: slipstream[kafka]
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        raise ConfigError(
            "SOURCE_NOT_AVAILABLE",
            "checking a Kafka input before start needs the Kafka client confluent-kafka",
            "pip install 'slipstream[kafka]' (or pip install confluent-kafka)",
        ) from None
    # log_level 0: the client's own lines ("Connect to ... failed") are not for the user;
    # the ConfigError says it once
    config: dict[str, str | int | float | bool] = {
        **client_settings(topic),
        "socket.timeout.ms": str(int(timeout_s * 1000)),
        "log_level": "0",
    }
    deadline = time.monotonic() + timeout_s
    try:
        admin = AdminClient(config)
        # every topic (a pattern), or the one named: listing one never creates it
        one = topic.topics[0] if len(topic.topics) == 1 else None
        while True:
            metadata = admin.list_topics(topic=one, timeout=timeout_s)
            # a topic created a moment ago can be listed without a leader yet: asked again,
            # within the check's own bound, rather than called missing
            settling = [
                name
                for name in topic.topics
                if (found := metadata.topics.get(name)) is not None
                and found.error is not None
                and found.error.code() == KafkaError.LEADER_NOT_AVAILABLE
            ]
            if not settling or time.monotonic() > deadline:
                break
    except KafkaException as exc:
        raise ConfigError(
            "KAFKA_UNREACHABLE",
            f"no Kafka broker answered at {topic.servers} within {timeout_s:.0f} s ({exc})",
            "start the broker (python -m slipstream.tools.kafka_broker start), or fix "
            "HOST:PORT and the kafka.* security options of the URL",
        ) from None
    there = {
        name: sorted(found.partitions)
        for name, found in metadata.topics.items()
        if found.error is None and found.partitions
    }
    known = sorted(t for t in there if not t.startswith("__"))
    for name in topic.topics:
        if name not in there and name in settling:
            raise ConfigError(
                "KAFKA_TOPIC_NOT_FOUND",
                f"topic {name!r} has no leader on the Kafka broker at {topic.servers} "
                f"after {timeout_s:.0f} s (LEADER_NOT_AVAILABLE)",
                "see that the broker holding its partitions is up (kafka-topics.sh "
                "--describe --topic NAME shows each partition's leader)",
            )
        if name not in there:
            raise ConfigError(
                "KAFKA_TOPIC_NOT_FOUND",
                f"topic {name!r} does not exist on the Kafka broker at {topic.servers}",
                "create it first (kafka-topics.sh --create --topic NAME), or fix the name"
                + (f"; topics there: {', '.join(known[:20])}" if known else ""),
            )
    assigned = topic.assigned
    if assigned is not None:
        for name, parts in assigned.items():
            absent = [p for p in parts if p not in there[name]]
            if absent:
                raise ConfigError(
                    "KAFKA_TOPIC_NOT_FOUND",
                    f"topic {name!r} at {topic.servers} has no partition "
                    f"{', '.join(map(str, absent))} (it has {len(there[name])}: "
                    f"{', '.join(map(str, there[name]))})",
                    "assign only partitions the topic has, or add partitions to it first",
                )
        return dict(assigned)
    # a pattern never matches Kafka's internal topics (Spark lists topics without them)
    return {n: parts for n, parts in there.items() if topic.reads(n) and not n.startswith("__")}


def check_offsets(topic: KafkaTopic, found: dict[str, list[int]]) -> None:
    """startingOffsets as JSON name every partition the input reads: Spark refuses any other
    at the query's start ("you must specify all TopicPartitions")."""
    value = topic.option_map.get("startingOffsets", "latest")
    if topic.role != "input" or value in ("earliest", "latest"):
        return
    named = {t: sorted(int(p) for p in parts) for t, parts in json.loads(value).items()}
    if named != found:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"startingOffsets={value} of {topic.describe()} names partitions "
            f"{_short(named)}, and the input reads {_short(found)} on the broker now",
            "name an offset for every partition it reads (-2 earliest, -1 latest), or "
            "startingOffsets=earliest|latest",
        )


def _short(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def client_settings(topic: KafkaTopic) -> dict[str, str]:
    """The URL's kafka.* settings that the Python client (librdkafka) also knows: the Java
    client's names are mostly the same (security.protocol, sasl.mechanism, ssl.*); those it
    does not know (sasl.jaas.config, ssl.truststore.*) are left to Spark."""
    from confluent_kafka import KafkaException  # check_topic has made sure it is installed
    from confluent_kafka.admin import AdminClient

    config = topic.client_config()
    for _ in range(len(config)):
        try:
            AdminClient({**config, "log_level": "0"})
            return config
        except KafkaException as exc:
            text = str(exc)
            unknown = [k for k in config if k != "bootstrap.servers" and f'"{k}"' in text]
            if not unknown:
                raise
            config = {k: v for k, v in config.items() if k not in unknown}
    return config


def kafka_start(
    old: Path, name: str, topic: KafkaTopic, offsets: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """Where Kafka input `name` starts: OLD's next offset of each partition it reads. Every
    topic it names (a list, assign's) OLD must have read; a pattern, at least one. Spark takes
    startingOffsets only naming every partition read: one OLD never read starts at its
    beginning (-2): an assigned partition, or (asked of the broker) a topic the pattern matches
    that OLD never read."""
    never = [t for t in topic.topics if t not in offsets]
    read = {t: dict(parts) for t, parts in offsets.items() if topic.reads(t)}
    if never or not read:
        what = ", ".join(never) if never else f"a topic matching {topic.pattern}"
        raise CheckpointError(
            "FROM_CHECKPOINT_OTHER_INPUT",
            f"input {name}: {old} never read Kafka {what} (it read "
            f"{', '.join(sorted(offsets)) or 'no topic'}); nothing was started",
            f"bind the topics OLD read, or drop {FLAG}",
        )
    now = topic.assigned
    if now is None and topic.pattern is not None:
        now = partitions(topic)
    if now is None:
        return read
    return {
        t: {str(p): read.get(t, {}).get(str(p), -2) for p in sorted(parts)}
        for t, parts in now.items()
    }


class KafkaSource(Source):
    kind = "kafka"
    continuous = True
    real_time = True
    binds_topics = True
    needs_kafka_connector = True
    options = (
        Option(
            "kafka_bootstrap",
            values.text,
            "Kafka bootstrap servers (kafka source; or --input kafka://HOST:PORT/TOPIC)",
            "host:port[,...]",
            metavar="SERVERS",
            env="SLIPSTREAM_KAFKA_BOOTSTRAP",
        ),
        Option(
            "kafka_topic",
            values.text,
            "Kafka topic to subscribe to (kafka source; or --input kafka://HOST:PORT/TOPIC)",
            "a topic name",
            metavar="TOPIC",
        ),
    )

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        check_topic(bound_topic(binding, options))

    def topic(self, binding: Binding, options: SourceOptions) -> KafkaTopic:
        return bound_topic(binding, options)

    def start_from_old(self, binding: Binding, old: OldPosition) -> InputStart | None:
        """The next offset OLD reached in each partition this input reads."""
        if binding.topic is None:
            return None
        offsets = kafka_start(old.old, binding.name, binding.topic, old.offsets)
        return InputStart(binding.name, self.kind, offsets=offsets)

    def real_time_slots(self, binding: Binding, options: SourceOptions) -> int:
        return check_topic(bound_topic(binding, options))

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        topic = bound_topic(binding, options)
        starting = topic.option_map.get("startingOffsets", "latest")
        return (
            f"kafka {reading(topic)} at {topic.servers} as {binding.format} "
            f"(a new checkpoint starts at {starting} offsets)"
        )

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        fmt = binding.format
        topic = bound_topic(binding, options)
        frame = raw_records(spark_stream(spark, "kafka", topic.spark_options()))
        return RawInput(frame, fmt if fmt in ("json", "csv", "text") else "json", True)


def reading(topic: KafkaTopic) -> str:
    """What an input reads, in words: `topic a`, `topics a, b`, `topics matching RE`,
    `partitions {"a":[0,1]}`."""
    if topic.pattern is not None:
        return f"topics matching {topic.pattern}"
    if topic.assigned is not None:
        return f"partitions {_short(topic.assigned)}"
    names = topic.topics
    return f"topic{'s' if len(names) > 1 else ''} {', '.join(names)}"


def raw_records(frame: DataFrame) -> DataFrame:
    """Spark's Kafka records (a stream, or a batch read of offset ranges: the dead-letter) as
    raw lines: the value as text, and where it came from, `kafka:TOPIC:PARTITION:OFFSET`.
    Every Kafka record is a record: a NULL value (a tombstone), an empty or a blank one is
    quarantined with its own reason (EMPTY), never skipped as a file's blank line is."""
    where = F.concat_ws(":", F.lit("kafka"), F.col("topic"), F.col("partition"), F.col("offset"))
    value = F.col("value").cast("string")
    return frame.select(value.alias("value"), where.alias(SOURCE), empty_reason(value).alias(EMPTY))
