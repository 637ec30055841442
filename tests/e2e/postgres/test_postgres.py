"""The PostgreSQL sink: pure logic, then a real server (tests/services.py), then with Spark."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from slipstream.core.specs import Secret, SinkSpec
from slipstream.errors import SlipstreamError, find_error
from slipstream.runtime.explain import explain
from slipstream.sinks.base import BatchInfo, SinkContext
from slipstream.sinks.postgres import (
    PgTarget,
    PostgresSink,
    connect,
    copy_partition,
    scrub,
    staging_table,
)
from slipstream.tools.views import results_view
from tests.services import APP_PASSWORD, free_port

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "src" / "slipstream" / "data" / "mobile"


def sink_for(url: str) -> PostgresSink:
    return PostgresSink(SinkSpec.parse(url), environ={})


def ctx(tmp_path: Path, mode: str = "update", table: str = "mobile_action_counts") -> SinkContext:
    return SinkContext(
        pipeline="mobile",
        query_name="mobile.counts",
        table=table,
        key=("window_start", "action"),
        mode=mode,  # type: ignore[arg-type]
        checkpoint=tmp_path / "cp",
    )


def expected_counts(files: list[Path]) -> pd.DataFrame:
    """An independent computation of mobile's result: pandas over the raw files."""
    events = pd.concat([pd.read_json(f, lines=True) for f in files])
    events["window_start"] = pd.to_datetime(events["ts"], utc=True).dt.floor("10min")
    out = events.groupby(["window_start", "action"]).size().reset_index(name="count")
    return out.sort_values(["window_start", "action"]).reset_index(drop=True)


def table_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["window_start", "action", "count"])
    frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True)
    frame["count"] = frame["count"].astype("int64")
    return frame.sort_values(["window_start", "action"]).reset_index(drop=True)


#: the batch staged from the driver (under parallel_rows rows) and from the executors
BOTH_WRITERS = pytest.mark.parametrize("parallel_rows", [10_000, 0], ids=["driver", "executors"])


# --- pure logic --------------------------------------------------------------------------------


def test_url_target_never_shows_the_password() -> None:
    spec = SinkSpec.parse("postgresql://app:p%40ss%23w@db.example:6543/serving?sslmode=require")
    target = PgTarget.from_spec(spec, environ={})
    assert (target.host, target.port, target.user, target.dbname) == (
        "db.example",
        6543,
        "app",
        "serving",
    )
    assert target.password == Secret("p@ss#w")
    assert target.keywords()["sslmode"] == "require" and "password" not in target.keywords()
    shown = [target.describe(), repr(target), repr(spec), spec.describe(), target.where()]
    shown.append(PostgresSink(spec, environ={}).describe(ctx(Path("."))))
    for text in shown:
        assert "p@ss" not in text and "p%40ss" not in text, text
    assert target.describe() == "postgresql://app@db.example:6543/serving?sslmode=require"


def test_libpq_environment_target() -> None:
    env = {"PGHOST": "h", "PGPORT": "5433", "PGUSER": "u", "PGPASSWORD": "pw", "PGDATABASE": "d"}
    target = PgTarget.from_spec(SinkSpec.parse("postgresql"), environ=env)
    assert (target.host, target.port, target.user, target.dbname) == ("h", 5433, "u", "d")
    assert target.password == Secret("pw") and "pw" not in target.describe()
    with pytest.raises(SlipstreamError) as bad:
        PgTarget.from_spec(SinkSpec.parse("postgresql"), environ={"PGPORT": "five"})
    assert bad.value.code == "SINK_BAD_TARGET"


def test_password_parameters_are_refused_and_parallel_rows_parsed() -> None:
    for query in ("password=x", "sslpassword=x"):
        with pytest.raises(SlipstreamError) as bad:
            PgTarget.from_spec(SinkSpec.parse(f"postgresql://u@h/d?{query}"), environ={})
        assert bad.value.code == "SINK_BAD_TARGET" and "=x" not in bad.value.render()
    target = PgTarget.from_spec(SinkSpec.parse("postgresql://u@h/d?parallel_rows=0"), environ={})
    assert target.parallel_rows == 0 and "parallel_rows" not in target.keywords()


def test_scrub_removes_passwords_in_every_form() -> None:
    secret = Secret("s3cr#t")
    text = "failed: password=s3cr#t url postgresql://u:s3cr%23t@h/d and 'password=other'"
    cleaned = scrub(text, secret)
    assert "s3cr" not in cleaned and "other" not in cleaned


def test_find_error_digs_our_error_out_of_a_spark_traceback() -> None:
    rendered = SlipstreamError("SINK_UNREACHABLE", "cannot connect to h:1", "start it").render()
    wrapped = f"[FOREACH_BATCH_USER_FUNCTION_ERROR] oops\nTraceback...\nSlipstreamError: {rendered}"
    found = find_error(wrapped)
    assert found is not None and found.code == "SINK_UNREACHABLE" and found.fix == "start it"
    assert find_error("[SOMETHING_ELSE] spark's own") is None


def test_staging_table_names_fit_postgresql_identifiers() -> None:
    assert staging_table("t") == "_slipstream_stage_t"
    long = staging_table("x" * 63)
    assert len(long) == 63 and long != staging_table("x" * 62 + "y")


# --- a real server, no Spark -------------------------------------------------------------------


@pytest.mark.postgres
def test_unreachable_server_names_host_port_database_and_not_the_password() -> None:
    port = free_port()  # nothing listens there
    target = PgTarget.from_spec(
        SinkSpec.parse(f"postgresql://app:{APP_PASSWORD.replace('#', '%23')}@127.0.0.1:{port}/db"),
        environ={},
    )
    with pytest.raises(SlipstreamError) as err:
        connect(target)
    text = err.value.render()
    assert err.value.code == "SINK_UNREACHABLE"
    assert f"127.0.0.1:{port}" in text and "database db" in text and "fix:" in text
    assert APP_PASSWORD not in text and "s3cret" not in text


@pytest.mark.postgres
def test_wrong_password_is_refused_without_echoing_it(postgres, pg_database: str) -> None:
    url = postgres.url(pg_database).replace("s3cret", "wrong-s3cret")
    with pytest.raises(SlipstreamError) as err:
        connect(PgTarget.from_spec(SinkSpec.parse(url), environ={}))
    assert err.value.code == "SINK_UNREACHABLE"
    assert "password authentication failed" in err.value.message
    assert "s3cret" not in err.value.render()


@pytest.mark.postgres
def test_a_retried_staging_task_leaves_one_copy(postgres, pg_database: str, tmp_path) -> None:
    sink = sink_for(postgres.url(pg_database))
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("action", StringType()), StructField("count", LongType())])
    c = ctx(tmp_path, mode="append", table="retried")
    with sink.connect() as conn:
        sink.ensure_schema(conn, "retried", schema, c)
    rows = [("open", 1), ("close", 2)]
    for _ in range(2):  # the same task twice (a Spark retry, or a speculative copy)
        n = copy_partition(
            sink.target, staging_table("retried"), ["action", "count"], "q", 7, "a1", 3, iter(rows)
        )
        assert n == 2
    staged = postgres.query(pg_database, "SELECT count(*) FROM _slipstream_stage_retried")
    assert staged == [(2,)]


# --- with Spark --------------------------------------------------------------------------------


def mobile_batch(spark, rows: list[tuple[str, str, int]]):
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    schema = StructType(
        [
            StructField("window_start", TimestampType()),
            StructField("window_end", TimestampType()),
            StructField("action", StringType()),
            StructField("count", LongType()),
        ]
    )
    data = []
    for start, action, count in rows:
        begin = datetime.fromisoformat(start).replace(tzinfo=UTC)
        data.append((begin, begin + timedelta(minutes=10), action, count))
    return spark.createDataFrame(data, schema)


def read(postgres, database: str, table: str = "mobile_action_counts") -> list[tuple]:
    return postgres.query(
        database,
        f"SELECT to_char(window_start AT TIME ZONE 'UTC', 'HH24:MI'), action, count "
        f"FROM {table} ORDER BY 1, 2",
    )


@pytest.mark.spark
@pytest.mark.postgres
@BOTH_WRITERS
def test_replayed_batch_is_skipped_and_upserts_on_the_key(
    spark, postgres, pg_database: str, tmp_path, parallel_rows: int
) -> None:
    sink = sink_for(f"{postgres.url(pg_database)}?parallel_rows={parallel_rows}")
    c = ctx(tmp_path)
    first = mobile_batch(
        spark, [("2018-03-02T10:00:00", "open", 3), ("2018-03-02T10:00:00", "close", 1)]
    )
    sink.write_batch(first, BatchInfo("q1", 0, c))
    sink.write_batch(first, BatchInfo("q1", 0, c))  # replay after a crash: same id, same rows
    assert sink.skipped_batches == 1
    update = mobile_batch(
        spark, [("2018-03-02T10:00:00", "open", 5), ("2018-03-02T10:10:00", "open", 1)]
    )
    sink.write_batch(update, BatchInfo("q1", 1, c))
    assert read(postgres, pg_database) == [
        ("10:00", "close", 1),
        ("10:00", "open", 5),
        ("10:10", "open", 1),
    ]
    ledger = postgres.query(
        pg_database, "SELECT batch_id, rows FROM _slipstream_batches ORDER BY 1"
    )
    assert ledger == [(0, 2), (1, 2)]
    assert postgres.query(pg_database, f"SELECT count(*) FROM {staging_table(c.table)}") == [(0,)]
    assert sink.parallel_batches == (2 if parallel_rows == 0 else 0)
    types = postgres.query(
        pg_database,
        "SELECT data_type FROM information_schema.columns WHERE table_name = "
        "'mobile_action_counts' AND column_name = 'window_start'",
    )
    assert types == [("timestamp with time zone",)]


@pytest.mark.spark
@pytest.mark.postgres
@BOTH_WRITERS
def test_a_nul_character_is_stored_as_the_replacement_character_not_a_stuck_batch(
    spark, postgres, pg_database: str, tmp_path, parallel_rows: int
) -> None:
    """PostgreSQL text refuses U+0000: unhandled, every replay of the batch failed alike. It is
    stored as U+FFFD (documented in sinks/postgres.py), the rest of the text kept."""
    sink = sink_for(f"{postgres.url(pg_database)}?parallel_rows={parallel_rows}")
    c = ctx(tmp_path, table=f"nul_{parallel_rows}")
    batch = mobile_batch(
        spark, [("2018-03-02T10:00:00", "op\u0000en", 2), ("2018-03-02T10:10:00", "\u0000", 1)]
    )
    sink.write_batch(batch, BatchInfo("q1", 0, c))
    assert read(postgres, pg_database, c.table) == [
        ("10:00", "op\ufffden", 2),
        ("10:10", "\ufffd", 1),
    ]


@pytest.mark.spark
@pytest.mark.postgres
def test_a_crashed_attempts_staging_rows_are_never_merged(
    spark, postgres, pg_database: str, tmp_path
) -> None:
    sink = sink_for(f"{postgres.url(pg_database)}?parallel_rows=0")
    c = ctx(tmp_path, mode="append", table="appended")
    batch = mobile_batch(spark, [("2018-03-02T10:00:00", "open", 3)])
    with sink.connect() as conn:
        sink.ensure_schema(conn, "appended", batch.schema, c)
    # An earlier attempt of batch 4 staged rows from the executors, then the driver died.
    stale = [("2018-03-02T09:00:00Z", "2018-03-02T09:10:00Z", "stale", 99)]
    mine = [("2018-03-02T10:00:00Z", "2018-03-02T10:10:00Z", "open", 3)]
    stage = staging_table("appended")
    for part in (0, 1):
        copy_partition(sink.target, stage, batch.columns, "q", 4, "crashed", part, iter(stale))
    copy_partition(sink.target, stage, batch.columns, "q", 4, "mine", 0, iter(mine))
    with sink.connect() as conn, conn.transaction():
        merged = sink.merge_staging(
            conn, "appended", batch.columns, BatchInfo("q", 4, c), "mine", 1
        )
    assert merged == 1  # only this attempt's rows; the merge also cleared the leftovers
    assert postgres.query(pg_database, f"SELECT count(*) FROM {stage}") == [(0,)]
    # And through write_batch: leftovers of a crashed attempt are deleted before staging.
    copy_partition(sink.target, stage, batch.columns, "q", 5, "crashed", 0, iter(stale))
    sink.write_batch(batch, BatchInfo("q", 5, c))  # append mode: a new batch adds rows
    assert read(postgres, pg_database, "appended") == [("10:00", "open", 3), ("10:00", "open", 3)]
    assert postgres.query(pg_database, f"SELECT count(*) FROM {stage}") == [(0,)]


@pytest.mark.spark
@pytest.mark.postgres
def test_staging_shortfall_aborts_the_merge(spark, postgres, pg_database: str, tmp_path) -> None:
    """An UNLOGGED staging table is emptied by a PostgreSQL crash: never merge what is left."""
    sink = sink_for(postgres.url(pg_database))
    c = ctx(tmp_path)
    batch = mobile_batch(spark, [("2018-03-02T10:00:00", "open", 3)])
    with sink.connect() as conn:
        sink.ensure_schema(conn, c.table, batch.schema, c)
        with pytest.raises(SlipstreamError) as err, conn.transaction():
            sink.merge_staging(
                conn, c.table, batch.columns, BatchInfo("q", 0, c), "attempt", staged=5
            )
    assert err.value.code == "SINK_WRITE_FAILED"
    assert postgres.query(pg_database, "SELECT count(*) FROM _slipstream_batches") == [(0,)]


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize("how", ["url", "libpq-env"])
def test_mobile_pipeline_into_postgres_equals_an_independent_count(
    spark, postgres, pg_database: str, tmp_path, monkeypatch, how: str
) -> None:
    from slipstream.testing import PipelineHarness

    if how == "url":
        sink = f"{postgres.url(pg_database)}?parallel_rows=0"
    else:
        for name, value in postgres.env(pg_database).items():
            monkeypatch.setenv(name, value)
        sink = "postgresql"
    files = sorted(SAMPLES.glob("file*.json"))
    with PipelineHarness(spark, "mobile", tmp_path, sink=sink, mode="update") as h:
        for i, path in enumerate(files):
            h.feed(path.read_text(), name=path.name)
            h.process()
            got = table_frame(h.results())
            pd.testing.assert_frame_equal(got, expected_counts(files[: i + 1]))
        assert APP_PASSWORD not in explain(h.prepared)
        view = results_view(h.prepared)  # the dashboard's table, asked of the sink
    assert view is not None and view["title"] == "mobile_action_counts, latest windows first"
    shown = pd.DataFrame(view["rows"], columns=view["columns"])
    want = expected_counts(files).sort_values(["window_start", "action"], ascending=[False, True])
    assert list(shown["action"]) == list(want["action"])
    assert list(shown["count"]) == list(want["count"]) and view["updated"] is not None


@pytest.mark.postgres
def test_check_never_prints_the_password(postgres, pg_database: str, tmp_path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "slipstream",
            "check",
            "mobile",
            "--sink",
            postgres.url(pg_database),
            "--state-dir",
            str(tmp_path),
            "--input",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"postgresql://slipstream_app@127.0.0.1:{postgres.port}/{pg_database}" in done.stdout
    assert "s3cret" not in done.stdout + done.stderr
