"""17b. Latency from a Kafka topic: a record produced -> its count visible in SQLite (or
PostgreSQL: `--set sink=postgresql`), `mobile` in Spark's real-time mode against micro-batches
(issue 27 item 8). `--set variants=real-time` runs the real-time variant only, `--set
epoch=60s` gives it longer epochs (default 5s).

One broker (slipstream.tools.kafka_broker), a one-partition topic, and per variant a
`slipstream run mobile --input kafka://... --sink sqlite:DB` of its own (`local[3]`, one
shuffle partition: the real-time query holds two slots, its quarantine needs a third). After a
warm-up record is visible, a producer sends `rate` actions a second for `seconds` seconds, each
with `ts` = now (so every record lands in the open 10-minute window) and one of four actions,
and notes when it handed each record to the client. It hands over the records that are due
every `tick_ms` (default 1) with `linger.ms` = `linger_ms` (default 1), as a producer at these
rates batches; `--set tick_ms=0 --set linger_ms=0` sends one record per request, which at
10,000 events/s costs the broker 0.6-1.0 of a core and the producer about 0.6 (0.11-0.12 and
0.17 in ticks: `python -m bench.producercost`, docs/benchmarks.md section 55). The main thread
reads the table every `poll_ms`: when the count of (window, action) reaches c, the first c
records of that key sent are visible, and each one's latency is the read's time minus its send
time (a record's latency includes up to one poll interval). p50/p95/p99 over the records sent
after the first `warmup_s` seconds of production (the JVM's JIT warms up on those: a
measurement from the first record measures the warm-up, issue 39).

PostgreSQL is a throwaway server of the test suite's (tests/services.py), which runs as users
run it (fsync, synchronous_commit and full_page_writes at their defaults), its password given
in PGPASSWORD; the table is read with psycopg on one connection.

`--set floor=kafka` adds, beside the database variants, the same real-time query into Spark's
own Kafka sink (`--sink kafka://...`): the engine's floor, its records read back by a consumer
that keeps each key's latest count (the topic's records are the table's upserts)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core import Context, Result
from bench.procs import Proc, slipstream_command
from bench.stage import param_args

NAME = "realtime"
TITLE = "Kafka -> database latency, mobile: real-time mode vs micro-batches"
ACTIONS = ("open", "close", "crash", "swipe")
#: Maven Central here serves Spark's Kafka connector up to 4.2.0 (README, Kafka)
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
TRIGGERS = {"real-time (5s epochs)": "real-time:5s", "micro-batches (default trigger)": "default"}


COUNTS = "SELECT window_start, action, count FROM mobile_action_counts"


def counts(db: Path) -> dict[tuple[str, str], int]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return {(w, a): int(c) for w, a, c in conn.execute(COUNTS)}
    except sqlite3.Error:  # not yet created
        return {}


class KafkaCounts:
    """The counts in an output topic of Spark's Kafka sink: each record is a row's newest
    value (key = the output's key as JSON, value = the row as JSON); a read consumes whatever
    arrived since the last and returns each key's latest count."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "log_level": 3}
        )
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.latest: dict[tuple[str, str], int] = {}

    def __call__(self) -> dict[tuple[str, str], int]:
        for message in self.consumer.consume(10_000, timeout=0.001):
            if message.error() or message.value() is None:
                continue
            row = json.loads(message.value())
            key = (iso(datetime.fromisoformat(row["window_start"])), row["action"])
            self.latest[key] = int(row["count"])
        return dict(self.latest)

    def close(self) -> None:
        self.consumer.close()


class PgCounts:
    """The counts in PostgreSQL, read on one autocommit connection (each read sees every row
    committed before it)."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)

    def __call__(self) -> dict[tuple[str, str], int]:
        import psycopg

        try:
            rows = self.conn.execute(COUNTS).fetchall()
        except psycopg.errors.UndefinedTable:
            return {}
        return {(iso(w), a): int(c) for w, a, c in rows}

    def close(self) -> None:
        self.conn.close()


def iso(moment: str | datetime) -> str:
    """A window's start as the SQLite sink stores it (the real-time writers store that text in
    PostgreSQL too)."""
    if isinstance(moment, str):
        return moment
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def window_of(moment: datetime) -> str:
    start = moment.replace(minute=moment.minute - moment.minute % 10, second=0, microsecond=0)
    return start.strftime("%Y-%m-%dT%H:%M:%SZ")


def record(action: str, moment: datetime, index: int) -> str:
    ts = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"id": f"phone{index % 50}", "action": action, "ts": ts})


def measure(
    ctx: Context,
    broker: Any,
    variant: str,
    trigger: str,
    pg: Any = None,
    to_kafka: bool = False,
    rate: int | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """`extra`: more flags for `slipstream run`."""
    topic = broker.create_topic(f"actions-{int(time.time() * 1000)}", 1)
    work = ctx.scratch(NAME) / topic
    db = work / "out.db"
    env = {"SLIPSTREAM_KAFKA_CONNECTOR": os.environ.get("SLIPSTREAM_KAFKA_CONNECTOR", CONNECTOR)}
    if to_kafka:
        out = broker.create_topic(f"{topic}-counts", 1)
        sink = broker.url(out)
        read: Any = KafkaCounts(broker.bootstrap, out)
    elif pg is None:
        sink = f"sqlite:{db}"
        read = lambda: counts(db)  # noqa: E731
    else:
        from tests.services import APP_PASSWORD

        database = pg.create_database(topic.replace("-", "_"))
        sink = pg.url(database, password=False)
        env["PGPASSWORD"] = APP_PASSWORD
        read = PgCounts(f"{pg.admin_dsn(database)}")
    argv = slipstream_command(
        *("run", "mobile", "--input", broker.url(topic, startingOffsets="earliest")),
        *("--trigger", trigger, "--mode", "update", "--sink", sink),
        *("--master", "local[3]", "--conf", "spark.sql.shuffle.partitions=1"),
        *("--state-dir", work / "state"),
        *param_args(ctx),
        *extra,
    )
    proc = Proc(argv, work / "run.log", env)
    try:
        seen = observe(ctx, broker, topic, read, proc, rate)
    finally:
        proc.stop()
        if hasattr(read, "close"):
            read.close()
    return {"variant": variant, **summary(seen)}


@dataclass
class Observed:
    """One run's records: for each record sent after the warm-up, when it was sent and its
    latency (monotonic seconds); the table's counts at the end and what they should be."""

    samples: list[tuple[float, float]]
    events: int
    sent_per_s: float
    final: dict[tuple[str, str], int]
    expected: dict[tuple[str, str], int]


def observe(
    ctx: Context, broker: Any, topic: str, read: Any, proc: Any, rate: int | None = None
) -> Observed:
    """Send a warm-up record and wait for its row; then `rate` actions a second for warmup_s +
    seconds, reading the counts every poll_ms until every record is visible (or `drain_s`
    after the last was sent); the final read judged against the records sent."""
    from confluent_kafka import Producer

    rate = rate or int(ctx.param("rate", 1000, 1000))
    seconds = float(ctx.param("seconds", 20, 60))
    warmup = int(rate * float(ctx.param("warmup_s", 10, 30)))
    poll_s = float(ctx.param("poll_ms", 5, 5)) / 1000
    tick_s = float(ctx.param("tick_ms", 1, 1)) / 1000
    linger_ms = int(ctx.param("linger_ms", 1, 1))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": linger_ms, "acks": 1})
    warm = datetime.now(UTC)
    producer.produce(topic, record("warmup", warm, 0).encode())
    producer.flush(30)
    deadline = time.monotonic() + float(ctx.param("startup_timeout", 300, 300))
    while not read():
        if not proc.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: no row after the warm-up\n{proc.tail()}")
        time.sleep(0.05)
    base = read()
    sent: dict[tuple[str, str], list[tuple[float, bool]]] = defaultdict(list)
    lock = threading.Lock()
    total = warmup + int(rate * seconds)
    span: list[float] = []

    def produce() -> None:
        """Each record noted as sent just before it is handed to the client."""
        began = time.monotonic()
        for due in paced(total, rate, tick_s):
            now = datetime.now(UTC)
            window = window_of(now)
            batch = [(n, ACTIONS[n % len(ACTIONS)]) for n in due]
            with lock:
                moment = time.monotonic()
                for n, action in batch:
                    sent[(window, action)].append((moment, n >= warmup))
            for n, action in batch:
                producer.produce(topic, record(action, now, n).encode())
            producer.poll(0)
        span.extend((began, time.monotonic()))
        producer.flush(30)

    sender = threading.Thread(target=produce, name="bench-realtime-producer")
    sender.start()
    samples: list[tuple[float, float]] = []
    seen: dict[tuple[str, str], int] = defaultdict(int)
    deadline = time.monotonic() + total / rate + float(ctx.param("drain_s", 60, 60))
    now_counts: dict[tuple[str, str], int] = dict(base)
    while sum(seen.values()) < total and time.monotonic() < deadline and proc.alive():
        now_counts, at = read(), time.monotonic()
        with lock:
            for key, count in now_counts.items():
                visible = min(count - base.get(key, 0), len(sent.get(key, ())))
                for i in range(seen[key], visible):
                    moment, measured = sent[key][i]
                    if measured:
                        samples.append((moment, at - moment))
                seen[key] = max(seen[key], visible)
        time.sleep(poll_s)
    sender.join()
    expected = dict(base)
    for key, records in sent.items():
        expected[key] = expected.get(key, 0) + len(records)
    return Observed(
        samples=samples,
        events=total - warmup,
        sent_per_s=total / (span[1] - span[0]) if len(span) == 2 else float("nan"),
        final=read(),
        expected=expected,
    )


def paced(
    total: int,
    rate: float,
    tick_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[range]:
    """The indices of `total` records at `rate` a second, in the batches to send: every
    `tick_s` (at least), the records whose time (start + index / rate) has come; with `tick_s`
    0, one record at a time, each at its time. None is due before its time."""
    began = clock()
    i = 0
    while i < total:
        due = i + 1 if tick_s == 0 else min(total, max(i + 1, int((clock() - began) * rate) + 1))
        yield range(i, due)
        i = due
        wait = began + i / rate - clock()
        if wait > 0 and i < total:
            sleep(max(wait, tick_s))


def producer_params(ctx: Context) -> str:
    """How `observe` sends, for a report's parameters."""
    tick, linger = ctx.param("tick_ms", 1, 1), ctx.param("linger_ms", 1, 1)
    each = "one record at a time" if float(tick) == 0 else f"the records due every {tick} ms"
    return f"confluent-kafka, {each}, linger.ms {linger}, acks 1, ts = now"


def summary(seen: Observed, steady_s: float = 20.0) -> dict[str, Any]:
    """p50/p95/p99/max of the measured records' latencies (ms); `steady`: the p50 of the records
    sent in the last `steady_s` seconds over that of the first `steady_s` (1.0: no growth; left
    out when fewer than 2 x `steady_s` seconds were measured);
    `equal`: the final counts are the records sent, key by key."""
    latencies = [lat for _, lat in seen.samples]
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    row: dict[str, Any] = {
        "events": seen.events,
        "sent_per_s": round(seen.sent_per_s),
        "visible": len(latencies),
        "p50_ms": round(cuts[49] * 1000),
        "p95_ms": round(cuts[94] * 1000),
        "p99_ms": round(cuts[98] * 1000),
        "max_ms": round(max(latencies, default=float("nan")) * 1000),
    }
    first = min((t for t, _ in seen.samples), default=0.0)
    last = max((t for t, _ in seen.samples), default=0.0)
    if last - first >= 2 * steady_s:  # else the two spans overlap (e.g. --quick's 20 s)
        head = [lat for t, lat in seen.samples if t < first + steady_s]
        tail = [lat for t, lat in seen.samples if t >= last - steady_s]
        row["p50_first_ms"] = round(statistics.median(head) * 1000)
        row["p50_last_ms"] = round(statistics.median(tail) * 1000)
        row["steady"] = round(statistics.median(tail) / statistics.median(head), 2)
    row["equal"] = seen.final == seen.expected
    return row


def run(ctx: Context) -> Result:
    from slipstream.tools.kafka_broker import BrokerError, KafkaBroker

    result = Result(NAME, TITLE)
    result.params = {
        "rate_per_s": ctx.param("rate", 1000, 1000),
        "seconds": ctx.param("seconds", 20, 60),
        "poll_ms": ctx.param("poll_ms", 5, 5),
        "producer": producer_params(ctx),
        "master": "local[3], spark.sql.shuffle.partitions=1",
        "sink": ctx.param("sink", "sqlite", "sqlite"),
        "warmup_s": ctx.param("warmup_s", 10, 30),
        "floor": ctx.param("floor", "none", "none"),
    }
    epoch = ctx.param("epoch", "5s", "5s")  # real-time mode's epoch (checkpoint interval)
    result.params["epoch"] = epoch
    variants = {
        name.replace("5s", epoch): (trigger.replace("5s", epoch), False)
        for name, trigger in TRIGGERS.items()
        if ctx.param("variants", "both", "both") == "both" or trigger.startswith("real-time")
    }
    if result.params["floor"] == "kafka":
        variants[f"real-time ({epoch} epochs), Spark's Kafka sink"] = (f"real-time:{epoch}", True)
    try:
        broker = KafkaBroker(base=Path(ctx.scratch("broker"))).start()
    except (BrokerError, OSError) as exc:
        result.skipped = f"no Kafka broker: {exc}"
        return result
    with contextlib.ExitStack() as stack:
        stack.callback(broker.stop)
        pg = None
        if result.params["sink"] == "postgresql":
            from tests.services import running_postgres

            result.params["pg"] = "fsync, synchronous_commit at their defaults (on)"
            pg = stack.enter_context(running_postgres())
            if isinstance(pg, str):
                result.skipped = f"no PostgreSQL: {pg}"
                return result
        for variant, (trigger, to_kafka) in variants.items():
            ctx.log(f"  {variant}")
            result.add(**measure(ctx, broker, variant, trigger, pg, to_kafka))
    result.notes.append(
        "latency = the first read of the table (or the output topic) every poll_ms that shows "
        "the record counted, minus when the producer was handed the record; the first warmup_s "
        "seconds of records left out; one run per variant"
    )
    return result
