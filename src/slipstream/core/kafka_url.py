"""`kafka://HOST:PORT[,HOST:PORT...]/TOPIC?OPTION=VALUE&...`: a Kafka topic as an input or a sink.

A frozen, self-validating description, parsed once at the edge (`--input`, `--sink`, TOML);
`sources/kafka.py` and `sinks/kafka.py` turn it into Spark's options. The options are Spark's
own names (docs: structured-streaming-kafka-integration): a name Spark's Kafka source or sink
does not take is refused with the list of those it takes, and the values Spark would only
check at the first batch are checked here. `kafka.*` settings (security, timeouts) pass to the
Kafka client as they are, except those Spark itself refuses. Nothing here imports Spark."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

SCHEME = "kafka://"
USAGE = "kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?OPTION=VALUE&...]"
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$")

Role = Literal["input", "sink"]


def _positive_long(value: str) -> str:
    if not value.isdigit() or not 0 < int(value) < 2**63:
        raise ValueError("a whole number above 0")
    return value


def _boolean(value: str) -> str:
    if value.lower() not in ("true", "false"):
        raise ValueError("true or false")
    return value.lower()


def _offsets(value: str) -> str:
    """earliest, latest, or per partition as Spark's JSON: {"topic":{"0":23,"1":-2}}
    (-2 earliest, -1 latest)."""
    if value in ("earliest", "latest"):
        return value
    allowed = 'earliest, latest or JSON such as {"TOPIC":{"0":23,"1":-2}} (-2 earliest, -1 latest)'
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ValueError(allowed) from None
    ok = isinstance(parsed, dict) and all(
        isinstance(parts, dict)
        and all(p.isdigit() and isinstance(o, int) and o >= -2 for p, o in parts.items())
        for parts in parsed.values()
    )
    if not ok:
        raise ValueError(allowed)
    return value


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("a non-empty text")
    return value


#: Spark's time strings for Kafka's options (`JavaUtils.timeStringAsMs`): a whole number with
#: a unit (us, ms, s, m, min, h, d); no unit means milliseconds
_SPARK_TIME = re.compile(r"^\s*\d+\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)


def _duration(value: str) -> str:
    if not _SPARK_TIME.match(value):
        raise ValueError("a time such as 500ms, 30s, 5m or 1h")
    return value


#: Spark's Kafka source options a URL may carry, with their value checks
SOURCE_OPTIONS = {
    "startingOffsets": _offsets,
    "startingTimestamp": _positive_long,
    "maxOffsetsPerTrigger": _positive_long,
    "minOffsetsPerTrigger": _positive_long,
    "maxTriggerDelay": _duration,
    "failOnDataLoss": _boolean,
    "minPartitions": _positive_long,
    "groupIdPrefix": _text,
    "includeHeaders": _boolean,
    "kafkaConsumer.pollTimeoutMs": _positive_long,
    "fetchOffset.numRetries": _positive_long,
    "fetchOffset.retryIntervalMs": _positive_long,
}
SINK_OPTIONS: dict[str, object] = {}
#: Kafka client settings Spark sets itself and refuses (IllegalArgumentException at start)
REFUSED_CLIENT = {
    "input": ("kafka.auto.offset.reset", "kafka.key.deserializer", "kafka.value.deserializer",
              "kafka.enable.auto.commit", "kafka.interceptor.classes"),
    "sink": ("kafka.key.serializer", "kafka.value.serializer", "kafka.interceptor.classes"),
}  # fmt: skip
#: options whose value is a secret: never shown
_SECRET = re.compile(r"(?i)password|secret|jaas|token|key$")


@dataclass(frozen=True)
class KafkaTopic:
    """One topic on a Kafka cluster and Spark's options for reading or writing it."""

    servers: str  # host:port[,host:port]
    topic: str
    options: tuple[tuple[str, str], ...] = ()
    role: Role = "input"

    @classmethod
    def parse(cls, text: str, role: Role = "input") -> KafkaTopic:
        raw = str(text).strip()
        if not raw.lower().startswith(SCHEME):
            raise ValueError(USAGE)
        parts = urlsplit(raw)
        servers = parts.netloc
        if not servers or "@" in servers:
            raise ValueError(f"{USAGE} (security settings go in kafka.* options)")
        for server in servers.split(","):
            host, sep, port = server.rpartition(":")
            if not sep or not _HOST.match(host) or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{USAGE}: {server!r} is not HOST:PORT")
        topic = parts.path.strip("/")
        if not _TOPIC.match(topic):
            raise ValueError(
                f"{USAGE}: the topic {topic!r} is not a Kafka topic name "
                "(1-249 of letters, digits, '.', '_', '-')"
            )
        options = []
        allowed = SOURCE_OPTIONS if role == "input" else SINK_OPTIONS
        for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
            if name.startswith("kafka."):
                if name in REFUSED_CLIENT[role] or name == "kafka.bootstrap.servers":
                    raise ValueError(
                        f"a {role} without {name} (Spark sets it itself; the servers come from "
                        "the URL's HOST:PORT)"
                    )
                check = _text
            elif name in allowed:
                check = allowed[name]  # type: ignore[assignment]
            else:
                names = ", ".join([*allowed, "kafka.* (client settings)"])
                raise ValueError(f"a Kafka {role} option; {name!r} is not one. Options: {names}")
            try:
                options.append((name, check(value)))
            except ValueError as exc:
                raise ValueError(f"{name}={_shown(name, value)}: allowed is {exc}") from None
        return cls(servers, topic, tuple(options), role)

    @property
    def option_map(self) -> dict[str, str]:
        return dict(self.options)

    def spark_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source (input) or sink."""
        key = "subscribe" if self.role == "input" else "topic"
        return {"kafka.bootstrap.servers": self.servers, key: self.topic, **self.option_map}

    def client_config(self) -> dict[str, str]:
        """The `kafka.*` options as a Kafka client's settings (for the topic check)."""
        return {
            "bootstrap.servers": self.servers,
            **{k[len("kafka.") :]: v for k, v in self.options if k.startswith("kafka.")},
        }

    def describe(self) -> str:
        """Shown by `check` and in messages: secrets hidden."""
        shown = {k: _shown(k, v) for k, v in self.options}
        query = f"?{urlencode(shown, safe=_SAFE)}" if shown else ""
        return f"{SCHEME}{self.servers}/{self.topic}{query}"

    def __str__(self) -> str:
        return self.describe()


_SAFE = '{}:,"'


def _shown(name: str, value: str) -> str:
    return "***" if _SECRET.search(name) else value


def is_kafka_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(SCHEME)
