"""Spark's real-time mode (`--trigger real-time:5s`) on a real broker: `wordcount` and `mobile`
from a topic into SQLite and PostgreSQL through the upserting ForeachWriter (sinks/rows.py),
compared with pandas over what was produced, while the query runs; and `check` naming what
stops an output (trending's dropDuplicatesWithinWatermark).

Synchronisation: a real-time query writes rows as they arrive and has no batch to wait for, so
each test polls the sink's table until it equals the independent computation, under a
deadline (what the rows must become is known; only when is not)."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.app.commands import check as check_command
from slipstream.settings.config import load_settings
from slipstream.sinks.postgres_io import read_table as pg_read_table
from slipstream.sinks.sqlite import read_table
from slipstream.testing import PipelineHarness
from tests.helpers import mobile_counts
from tests.services import produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

REAL_TIME = "real-time:5s"
DEADLINE_S = 90.0


def _topic(kafka: Any, request: pytest.FixtureRequest, partitions: int = 1) -> str:
    name = "rt-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return kafka.create_topic(name, partitions)


def _until(read: Callable[[], Any], expected: Any, what: str, alive: Callable[[], None]) -> None:
    """Poll `read()` until it equals `expected`, failing after DEADLINE_S with the last value,
    or as soon as `alive()` raises (the query or the process died)."""
    deadline = time.monotonic() + DEADLINE_S
    got = read()
    while got != expected:
        alive()
        assert time.monotonic() < deadline, f"{what}: after {DEADLINE_S} s got {got!r}"
        time.sleep(0.1)  # a poll of the table, not a wait for an event
        got = read()


def _running(h: PipelineHarness) -> Callable[[], None]:
    def alive() -> None:
        assert h.run is not None
        for query in h.run.queries.values():
            if not query.isActive:
                raise AssertionError(f"{query.name} stopped: {query.exception()}")

    return alive


@pytest.fixture
def one_shuffle_partition(kafka_spark: SparkSession) -> Any:
    """Real-time queries hold a slot per source and shuffle partition (local[2] here): one
    shuffle partition while the test's queries start, the session's value after."""
    before = kafka_spark.conf.get("spark.sql.shuffle.partitions")
    kafka_spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    kafka_spark.conf.set("spark.sql.shuffle.partitions", before)


def _mobile_lines(count: int, start: datetime, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    stamps = sorted(start + timedelta(seconds=rng.randrange(0, 3600)) for _ in range(count))
    return [
        json.dumps(
            {
                "id": f"phone{rng.randrange(50)}",
                "action": rng.choice(["open", "close", "crash"]),
                "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        for ts in stamps
    ]


@pytest.mark.usefixtures("one_shuffle_partition")
def test_wordcount_in_real_time_mode_into_sqlite_and_postgresql_follows_the_topic(
    kafka_spark: SparkSession,
    kafka: Any,
    postgres: Any,
    pg_database: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Lines produced before the start and while the query runs: the table is each word's
    count over everything produced (a Counter), upserted row by row; into SQLite, then into
    PostgreSQL from the same topic (one real-time query at a time: each holds 2 slots)."""
    topic = _topic(kafka, request)
    first = ["the cat sat", "the dog  sat on the cat", "a cat"]
    later = [["the end", "cat"], ["dog dog"]]
    produce(kafka.bootstrap, topic, first)
    url = kafka.url(topic, startingOffsets="earliest")

    def counts(lines: list[str]) -> dict[str, int]:
        return dict(Counter(w for line in lines for w in line.split()))

    produced = list(first)
    for sink, more in zip(["sqlite", postgres.url(pg_database)], later, strict=True):
        with PipelineHarness(
            kafka_spark,
            "wordcount",
            tmp_path / sink[:6],
            sink=sink,
            mode="update",
            trigger=REAL_TIME,
            source=None,
            input=[url],
        ) as h:
            bound = h.prepared.primary

            def table(h: PipelineHarness = h, bound: Any = bound) -> dict[str, int]:
                if bound.sink.spec.kind == "sqlite":
                    rows = h.results()
                else:
                    rows = pg_read_table(bound.sink.target, bound.ctx.table)  # type: ignore[attr-defined]
                return {r["word"]: r["count"] for r in rows}

            _until(table, counts(produced), f"{sink[:6]}: produced before", _running(h))
            produce(kafka.bootstrap, topic, more)
            produced += more
            _until(table, counts(produced), f"{sink[:6]}: produced while it runs", _running(h))
            assert bound.sink.owns(bound.ctx)  # the ledger's mark: `reset --outputs` may drop it


@pytest.mark.slow
def test_mobile_in_real_time_mode_into_sqlite_equals_pandas(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """`slipstream run mobile --trigger real-time:5s` as a user types it (its own JVM with
    three cores: the query holds two slots, its quarantine needs a third): seed 003's windowed
    counts in SQLite equal pandas over what was produced, before and after more actions
    arrive while it runs; the malformed record reaches the quarantine, not the table."""
    topic = _topic(kafka, request)
    start = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    first = _mobile_lines(300, start, seed=5)
    later = _mobile_lines(200, start + timedelta(hours=1), seed=6)
    produce(kafka.bootstrap, topic, [*first, '{"id": "p1", "action": "open"'])
    database = tmp_path / "mobile.db"
    command = [
        *(sys.executable, "-m", "slipstream", "run", "mobile"),
        *("--input", kafka.url(topic, startingOffsets="earliest")),
        *("--trigger", REAL_TIME, "--mode", "update", "--sink", f"sqlite:{database}"),
        *("--master", "local[3]", "--conf", "spark.sql.shuffle.partitions=1"),
        *("--state-dir", str(tmp_path / "state")),
    ]
    log = (tmp_path / "run.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def alive() -> None:
        if process.poll() is not None:
            raise AssertionError((tmp_path / "run.log").read_text()[-3000:])

    def table() -> list[tuple[Any, ...]]:
        rows = read_table(database, "mobile_action_counts")
        return sorted((r["window_start"], r["action"], r["count"]) for r in rows)

    def expected(lines: list[str]) -> list[tuple[Any, ...]]:
        frame = mobile_counts(lines)[["window_start", "action", "count"]]
        return sorted(tuple(r) for r in frame.values.tolist())

    try:
        _until(table, expected(first), "the actions produced before the start", alive)
        produce(kafka.bootstrap, topic, later)
        _until(table, expected(first + later), "the actions produced while it runs", alive)
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C: stops like `slipstream stop`
        process.wait(120)
        log.close()


def test_a_run_with_too_few_slots_is_refused_before_start(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """mobile under the session's local[2] with two shuffle partitions: its real-time query
    would hold 3 slots and the quarantine needs one more; `check` says so instead of Spark's
    CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT after the start."""
    topic = _topic(kafka, request)
    settings = load_settings(
        "mobile",
        {
            "input": [kafka.url(topic)],
            "trigger": REAL_TIME,
            "mode": "update",
            "state_dir": tmp_path / "state",
        },
        environ={},
    )
    out = io.StringIO()
    assert check_command(settings, out, kafka_spark) != 0
    refused = [line for line in out.getvalue().splitlines() if line.startswith("refused")]
    assert len(refused) == 1 and "REAL_TIME_NEEDS_SLOTS" in refused[0], out.getvalue()
    assert "hold 4 task slots" in refused[0] and "Spark has 2" in refused[0], refused
    assert "  real-time   yes: each row upserted on the output's key" in out.getvalue()
    assert "  real-time   no: rejected records go to files" in out.getvalue()


def test_check_names_what_stops_trending_in_real_time_mode(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """trending's dropDuplicatesWithinWatermark is not in Spark's real-time allow-list, and
    its archive output runs in append mode: `check` refuses both outputs, naming each cause."""
    topic = _topic(kafka, request)
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("article_id,title,section\na1,One,news\n")
    settings = load_settings(
        "trending",
        {
            "input": [f"events={kafka.url(topic)}", f"catalog={catalog}"],
            "trigger": REAL_TIME,
            "mode": "update",
            "state_dir": tmp_path / "state",
        },
        environ={},
    )
    out = io.StringIO()
    assert check_command(settings, out, kafka_spark) != 0
    text = out.getvalue()
    refused = [line for line in text.splitlines() if line.startswith("refused")]
    assert refused and all("REAL_TIME_NOT_ELIGIBLE" in line for line in refused), text
    assert "dropDuplicatesWithinWatermark" in refused[0], text
    assert "  real-time   no: operator dropDuplicatesWithinWatermark" in text
