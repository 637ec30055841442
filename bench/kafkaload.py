"""A paced Kafka producer of trending view events with markers, and pollers that see a marker's
row appear (in PostgreSQL or in a peer's output file): the pieces of scenario kafka_latency.

Markers: every `marker_every` seconds the producer sends, among the ordinary events, one event
of its own article `a9NNNNNNNN` (bench.workloads.marker_article, never in the catalog) with
`ts` = now; its latency is the first poll that shows a row of that article minus the moment
the producer handed the record to the client. Ordinary events carry `ts` = now too (so nothing
is late) and an article of the catalog, drawn round-robin."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.workloads import MARKER_PREFIX, marker_article, marker_index

MARKER = re.compile(rf"\b{MARKER_PREFIX}[0-9]{{8}}\b")


def iso_ms(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def marker_record(index: int, moment: datetime) -> bytes:
    return (
        f'{{"event_id":"bench-marker-{index}","article_id":"{marker_article(index)}",'
        f'"user_id":"bench","ts":"{iso_ms(moment)}"}}'
    ).encode()


def producer_client(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "acks": 1,
            "queue.buffering.max.messages": 2_000_000,
        }
    )


def produce(client: Any, topic: str, value: bytes) -> None:
    """Hand one record to the client, waiting while its local queue is full."""
    while True:
        try:
            client.produce(topic, value)
            return
        except BufferError:
            client.poll(0.05)


@dataclass
class PacedProducer:
    """Sends `rate` events a second for `seconds` seconds in 10 ms ticks, a marker every
    `marker_every` seconds (indices from `first_marker`); `sent` maps marker -> monotonic time."""

    client: Any
    topic: str
    articles: list[str]
    rate: int
    seconds: float
    marker_every: float = 0.1
    first_marker: int = 1
    sent: dict[int, float] = field(default_factory=dict)
    events: int = 0
    began: float = 0.0
    ended: float = 0.0

    def start(self) -> PacedProducer:
        self.thread = threading.Thread(target=self._run, name="bench-kafka-producer", daemon=True)
        self.thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def _run(self) -> None:
        topic, articles, n = self.topic, self.articles, len(self.articles)
        self.began = began = time.monotonic()
        marker, next_marker = self.first_marker, began
        while True:
            now = time.monotonic()
            elapsed = now - began
            if elapsed >= self.seconds:
                break
            ts = iso_ms(datetime.now(UTC))
            due = int(self.rate * elapsed)
            for i in range(self.events, due):
                value = (
                    f'{{"event_id":"e{i}","article_id":"{articles[i % n]}",'
                    f'"user_id":"u{i % 5000}","ts":"{ts}"}}'
                )
                produce(self.client, topic, value.encode())
            self.events = max(self.events, due)
            if now >= next_marker:
                produce(self.client, topic, marker_record(marker, datetime.now(UTC)))
                self.sent[marker] = time.monotonic()
                marker += 1
                next_marker += self.marker_every
            self.client.poll(0)
            time.sleep(max(0.0, 0.01 - (time.monotonic() - now)))
        self.ended = time.monotonic()
        self.client.flush(30)


class _Poller:
    """A thread that calls `markers()` every `every` seconds and notes when each marker index
    was first seen."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.seen: dict[int, float] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-marker-poll", daemon=True)

    def start(self) -> _Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.close()

    def markers(self) -> set[int]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _run(self) -> None:
        while not self._stop.is_set():
            found, at = self.markers(), time.monotonic()
            self.polls += 1
            for k in found:
                self.seen.setdefault(k, at)
            self._stop.wait(self.every)

    def wait_for(self, markers: list[int], timeout: float, alive: Any) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(k in self.seen for k in markers):
                return True
            if not alive():
                return False
            time.sleep(0.05)
        return all(k in self.seen for k in markers)


class PgMarkerPoller(_Poller):
    """Marker articles present in `table` (its `article_id` column) of a PostgreSQL database."""

    def __init__(self, conninfo: str, table: str, every: float) -> None:
        super().__init__(every)
        self.conninfo, self.table = conninfo, table
        self.conn: Any = None

    def markers(self) -> set[int]:
        import psycopg

        try:
            if self.conn is None:
                self.conn = psycopg.connect(self.conninfo, autocommit=True)
            rows = self.conn.execute(
                f"SELECT DISTINCT article_id FROM {self.table} WHERE article_id LIKE %s",
                (f"{MARKER_PREFIX}%",),
            ).fetchall()
        except psycopg.Error:  # the table does not exist yet (slipstream creates it)
            return set()
        return {marker_index(a) for (a,) in rows if MARKER.fullmatch(a)}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class FileMarkerPoller(_Poller):
    """Marker articles in the lines appended to a file (Flink's print sink)."""

    def __init__(self, path: Path, every: float) -> None:
        super().__init__(every)
        self.path, self.offset, self.rest = path, 0, ""

    def markers(self) -> set[int]:
        if not self.path.exists():
            return set()
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        self.offset += len(chunk)
        text = self.rest + chunk.decode("utf-8", "replace")
        text, _, self.rest = text.rpartition("\n")
        return {marker_index(m) for m in MARKER.findall(text)}


def produce_lines(bootstrap: str, topic: str, files: list[Path]) -> int:
    """Every line of `files`, in order, as one record each (throughput part)."""
    client = producer_client(bootstrap)
    n = 0
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                produce(client, topic, line.rstrip(b"\n"))
                n += 1
                if n % 10_000 == 0:
                    client.poll(0)
    client.flush(120)
    return n
