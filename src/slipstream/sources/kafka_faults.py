"""A Kafka input's failures at run time, as codes a person can act on.

Spark's Kafka source fails a query with a long Java stack (or, inside a database sink's
`foreachBatch`, a Python traceback around it). What it says, as seen on a real broker
(tests/e2e/kafka/test_kafka_faults.py):

- records the checkpoint had not read are gone (the topic deleted and re-created, records
  deleted, or aged out by retention), under `failOnDataLoss=true` (Spark's default):
  `KafkaIllegalStateException: Some data may have been lost because they are not available in
  Kafka any more; ... Reason: Partition acts-0 offset was changed from 200 to 10.` (planning) or
  `Reason: Could not read records in offset [200, 400) for topic partition acts-0` (reading):
  KAFKA_DATA_LOST, and the fix is the URL's `failOnDataLoss=false`;
- the topic deleted while the query reads it:
  `UnknownTopicOrPartitionException: This server does not host this topic-partition.`:
  KAFKA_TOPIC_NOT_FOUND;
- the broker gone for longer than the client's timeouts (`kafka.default.api.timeout.ms`,
  `kafkaConsumer.pollTimeoutMs`): `TimeoutException: Timed out waiting for a node assignment.
  Call: listNodes` (the driver) or `Timeout of 5000ms expired before the position for partition
  acts-0 could be determined` (a task): KAFKA_UNREACHABLE. Within those timeouts Spark waits:
  a broker restarted in time is read on as if nothing happened."""

from __future__ import annotations

import re
from collections.abc import Iterable

from slipstream.core.kafka_url import KafkaTopic
from slipstream.errors import SlipstreamError, said

_DATA_LOST = "Some data may have been lost because they are not available in Kafka"
_REASON = re.compile(r"Reason: (.+)")
#: the partition Spark names: "Partition acts-0 offset ..." or "topic partition acts-0"
_PARTITION = re.compile(r"[Pp]artition ([A-Za-z0-9._-]+)-(\d+)")
_UNKNOWN_TOPIC = "UnknownTopicOrPartitionException"
_TIMEOUT = re.compile(r"org\.apache\.kafka\.common\.errors\.TimeoutException: (.+)")


def _topic_named(text: str, topics: list[KafkaTopic]) -> tuple[KafkaTopic | None, str]:
    """The input that reads the topic Spark's text names (a partition `TOPIC-N`; an input may
    read several: a list, a pattern, partitions), else the one input; and the topic's name
    (else what the input reads)."""
    for match in _PARTITION.finditer(text):
        found = next((t for t in topics if t.reads(match.group(1))), None)
        if found is not None:
            return found, match.group(1)
    one = topics[0] if len(topics) == 1 else None
    return one, (_what(one) if one is not None else "")


def _what(topic: KafkaTopic) -> str:
    if topic.pattern is not None:
        return f"a topic matching {topic.pattern}"
    return ", ".join(topic.topics)


def _with_option(topic: KafkaTopic, name: str, value: str) -> str:
    options = dict(topic.options)
    options[name] = value
    return KafkaTopic(topic.servers, topic.topic, tuple(options.items()), topic.role).describe()


def as_kafka_failure(
    error: BaseException, query: str, topics: Iterable[KafkaTopic]
) -> SlipstreamError | None:
    """KAFKA_DATA_LOST, KAFKA_TOPIC_NOT_FOUND or KAFKA_UNREACHABLE for a query of a run with
    Kafka inputs `topics` that failed with `error`; None when the failure is not Kafka's."""
    topics = [t for t in topics if t.role == "input"]
    if not topics:
        return None
    # the message, and the JVM's trace with its causes (PySpark keeps it beside the message):
    # inside a foreachBatch the cause may be only there
    text = f"{error}\n{getattr(error, '_stackTrace', '') or ''}"
    topic, named = _topic_named(text, topics)
    name = f"topic {named} at {topic.servers}" if topic else "a Kafka topic"
    if _DATA_LOST in text:
        at = text.find(_DATA_LOST)
        reason = _REASON.search(text, at)  # Spark's own: a foreachBatch error has a "Reason:" too
        spark_says = reason.group(1).strip().rstrip(".") if reason else said(text, at)
        url = _with_option(topic, "failOnDataLoss", "false") if topic else "?failOnDataLoss=false"
        return SlipstreamError(
            "KAFKA_DATA_LOST",
            f"{query} stopped: records of {name} that its checkpoint had not read yet are gone "
            f"from the broker (Spark: {spark_says}); the topic was deleted and re-created, or "
            "records were deleted or aged out by retention before the query read them",
            f"to go on without them, run the same command with failOnDataLoss=false in the "
            f"input's URL ({url}): the query skips what is gone and reads on from the earliest "
            "record still there, so the outputs lack the lost records; to start over from the "
            "topic as it is now, `slipstream reset PIPELINE --outputs`, then run",
        )
    if _UNKNOWN_TOPIC in text:
        return SlipstreamError(
            "KAFKA_TOPIC_NOT_FOUND",
            f"{query} stopped: {name} was deleted while the run read it",
            "create the topic again; the records it held are gone, so the next run stops "
            "with KAFKA_DATA_LOST unless the input's URL has failOnDataLoss=false",
        )
    timeout = _TIMEOUT.search(text)
    if timeout is not None:
        servers = topic.servers if topic else ", ".join(sorted({t.servers for t in topics}))
        return SlipstreamError(
            "KAFKA_UNREACHABLE",
            f"{query} stopped: the Kafka broker at {servers} stopped answering while the run "
            f"read {name} (Spark: {timeout.group(1).strip()})",
            "start the broker again and run the same command: it resumes from the checkpoint's "
            "last committed batch, nothing lost or counted twice; to wait longer for a broker, "
            "raise kafka.default.api.timeout.ms and kafkaConsumer.pollTimeoutMs in the URL",
        )
    return None
