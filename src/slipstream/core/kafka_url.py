"""`kafka://HOST:PORT[,HOST:PORT...]/TOPIC?OPTION=VALUE&...`: a Kafka topic as an input or a sink.

An input reads what Spark's Kafka source can subscribe to, exactly one of: topics named in the
path (`/TOPIC` or a comma list `/a,b`, Spark's `subscribe`), a pattern with an empty path
(`/?subscribePattern=events-.*`), or partitions with an empty path (`/?assign={"a":[0,1]}`).
A sink writes one topic.

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

from slipstream.core.url_options import true_or_false, whole_above_zero

SCHEME = "kafka://"
USAGE = "kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...][?OPTION=VALUE&...]"
#: an input's ways to subscribe (Spark's option names): exactly one
SUBSCRIPTIONS = ("subscribe", "subscribePattern", "assign")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$")

Role = Literal["input", "sink"]


_positive_long = whole_above_zero(2**63)
_boolean = true_or_false


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


def _pattern(value: str) -> str:
    """A regular expression over topic names (Spark's `subscribePattern`, a Java pattern; checked
    here with Python's, which reads the usual ones the same way)."""
    if not value.strip():
        raise ValueError("a regular expression over topic names, such as events-.*")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"a regular expression over topic names ({exc})") from None
    return value


def _assign(value: str) -> str:
    """Partitions by topic as Spark's JSON: {"a":[0,1],"b":[2]}."""
    allowed = 'JSON such as {"TOPIC":[0,1]} (partitions by topic)'
    try:
        parsed = json.loads(value)
    except ValueError:
        raise ValueError(allowed) from None
    ok = (
        isinstance(parsed, dict)
        and bool(parsed)
        and all(
            isinstance(t, str)
            and _TOPIC.match(t)
            and isinstance(parts, list)
            and parts
            and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
            for t, parts in parsed.items()
        )
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
    "subscribe": _text,  # normalised into the path: /a,b
    "subscribePattern": _pattern,
    "assign": _assign,
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
    """What a Kafka input reads (topics, a pattern or partitions) or the topic a sink writes,
    on one cluster, and Spark's options for it."""

    servers: str  # host:port[,host:port]
    topic: str  # the path: a topic, a comma list of topics (an input), or "" (pattern, assign)
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
        given = dict(options)
        if "subscribe" in given:  # ?subscribe=a,b is the path /a,b
            if topic:
                raise ValueError(
                    f"{USAGE}: the topics once, in the path (/{topic}) or as "
                    f"subscribe={given['subscribe']}, not both"
                )
            topic = given["subscribe"]
            options = [(k, v) for k, v in options if k != "subscribe"]
        topic = _topic_path(topic, role, [k for k, _ in options if k in SUBSCRIPTIONS])
        found = cls(servers, topic, tuple(options), role)
        found.check_starting_offsets()
        return found

    @property
    def subscription(self) -> str:
        """How an input subscribes: subscribe, subscribePattern or assign."""
        return next((k for k in SUBSCRIPTIONS[1:] if k in self.option_map), "subscribe")

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics named: the path's (subscribe, a sink) or assign's; none for a pattern."""
        assigned = self.assigned
        if assigned is not None:
            return tuple(assigned)
        return tuple(t for t in self.topic.split(",") if t)

    @property
    def pattern(self) -> str | None:
        return self.option_map.get("subscribePattern")

    @property
    def assigned(self) -> dict[str, list[int]] | None:
        """assign's partitions by topic, or None."""
        value = self.option_map.get("assign")
        if value is None:
            return None
        return {t: sorted(set(parts)) for t, parts in json.loads(value).items()}

    def reads(self, name: str) -> bool:
        """Whether this input reads topic `name` (a pattern: the whole name matches)."""
        pattern = self.pattern
        if pattern is not None:
            return re.fullmatch(pattern, name) is not None
        return name in self.topics

    def check_starting_offsets(self) -> None:
        """startingOffsets as JSON names the topics read, and under assign the partitions
        assigned: Spark refuses at start any other (it must name every partition it reads;
        the partitions of subscribed topics are checked with the broker, sources/kafka.py)."""
        value = self.option_map.get("startingOffsets", "latest")
        if value in ("earliest", "latest"):
            return
        named = {t: sorted(int(p) for p in parts) for t, parts in json.loads(value).items()}
        stray = sorted(t for t in named if not self.reads(t))
        missing = sorted(set(self.topics) - set(named))
        assigned = self.assigned
        wrong = assigned is not None and not stray and not missing and named != assigned
        if stray or missing or wrong:
            what = (
                f"it names {', '.join(stray)}, which this input does not read"
                if stray
                else f"it leaves out {', '.join(missing)}"
                if missing
                else f"its partitions {_short(named)} are not the assigned {_short(assigned)}"
            )
            raise ValueError(
                f"startingOffsets={value}: {what}; Spark needs an offset for every partition "
                "the input reads (-2 earliest, -1 latest), or startingOffsets=earliest|latest"
            )

    @property
    def option_map(self) -> dict[str, str]:
        return dict(self.options)

    def spark_options(self) -> dict[str, str]:
        """The options of Spark's Kafka source (input) or sink."""
        key = "subscribe" if self.role == "input" else "topic"
        named = {key: self.topic} if self.topic else {}
        return {"kafka.bootstrap.servers": self.servers, **named, **self.option_map}

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


_SAFE = '{}:,"[]*^$()|'


def _short(offsets: object) -> str:
    return json.dumps(offsets, separators=(",", ":"))


def _topic_path(path: str, role: Role, subscriptions: list[str]) -> str:
    """The path's topics, checked: one for a sink; for an input a topic or a comma list, or
    empty beside subscribePattern or assign (exactly one way to subscribe)."""
    given = ["a topic path" if path else "", *subscriptions]
    given = [g for g in given if g]
    if role == "sink" and subscriptions:
        raise ValueError(f"a Kafka sink writes the one topic of its path, not {subscriptions[0]}")
    if len(given) != 1:
        raise ValueError(
            f"{USAGE}: an input reads exactly one of: topics in the path (/a or /a,b), "
            '?subscribePattern=REGEX or ?assign={"TOPIC":[0,1]} with an empty path; '
            + (f"got {' and '.join(given)}" if given else "got none")
        )
    if not path:
        return path
    names = [t.strip() for t in path.split(",")]
    if role == "sink" and len(names) > 1:
        raise ValueError(f"{USAGE}: a Kafka sink writes one topic, not {path!r}")
    for name in names:
        if not _TOPIC.match(name):
            raise ValueError(
                f"{USAGE}: the topic {name!r} is not a Kafka topic name "
                "(1-249 of letters, digits, '.', '_', '-')"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"{USAGE}: a topic named twice in {path!r}")
    return ",".join(names)


def _shown(name: str, value: str) -> str:
    return "***" if _SECRET.search(name) else value


def is_kafka_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(SCHEME)
