"""Generated lines into a Kafka topic instead of files (`slipstream generate trending --to
kafka://HOST:PORT/TOPIC`): each would-be file is one burst of records, in order, acknowledged
before the next (so a live pace holds and an interrupted run has sent whole files). Records
have no key: the producer spreads them over the topic's partitions. Needs confluent-kafka
(`pip install 'slipstream[kafka]'`); the topic must exist (checked first)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from slipstream.core.kafka_url import KafkaTopic
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.sources.kafka import check_topic, client_settings

#: records between two flushes inside one file (bounds the producer's queue)
FLUSH_EVERY = 50_000


class TopicWriter:
    """`write(name, lines)` for `generators.trending.generate`: each line one record."""

    def __init__(self, topic: KafkaTopic) -> None:

        try:
            from confluent_kafka import Producer
        except ImportError:
            raise ConfigError(
                "SOURCE_NOT_AVAILABLE",
                "writing generated events to Kafka needs the Kafka client confluent-kafka",
                "pip install 'slipstream[kafka]' (or pip install confluent-kafka)",
            ) from None
        check_topic(topic)
        self.topic = topic
        self.sent = 0
        self._failed: list[str] = []
        config: dict[str, Any] = {
            **client_settings(topic),
            "linger.ms": 5,
            "acks": "all",
            "enable.idempotence": True,  # a retried send is not written twice
            "log_level": 0,  # failures are raised, as one error
        }
        self._producer = Producer(config)

    def _delivered(self, err: object, _message: object) -> None:
        if err is not None:
            self._failed.append(str(err))

    def __call__(self, name: str, lines: list[str]) -> None:
        for index, line in enumerate(lines, start=1):
            while True:
                try:
                    self._producer.produce(
                        self.topic.topic, value=line.encode(), on_delivery=self._delivered
                    )
                    break
                except BufferError:  # the local queue is full: let it drain
                    self._producer.poll(0.5)
            if index % FLUSH_EVERY == 0:
                self._producer.flush(60)
        left = self._producer.flush(60)
        if left or self._failed:
            raise ConfigError(
                "KAFKA_UNREACHABLE",
                f"{count(left, 'record')} of {name} were not acknowledged by {self.topic.servers}"
                + (f": {self._failed[0]}" if self._failed else ""),
                "check that the broker is running and the topic is writable",
            )
        self.sent += len(lines)


def topic_writer(url: str, flag: str = "--to") -> TopicWriter:
    """A writer for `url` (kafka://HOST:PORT/TOPIC), the flag named in a bad value's error."""
    try:
        topic = KafkaTopic.parse(url, "sink")
    except ValueError as exc:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag} has value {url!r}; allowed: {exc}",
            f"give {flag} kafka://HOST:PORT/TOPIC",
        ) from None
    return TopicWriter(topic)


def feed_topic(
    url: str, file: Path | None, out: TextIO | None = None, stdin: TextIO | None = None
) -> int:
    """`slipstream feed [FILE] --to kafka://...`: the lines of FILE (or of standard input, each
    sent as it is typed) into a topic, the way `feed` serves them to the socket source."""
    out, stdin = out or sys.stderr, stdin or sys.stdin
    writer = topic_writer(url)
    shown = writer.topic.describe()
    try:
        if file is not None:
            lines = Path(file).read_text(encoding="utf-8").splitlines()
            writer(str(file), lines)
            print(f"feed: sent {writer.sent:,} lines from {file} to {shown}", file=out, flush=True)
        else:
            print(f"feed: type lines for {shown}; Ctrl-D or Ctrl-C to stop", file=out, flush=True)
            for line in stdin:
                writer("standard input", [line.rstrip("\n")])
    except KeyboardInterrupt:
        pass
    return 0


def add_destination(parser: argparse.ArgumentParser, note: str = "") -> None:
    """`--out DIR` or `--to kafka://HOST:PORT/TOPIC`, one of them required: where a generator
    writes its lines (`note`: what more the topic's help says)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, metavar="DIR", help="landing dir")
    where.add_argument(
        "--to",
        metavar="kafka://HOST:PORT/TOPIC",
        help=f"send the lines to a Kafka topic instead of files (it must exist{note})",
    )
