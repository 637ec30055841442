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
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pyspark.sql import SparkSession

from slipstream.app.commands import check as check_command
from slipstream.core.specs import SinkSpec
from slipstream.settings.config import load_settings
from slipstream.sinks.postgres_io import PgTarget, plain
from slipstream.sinks.postgres_io import connect as pg_connect
from slipstream.sinks.postgres_io import read_table as pg_read_table
from slipstream.sinks.sqlite import read_table
from slipstream.testing import PipelineHarness
from tests.helpers import REPO, mobile_counts
from tests.services import produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

REAL_TIME = "real-time:5s"
DEADLINE_S = 90.0
#: a `slipstream run` of its own: a JVM, Ivy and Spark start first (minutes on a loaded machine)
STARTED_WITHIN_S = 300.0


def _topic(
    kafka: Any, request: pytest.FixtureRequest, partitions: int = 1, suffix: str = ""
) -> str:
    name = "rt-" + "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
    return kafka.create_topic(name + suffix, partitions)


def _until(
    read: Callable[[], Any],
    expected: Any,
    what: str,
    alive: Callable[[], None],
    within_s: float = DEADLINE_S,
) -> None:
    """Poll `read()` until it equals `expected`, failing after `within_s` with the last value,
    or as soon as `alive()` raises (the query or the process died)."""
    deadline = time.monotonic() + within_s
    got = read()
    while got != expected:
        alive()
        assert time.monotonic() < deadline, f"{what}: after {within_s} s got {got!r}"
        time.sleep(0.1)  # a poll of the table, not a wait for an event
        got = read()


def _running(h: PipelineHarness) -> Callable[[], None]:
    def alive() -> None:
        assert h.run is not None
        for query in h.run.queries.values():
            if not query.isActive:
                raise AssertionError(f"{query.name} stopped: {query.exception()}")

    return alive


@contextmanager
def _shuffle_partitions(spark: SparkSession, partitions: int) -> Iterator[None]:
    """The session's shuffle partitions at `partitions` inside, its value before after. The
    session is shared, and an in-process run's session builder sets its own default on it, so a
    test that depends on the number says it."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


@pytest.fixture
def one_shuffle_partition(kafka_spark: SparkSession) -> Iterator[None]:
    """Real-time queries hold a slot per source and shuffle partition (local[2] here): one
    shuffle partition while the test's queries start, the session's value after."""
    with _shuffle_partitions(kafka_spark, 1):
        yield


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


def test_the_jvm_writer_stores_what_the_python_writer_stores(
    kafka_spark: SparkSession, postgres: Any, pg_database: str, tmp_path: Path
) -> None:
    """Rows of every type the sinks store (long, int, double, float, boolean, timestamps with
    and without microseconds, date, decimal, an array, text with NUL, nulls, a key written
    twice) through each writer into its own table, into SQLite and into PostgreSQL: the JVM
    writer's table equals the Python writer's, value for value and (SQLite) type for type.
    `foreach` runs the same ForeachWriter contract in a micro-batch (availableNow), so the
    comparison needs no wait."""
    import sqlite3
    from datetime import date
    from decimal import Decimal

    from slipstream.sinks.base import SinkContext
    from slipstream.sinks.jvm_rows import foreach_jvm, jvm_writer
    from slipstream.sinks.postgres import PostgresSink
    from slipstream.sinks.rows import UpsertWriter, upsert_statement
    from slipstream.sinks.sqlite import SqliteSink

    schema = (
        "k STRING, n BIGINT, i INT, x DOUBLE, f FLOAT, b BOOLEAN, ts TIMESTAMP, d DATE, "
        "m DECIMAL(10,2), tags ARRAY<STRING>, t STRING"
    )
    moment = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    later = moment + timedelta(seconds=1.5)
    rows = [
        ("a", 1, 2, 0.1, 1.5, True, moment, date(2026, 3, 2), Decimal("12.34"), ["x"], "plain"),
        ("b", -(2**53) - 1, -1, 1e300, 0.1, False, moment + timedelta(microseconds=123456),
         date(1999, 12, 31), Decimal("-0.01"), [], "nul\x00here"),
        ("c", *[None] * 10),
        ("a", 7, 8, -2.5, 3.25, False, later, date(2026, 3, 3), Decimal("0.50"), ["y"], "again"),
    ]  # fmt: skip
    landing = tmp_path / "in"
    kafka_spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(landing))
    sinks = [
        SqliteSink(SinkSpec.parse(f"sqlite:{tmp_path / 'out.db'}"), tmp_path / "unused.db"),
        PostgresSink(SinkSpec.parse(postgres.url(pg_database))),
    ]
    for sink in sinks:
        stored = sink.row_frame(kafka_spark.readStream.schema(schema).parquet(str(landing)))
        for table in ("python_rows", "jvm_rows"):
            ctx = SinkContext("p", f"p.{table}", table, ("k",), "update", tmp_path / table)
            with closing(sink.connect()) as conn:
                sink.ensure_schema(conn, table, stored.schema, ctx)
            statement = upsert_statement(table, stored.columns, ("k",), "?")
            writer, why = jvm_writer(sink, stored, statement, stored.columns, ("k",))
            assert why is None, why
            stream = stored.writeStream.option(
                "checkpointLocation", str(tmp_path / sink.spec.kind / table)
            )
            if table == "jvm_rows":
                stream = foreach_jvm(writer)(stream)
            else:
                stream = stream.foreach(
                    UpsertWriter(
                        sink.row_connection(),
                        upsert_statement(table, stored.columns, ("k",), sink.placeholder),
                        tuple(stored.columns),
                    )
                )
            stream.trigger(availableNow=True).start().awaitTermination()

    def sqlite_table(table: str) -> list[tuple[Any, ...]]:
        cols = ", ".join(f'"{c}", typeof("{c}")' for c in ("k", *schema_names(schema)[1:]))
        with closing(sqlite3.connect(tmp_path / "out.db")) as conn:
            return conn.execute(f"SELECT {cols} FROM {table} ORDER BY k").fetchall()

    def pg_table(table: str) -> list[tuple[Any, ...]]:
        with pg_connect(sinks[1].target) as conn:  # type: ignore[attr-defined]
            return conn.execute(f"SELECT * FROM {table} ORDER BY k").fetchall()

    for read in (sqlite_table, pg_table):
        python_rows, jvm_rows = read("python_rows"), read("jvm_rows")
        assert [r[0] for r in python_rows] == ["a", "b", "c"], python_rows
        assert jvm_rows == python_rows, read.__name__


def schema_names(schema: str) -> list[str]:
    """The column names of a DDL schema string without nested commas (`k STRING, n BIGINT`)."""
    return [part.split()[0] for part in schema.replace("<STRING>", "").split(",")]


#: epochs far longer than any wait below: a row seen in the table was written as it arrived,
#: not at its epoch's end, and a run killed after its first rows stops inside its first epoch
LONG_EPOCHS = "real-time:10m"
#: what the run says when its outputs are written by slipstream's JVM writer (sinks/jvm_rows.py)
JVM_WRITER = "rows upserted from the JVM by key, in batches (slipstream JDBC upsert writer"


def page_command() -> list[str]:
    """docs/howto/kafka.md's real-time command, as printed."""
    page = (REPO / "docs" / "howto" / "kafka.md").read_text()
    [line] = [x for x in page.splitlines() if x.startswith("slipstream run mobile") and
              "real-time" in x]  # fmt: skip
    return shlex.split(line)


class MobileRun:
    """docs/howto/kafka.md's `slipstream run mobile --trigger real-time:5s` from a topic, as a
    user types it (its own JVM with three task threads: the query holds two slots), with this
    test's topic, sink and state folder, and 10-minute
    epochs (a crash lands inside the first)."""

    def __init__(self, kafka: Any, topic: str, sink: str, tmp_path: Path) -> None:
        args = page_command()[1:]
        replace = {
            "--input": kafka.url(topic, startingOffsets="earliest"),
            "--trigger": LONG_EPOCHS,
            "--state-dir": str(tmp_path / "state"),
        }
        for flag, value in replace.items():
            args[args.index(flag) + 1] = value
        self.command = [sys.executable, "-m", "slipstream", *args, "--sink", sink]
        self.tmp_path = tmp_path
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.logs: list[Path] = []
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.logs.append(self.tmp_path / f"run{len(self.logs) + 1}.log")
        with self.logs[-1].open("w") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(self.logs[-1].read_text()[-3000:])

    def stop(self) -> None:
        """Ctrl-C: stops like `slipstream stop`."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(120)

    def crash(self) -> None:
        """SIGKILL to the run's process group: Python, its JVM and its workers at once (a JVM
        left to notice its parent's end would go on writing meanwhile)."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(120)

    def text(self) -> str:
        return "".join(log.read_text() for log in self.logs)


def _mobile_expected(lines: list[str]) -> list[tuple[Any, ...]]:
    frame = mobile_counts(lines)[["window_start", "action", "count"]]
    return sorted(tuple(r) for r in frame.values.tolist())


@pytest.mark.slow
def test_mobile_in_real_time_mode_into_sqlite_and_postgresql(
    kafka_spark: SparkSession,
    kafka: Any,
    postgres: Any,
    pg_database: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """Two runs of `slipstream run mobile --trigger real-time:10m` at once (two terminals, two
    JVMs: their start-ups overlap), each from its own topic, written by the JVM writer:

    - into SQLite: seed 003's windowed counts equal pandas over what was produced, before and
      after more actions arrive while it runs, long before the 10-minute epoch ends; the
      malformed record reaches the quarantine, not the table;
    - into PostgreSQL (the URL carries the password), killed (SIGKILL, its JVM too) inside its
      first epoch once the table equals pandas: the restart replays that epoch from its offsets
      (real-time mode logs an epoch's offsets at its end), upserting every row again (each
      row's xmin changes), and the table equals pandas over all that was produced, nothing
      doubled. The password is in neither of its runs' output."""
    from tests.services import APP_PASSWORD

    start = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    first = _mobile_lines(300, start, seed=5)
    later = _mobile_lines(200, start + timedelta(hours=1), seed=6)  # other windows
    lite_topic, pg_topic = _topic(kafka, request, suffix="-sqlite"), _topic(kafka, request)
    produce(kafka.bootstrap, lite_topic, [*first, '{"id": "p1", "action": "open"'])
    produce(kafka.bootstrap, pg_topic, first)
    database = tmp_path / "mobile.db"
    lite = MobileRun(kafka, lite_topic, f"sqlite:{database}", tmp_path / "sqlite")
    pg = MobileRun(kafka, pg_topic, postgres.url(pg_database), tmp_path / "postgresql")
    target = PgTarget.from_spec(SinkSpec.parse(postgres.url(pg_database)))

    def lite_table() -> list[tuple[Any, ...]]:
        rows = read_table(database, "mobile_action_counts")
        return sorted((r["window_start"], r["action"], r["count"]) for r in rows)

    def pg_rows() -> dict[tuple[Any, ...], tuple[int, str]]:
        """(window_start, action) -> (count, the row version's xmin)."""
        with pg_connect(target) as conn:
            if conn.execute("SELECT to_regclass('mobile_action_counts')").fetchone() == (None,):
                return {}
            found = conn.execute(
                "SELECT window_start, action, count, xmin::text FROM mobile_action_counts"
            ).fetchall()
        return {(plain(w), a): (c, x) for w, a, c, x in found}

    def pg_table() -> list[tuple[Any, ...]]:
        return sorted((*key, count) for key, (count, _) in pg_rows().items())

    lite.start()
    pg.start()
    try:
        before_start = "the actions produced before the start"
        _until(lite_table, _mobile_expected(first), before_start, lite.alive, STARTED_WITHIN_S)
        _until(pg_table, _mobile_expected(first), before_start, pg.alive, STARTED_WITHIN_S)
        before = pg_rows()
        pg.crash()  # inside epoch 0: nothing of it committed
        checkpoint = tmp_path / "postgresql" / "state" / "checkpoints" / "mobile" / "counts"
        assert not list((checkpoint / "commits").glob("[0-9]*")), "epoch 0 was committed"
        pg.start()
        produce(kafka.bootstrap, lite_topic, later)
        produce(kafka.bootstrap, pg_topic, later)
        _until(
            lite_table,
            _mobile_expected(first + later),
            "the actions produced while it runs",
            lite.alive,
        )
        lite.stop()
        _until(
            pg_table,
            _mobile_expected(first + later),
            "after the restart",
            pg.alive,
            STARTED_WITHIN_S,
        )
        replayed = pg_rows()
        assert all(replayed[key][1] != xmin for key, (_, xmin) in before.items()), (
            "the restart did not upsert the replayed epoch's rows again"
        )
    finally:
        lite.stop()
        pg.stop()
    assert JVM_WRITER in lite.text(), lite.text()[-3000:]
    assert pg.text().count(JVM_WRITER) == 2, pg.text()[-3000:]
    assert APP_PASSWORD not in pg.text() and quote(APP_PASSWORD, safe="") not in pg.text()


def test_a_run_with_too_few_slots_is_refused_before_start(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """mobile under the session's local[2] with two shuffle partitions: its real-time query
    would hold 3 slots (its quarantine is written by the query itself: no query beside it);
    `check` says so instead of Spark's CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT after the start."""
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
    with _shuffle_partitions(kafka_spark, 2):
        assert check_command(settings, out, kafka_spark) != 0
    refused = [line for line in out.getvalue().splitlines() if line.startswith("refused")]
    assert len(refused) == 1 and "REAL_TIME_NEEDS_SLOTS" in refused[0], out.getvalue()
    assert "hold 3 task slots" in refused[0] and "Spark has 2" in refused[0], refused
    assert "micro-batch" not in refused[0], refused
    assert "  real-time   yes: upserted on the output's key" in out.getvalue()


def test_check_names_what_stops_trending_in_real_time_mode(
    kafka_spark: SparkSession, kafka: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """trending under a real-time trigger deduplicates by (event_id, ts) (`--dedup auto`) and
    its views run; `check` says how that form differs. Given `--dedup within-watermark`, its
    dropDuplicatesWithinWatermark is not in Spark's real-time allow-list, and its archive
    output runs in append mode: `check` refuses both outputs, naming each cause."""
    topic = _topic(kafka, request)
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("article_id,title,section\na1,One,news\n")

    def check(params: dict[str, str], *sink: str) -> tuple[int, str]:
        flags: dict[str, Any] = {
            "input": [f"events={kafka.url(topic)}", f"catalog={catalog}"],
            "trigger": REAL_TIME,
            "mode": "update",
            "state_dir": tmp_path / "state",
        }
        if sink:
            flags["sink"] = list(sink)
        settings = load_settings("trending", flags, environ={}, params=params)
        out = io.StringIO()
        with _shuffle_partitions(kafka_spark, 1):
            return check_command(settings, out, kafka_spark), out.getvalue()

    code, text = check({})
    assert "dedup       dropDuplicates(event_id, ts): " in text, text
    assert "  real-time   yes: upserted on the output's key" in text, text
    assert not [line for line in text.splitlines() if "REAL_TIME_NOT_ELIGIBLE" in line], text

    archive = f"archive=sqlite:{tmp_path / 'archive.db'}"
    code, text = check({"dedup": "within-watermark"}, archive)
    assert code != 0
    refused = [line for line in text.splitlines() if line.startswith("refused")]
    assert len(refused) == 2 and all("REAL_TIME_NOT_ELIGIBLE" in x for x in refused), text
    assert "dropDuplicatesWithinWatermark" in refused[0], text
    assert "--mode append: real-time mode runs update mode only" in refused[1], text
    assert "  real-time   no: operator dropDuplicatesWithinWatermark" in text
