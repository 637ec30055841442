"""slipstream's JVM writer for real-time mode (java/src/slipstream/jvm/JdbcUpsertWriter.java)
coalescing by key: Spark's open/process/close calls made by hand through py4j, into SQLite and
PostgreSQL, and a real-time `wordcount` on a real broker into PostgreSQL.

What is counted: the writer's own counters (`JdbcUpsertWriter.upserts()` and `commits()`, every
writer of this JVM: local mode runs the tasks here) and, for the PostgreSQL runs, the
transactions that wrote the table's rows as PostgreSQL records them (each row's `xmin`). The
tables are compared with pandas over the rows given."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from slipstream.core.specs import SinkSpec
from slipstream.errors import find_error
from slipstream.sinks.base import SinkContext
from slipstream.sinks.database import DatabaseSink
from slipstream.sinks.jvm_rows import FLUSH_MS_CONF, Flush, jvm_writer
from slipstream.sinks.postgres import PostgresSink
from slipstream.sinks.postgres_io import read_table as pg_read_table
from slipstream.sinks.rows import upsert_statement
from slipstream.sinks.sqlite import SqliteSink, read_table
from slipstream.testing import PipelineHarness
from tests.services import APP_PASSWORD, produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka]  # kafka: the session gets the JDBC drivers

SCHEMA = "k STRING, n BIGINT, note STRING"
#: no timed flush within a test: every flush is one the test caused (size or close)
NEVER = 600_000
DEADLINE_S = 90.0
#: a real-time query's first rows, on a loaded machine (the start-up bound of
#: tests/e2e/kafka/test_realtime.py)
STARTED_WITHIN_S = 300.0


class Counters:
    """The writer's counters in this JVM, as deltas from when this was made."""

    def __init__(self, spark: SparkSession) -> None:
        self.cls = spark.sparkContext._jvm.slipstream.jvm.JdbcUpsertWriter  # type: ignore[union-attr]
        self.start = (self.cls.upserts(), self.cls.commits())

    def __call__(self) -> tuple[int, int]:
        return self.cls.upserts() - self.start[0], self.cls.commits() - self.start[1]


class ByHand:
    """One JVM writer into `table` of `sink`, called as Spark's task calls it."""

    def __init__(
        self, spark: SparkSession, sink: DatabaseSink, table: str, flush: Flush, tmp: Path
    ) -> None:
        self.spark, self.sink, self.table = spark, sink, table
        stored = sink.row_frame(spark.createDataFrame([], SCHEMA))
        ctx = SinkContext("p", f"p.{table}", table, ("k",), "update", tmp / table)
        with closing(sink.connect()) as conn:
            sink.ensure_schema(conn, table, stored.schema, ctx)
        self.columns = stored.columns
        statement = upsert_statement(table, self.columns, ("k",), "?")
        self.writer, why = jvm_writer(sink, stored, statement, self.columns, ("k",), flush)
        assert why is None, why
        self.schema = stored._jdf.schema()
        self.jvm = spark.sparkContext._jvm

    def rows(self, values: list[tuple[Any, ...]]) -> list[Any]:
        """JVM Rows with the stored frame's schema, as a task's writer receives them."""
        return list(self.spark.createDataFrame(values, SCHEMA)._jdf.collectAsList())

    def row(self, values: tuple[Any, ...]) -> Any:
        return self.rows([values])[0]

    def epoch(self, rows: list[tuple[Any, ...]], epoch: int = 0) -> None:
        """open, process every row, close(null): the epoch of one task."""
        assert self.writer.open(0, epoch)
        for row in self.rows(rows):
            self.writer.process(row)
        self.writer.close(None)

    def table_rows(self) -> pd.DataFrame:
        if isinstance(self.sink, SqliteSink):
            found = read_table(self.sink.path, self.table)
        else:
            found = pg_read_table(self.sink.target, self.table)  # type: ignore[attr-defined]
        frame = pd.DataFrame(found, columns=["k", "n", "note"])
        return frame.sort_values("k").reset_index(drop=True)


def latest(rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """pandas: each key's last row, the table an update-mode output must end as."""
    frame = pd.DataFrame(rows, columns=["k", "n", "note"])
    return frame.drop_duplicates("k", keep="last").sort_values("k").reset_index(drop=True)


@pytest.fixture
def sinks(postgres: Any, pg_database: str, tmp_path: Path) -> Iterator[list[DatabaseSink]]:
    yield [
        SqliteSink(SinkSpec.parse(f"sqlite:{tmp_path / 'out.db'}"), tmp_path / "unused.db"),
        PostgresSink(SinkSpec.parse(postgres.url(pg_database))),
    ]


def writing_transactions(postgres: Any, database: str, table: str) -> set[str]:
    """The transactions that wrote `table`'s rows, as PostgreSQL records them: each row's
    `xmin`. Unlike the database's commit counter, nothing else (autovacuum, a catalog's
    analyze, a connection's start) adds to it."""
    import psycopg

    with psycopg.connect(postgres.admin_dsn(database), autocommit=True) as conn:
        found = conn.execute(f"SELECT DISTINCT xmin::text FROM {table}").fetchall()
    return {row[0] for row in found}


def test_many_events_on_few_keys_are_one_batch_and_one_commit(
    kafka_spark: SparkSession, sinks: list[DatabaseSink], postgres: Any, pg_database: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """600 rows on 5 keys, no timed flush: nothing is written until the epoch's end, then
    the 5 keys' latest rows in one batch and one commit; in PostgreSQL the 5 rows carry one
    transaction, not 600. The epoch replayed leaves the same table (pandas: each key's last
    row), with one more commit that rewrote all 5."""
    rng = random.Random(39)
    rows = [(f"key{rng.randrange(5)}", i, f"row {i}") for i in range(600)]
    for sink in sinks:
        hand = ByHand(kafka_spark, sink, "counts", Flush(NEVER, 1000), tmp_path)
        pg = isinstance(sink, PostgresSink)
        counted = Counters(kafka_spark)
        hand.epoch(rows)
        assert counted() == (5, 1), sink.spec.kind
        pd.testing.assert_frame_equal(hand.table_rows(), latest(rows), obj=sink.spec.kind)
        first = writing_transactions(postgres, pg_database, "counts") if pg else set()
        assert len(first) == int(pg)
        hand.epoch(rows, epoch=0)  # the replay after a crash
        assert counted() == (10, 2)
        pd.testing.assert_frame_equal(hand.table_rows(), latest(rows), obj=sink.spec.kind)
        if pg:
            again = writing_transactions(postgres, pg_database, "counts")
            assert len(again) == 1 and again != first


def test_a_full_map_is_written_by_process_and_the_rest_at_close(
    kafka_spark: SparkSession, sinks: list[DatabaseSink], tmp_path: Path
) -> None:
    """flushKeys 3: the third key waiting makes `process` write the three (each key's latest
    row, one commit); what comes after waits for the epoch's end."""
    rows = [("a", 1, "x"), ("b", 1, "x"), ("a", 2, "y"), ("a", 3, "z"), ("c", 1, "x")]
    later = [("a", 4, "w"), ("d", 1, None)]
    for sink in sinks:
        hand = ByHand(kafka_spark, sink, "small", Flush(NEVER, 3), tmp_path)
        counted = Counters(kafka_spark)
        assert hand.writer.open(0, 1)
        for values in rows[:4]:
            hand.writer.process(hand.row(values))
        assert hand.table_rows().empty and counted() == (0, 0)
        hand.writer.process(hand.row(rows[4]))
        assert counted() == (3, 1)
        pd.testing.assert_frame_equal(hand.table_rows(), latest(rows), obj=sink.spec.kind)
        for values in later:
            hand.writer.process(hand.row(values))
        hand.writer.close(None)
        assert counted() == (5, 2)
        pd.testing.assert_frame_equal(hand.table_rows(), latest(rows + later))


def _until_raises(call: Any, within_s: float = DEADLINE_S) -> Py4JJavaError:
    """Call `call()` until it raises (a flusher's failure surfacing), failing after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            call()
        except Py4JJavaError as exc:
            return exc
        assert time.monotonic() < deadline, f"no failure surfaced within {within_s} s"


def test_a_failed_flush_fails_the_task_with_its_code_and_without_the_password(
    kafka_spark: SparkSession, postgres: Any, pg_database: str, tmp_path: Path
) -> None:
    """A row the table refuses (a CHECK), flushed by the flusher thread (every 1 ms): the next
    `process` throws SINK_WRITE_FAILED, the row is not in the table, `close(error)` (Spark's
    call after a failed row) throws nothing more. Flushed at the epoch's end instead, the same
    failure comes from `close(null)`. No message holds the password."""
    sink = PostgresSink(SinkSpec.parse(postgres.url(pg_database)))
    texts = []
    for flush, where in ((Flush(1, 1000), "process"), (Flush(NEVER, 1000), "close")):
        table = f"checked_{where}"
        hand = ByHand(kafka_spark, sink, table, flush, tmp_path)
        postgres.admin(f"ALTER TABLE {table} ADD CHECK (n < 100)", pg_database)
        assert hand.writer.open(0, 0)
        hand.writer.process(hand.row(("bad", 500, "refused")))
        if where == "process":
            good = hand.row(("good", 1, "fine"))
            failed = _until_raises(lambda good=good, hand=hand: hand.writer.process(good))
            hand.writer.close(failed.java_exception)
        else:
            with pytest.raises(Py4JJavaError) as raised:
                hand.writer.close(None)
            failed = raised.value
        text = str(failed)
        found = find_error(text)
        assert found is not None and found.code == "SINK_WRITE_FAILED", text
        assert "check constraint" in found.message, found.message
        assert hand.table_rows().empty, where  # the refused batch was rolled back
        texts.append(text)
    assert all(APP_PASSWORD not in text for text in texts)


def test_an_unreachable_database_keeps_its_code(kafka_spark: SparkSession, tmp_path: Path) -> None:
    sink = SqliteSink(SinkSpec.parse(f"sqlite:{tmp_path / 'out.db'}"), tmp_path / "unused.db")
    hand = ByHand(kafka_spark, sink, "t", Flush(), tmp_path)
    (tmp_path / "out.db").unlink()
    (tmp_path / "out.db").mkdir()  # the file is now a folder: no database opens there
    with pytest.raises(Py4JJavaError) as raised:
        hand.writer.open(0, 0)
    found = find_error(str(raised.value))
    assert found is not None and found.code == "SINK_UNREACHABLE", str(raised.value)


@pytest.fixture
def slower_flushes(kafka_spark: SparkSession) -> Iterator[None]:
    """100 ms flushes and one shuffle partition while the test's query starts (its writer
    reads the setting when it is built); the session's values after."""
    before = {
        key: kafka_spark.conf.get(key, None)
        for key in (FLUSH_MS_CONF, "spark.sql.shuffle.partitions")
    }
    kafka_spark.conf.set(FLUSH_MS_CONF, "100")
    kafka_spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    for key, value in before.items():
        if value is None:
            kafka_spark.conf.unset(key)
        else:
            kafka_spark.conf.set(key, value)


@pytest.mark.usefixtures("slower_flushes")
def test_real_time_wordcount_writes_keys_not_events(
    kafka_spark: SparkSession,
    kafka: Any,
    postgres: Any,
    pg_database: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """3,000 one-word lines on 3 words, produced before a real-time `wordcount` into
    PostgreSQL starts: update mode emits a row per word read, the writer upserts each word's
    latest count per flush. The table equals pandas' value_counts over the lines, and the
    writer wrote far fewer rows than the events (at most a third: 3 keys per 100 ms flush)."""
    rng = random.Random(3)
    lines = [rng.choice(["cat", "dog", "owl"]) for _ in range(3000)]
    topic = kafka.create_topic("jvm-writer-" + request.node.name[-40:].replace("_", "-"), 1)
    produce(kafka.bootstrap, topic, lines)
    expected = pd.Series(lines).value_counts().sort_index().to_dict()
    counted = Counters(kafka_spark)
    with PipelineHarness(
        kafka_spark,
        "wordcount",
        tmp_path / "run",
        sink=postgres.url(pg_database),
        mode="update",
        trigger="real-time:10m",  # one epoch: every row is written by a timed flush
        source=None,
        input=[kafka.url(topic, startingOffsets="earliest")],
    ) as h:
        bound = h.prepared.primary

        def table() -> dict[str, int]:
            rows = pg_read_table(bound.sink.target, bound.ctx.table)  # type: ignore[attr-defined]
            return {r["word"]: r["count"] for r in rows}

        deadline = time.monotonic() + STARTED_WITHIN_S
        got = table()
        while got != expected:
            assert h.run is not None
            for query in h.run.queries.values():
                assert query.isActive, f"{query.name} stopped: {query.exception()}"
            assert time.monotonic() < deadline, f"after {STARTED_WITHIN_S} s got {got!r}"
            time.sleep(0.1)  # a poll of the table, not a wait for an event
            got = table()
    upserts, commits = counted()
    assert 3 <= upserts <= len(lines) // 3, (upserts, commits)
    assert 1 <= commits <= upserts, (upserts, commits)
