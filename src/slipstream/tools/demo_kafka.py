"""`slipstream demo --source kafka`: the trending demo with a local Kafka broker between the
generator and the pipeline (demo_trending.py runs it; this module only brings the broker).

The broker (slipstream.tools.kafka_broker: Kafka 4.1.1, KRaft, 127.0.0.1, a free port) keeps
its data in `STATE/kafka`, emptied at each start like the demo's other state, and stops with
the demo. The generator sends to topic `trending-events` (2 partitions) with `generate --to`;
the pipeline reads it from the earliest offset."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TextIO

from slipstream.errors import ConfigError
from slipstream.tools.kafka_broker import BrokerError, KafkaBroker

#: how the demo's generated events reach the pipeline: landing files, or this broker's topic
TRANSPORTS = ("files", "kafka")
TOPIC = "trending-events"
PARTITIONS = 2


def start_broker(state_dir: Path, out: TextIO) -> tuple[KafkaBroker, str, str]:
    """A started broker with the demo's topic, the topic's kafka:// URL for `--input` (from
    the earliest offset) and for the generator's `--to`."""

    base = Path(state_dir) / "kafka"
    shutil.rmtree(base, ignore_errors=True)
    began = time.monotonic()
    try:
        broker = KafkaBroker(base=base)
        broker.start()
    except BrokerError as exc:
        raise ConfigError(
            "SOURCE_NOT_AVAILABLE",
            f"the demo's Kafka broker could not start: {exc}",
            "install Java 17 and Maven (make services does), or run the demo on files: "
            "slipstream demo",
        ) from None
    try:
        broker.create_topic(TOPIC, PARTITIONS)
    except Exception:
        broker.destroy()
        raise
    print(
        f"kafka: broker {broker.version} on {broker.bootstrap} (started in "
        f"{time.monotonic() - began:.1f} s; data in {base}), topic {TOPIC}",
        file=out,
        flush=True,
    )
    return broker, broker.url(TOPIC, startingOffsets="earliest"), broker.url(TOPIC)
