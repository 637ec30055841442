"""Pipelines through a real Spark Connect server (`--remote sc://...`), started from the
installed pyspark (tests/connect_server.py; one server for this module).

The CLI runs in a subprocess that cannot start a JVM (no java on PATH, JAVA_HOME pointing
nowhere): everything Spark does happens in the server. Outputs are compared with independent
pandas computations over the same input (tests/helpers.py, tests/trending_reference.py); plans
read through Connect with the plans the classic session reads. Paths are given relative to the
client's folder, and the server runs in another, so a path that reached the server unresolved
would miss. The refusals that need no server are tested at the end."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.app import commands, operate
from slipstream.core.backoff import SlowWorker
from slipstream.errors import SlipstreamError
from slipstream.runtime import runner
from slipstream.settings.config import load_settings
from slipstream.settings.connect import start_query
from slipstream.sinks.sqlite import read_table
from slipstream.tools.generators.trending import TrendingSpec, generate, write_catalog
from tests.connect_server import ConnectServer, running_connect_server, unavailable
from tests.e2e.crash.test_crash import read_pg
from tests.helpers import MOBILE_SAMPLES, cli_env, mobile_counts, quarantine_records, slipstream
from tests.services import free_port
from tests.trending_reference import article_views, counted_events, iso, parse_line, table_rows

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WATERMARK = WINDOW = timedelta(minutes=10)
SLIDE = timedelta(minutes=1)
SPEC = TrendingSpec(
    articles=30,
    users=200,
    rate=0.5,  # 900 events over 30 minutes of event time, one file a minute: the archive
    events=900,  # (append) gets the windows the watermark (newest - 10m) has finalised
    file_every=timedelta(minutes=1),
    seed=15,
    out_of_order=0.05,
    late=0.0,
    duplicates=0.05,
    malformed=0.03,
    unknown_article=0.03,
)


@pytest.fixture(scope="module")
def connect_server() -> Iterator[ConnectServer | str]:
    with running_connect_server() as server:
        yield server


@pytest.fixture
def server(connect_server: ConnectServer | str) -> ConnectServer:
    if isinstance(connect_server, str):
        unavailable(connect_server)
    assert isinstance(connect_server, ConnectServer)
    return connect_server


def no_jvm_env() -> dict[str, str]:
    """The client's environment: no java to start, so a JVM here would fail the run."""
    return cli_env(JAVA_HOME="/nonexistent", PATH=str(Path(sys.executable).parent))


def remote_cli(server: ConnectServer, cwd: Path, *args: str) -> str:
    done = slipstream(*args, "--remote", server.url, env=no_jvm_env(), cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert server.process is not None and server.process.poll() is None
    return done.stdout


class Forwarder:
    """A TCP forwarder from a port of its own to the server's: what makes the server "start
    accepting" at a moment the test chooses, without a second server."""

    def __init__(self, port: int, target: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", port))
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed: the test is over
            while True:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target))
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


def test_a_run_waits_for_a_connect_server_that_does_not_accept_yet_saying_so(
    server: ConnectServer, tmp_path: Path
) -> None:
    """A server that starts slowly (issue 45: a busy machine) is waited for: the client says
    so, the server begins to accept while it waits (a forwarder opens the port then), and the
    run completes, its table equal to pandas' counts."""
    lines = []
    for sample in sorted(MOBILE_SAMPLES.iterdir()):
        lines += sample.read_text().splitlines()
    port = free_port()
    command = [
        sys.executable, "-m", "slipstream", "run", "mobile", "--input", str(MOBILE_SAMPLES),
        "--trigger", "available-now", "--state-dir", "st", "--sink", "sqlite:out.db",
        "--remote", f"sc://127.0.0.1:{port}/;user_id=tests", "--connect-wait", "10m",
    ]  # fmt: skip
    run = subprocess.Popen(
        command, cwd=tmp_path, env=no_jvm_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert run.stdout is not None
    before = []
    while not any("waiting for the Spark Connect server" in line for line in before):
        line = run.stdout.readline()
        assert line, "".join(before)  # the run ended without waiting
        before.append(line)
    forwarder = Forwarder(port, server.port)
    try:
        after, _ = run.communicate(timeout=600)
    finally:
        forwarder.close()
    said = "".join(before) + after
    assert run.returncode == 0, said[-3000:]
    assert f"the Spark Connect server at 127.0.0.1:{port} accepts connections (waited" in said
    assert "user_id" not in said
    with sqlite3.connect(tmp_path / "out.db") as conn:
        got = sorted(conn.execute("SELECT window_start, action, count FROM mobile_action_counts"))
    assert got == sorted(mobile_counts(lines).itertuples(index=False, name=None))


def summary_of(stdout: str, query: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(f"summary {query}:"))


def test_trending_to_sqlite_and_parquet_through_connect_equals_pandas(
    server: ConnectServer, tmp_path: Path
) -> None:
    write_catalog(tmp_path / "catalog.csv", SPEC)
    generate(SPEC, tmp_path / "input")
    stdout = remote_cli(
        server, tmp_path,
        "run", "trending", "--input", "events=input", "--input", "catalog=catalog.csv",
        "--sink", "views=sqlite:out/serving.db", "--sink", "archive=parquet:out/archive",
        "--trigger", "available-now", "--state-dir", "state",
    )  # fmt: skip

    lines = [
        line for path in sorted((tmp_path / "input").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]  # fmt: skip
    now = datetime.now(UTC)
    events, stats = counted_events([lines], WATERMARK, now)  # one batch: nothing is late
    expected = article_views(events, tmp_path / "catalog.csv", WINDOW, SLIDE)
    # the foreachBatch function ran in the server's Python worker, on the same files
    views = read_table(tmp_path / "out" / "serving.db", "article_views")
    assert expected and table_rows(views) == expected
    # the archive: the windows the watermark (newest valid ts - 10m) has finalised, in Parquet
    newest = max(r["ts"] for line in lines if (r := parse_line(line, now)) is not None)
    final_before = iso(newest - WATERMARK)
    archived = pd.read_parquet(tmp_path / "out" / "archive")
    got = {(_iso(r.window_start), r.article_id, int(r.views)) for r in archived.itertuples()}
    want = {(row[0], row[2], row[5]) for row in expected if row[1] <= final_before}
    assert want and got == want
    # the listener ran in the client: its summary counts what pandas counts
    line = summary_of(stdout, "trending.views")
    assert f"{stats['invalid']:,} quarantined" in line, line
    assert f"{stats['duplicates']:,} duplicates dropped" in line, line
    # the quarantine, written by the views query from its own read in the server (its
    # foreachBatch sink runs there, off the query's thread): each rejected line once
    quarantined = quarantine_records(tmp_path / "state" / "quarantine" / "trending" / "events")
    assert sorted(r["raw"] for r in quarantined) == sorted(
        line for line in lines if line.strip() and parse_line(line, now) is None
    )


def test_mobile_to_postgres_through_connect_and_its_status(
    server: ConnectServer, postgres: Any, pg_database: str, tmp_path: Path
) -> None:
    """The PostgreSQL sink under Connect: its merge runs in the server's foreachBatch worker,
    its staging COPY in the server's executors (`parallel_rows=0`: every batch); the password,
    given in the URL, shows up in no output, log or event of client or server."""
    landing = tmp_path / "landing"
    landing.mkdir()
    lines = []
    for sample in sorted(MOBILE_SAMPLES.iterdir()):
        (landing / sample.name).write_text(sample.read_text())
        lines += sample.read_text().splitlines()
    stdout = remote_cli(
        server, tmp_path,
        "run", "mobile", "--input", "landing", "--trigger", "available-now", "--state-dir", "st",
        "--sink", f"{postgres.url(pg_database)}?parallel_rows=0",
    )  # fmt: skip

    rows = read_pg(postgres, pg_database, "mobile_action_counts")
    got = pd.DataFrame(
        {
            "window_start": [_iso(v) for v in rows["window_start"]],
            "action": rows["action"],
            "count": rows["count"],
        }
    )
    got = got.sort_values(["window_start", "action"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, mobile_counts(lines), check_dtype=False)
    assert f"summary mobile.counts: 2 batches, {len(lines):,} records read" in stdout
    # exactly once through the ledger; the staging table holds nothing once merged
    ledger = postgres.query(pg_database, "SELECT batch_id, rows FROM _slipstream_batches")
    assert sorted(b for b, _ in ledger) == [0, 1] and sum(n for _, n in ledger) >= len(got)
    staged = postgres.query(
        pg_database, 'SELECT count(*) FROM "_slipstream_stage_mobile_action_counts"'
    )
    assert staged == [(0,)]
    # the staging ran in the server's executors, through mapInArrow, never printing the password
    events = "".join(p.read_text(errors="replace") for p in server.event_logs())
    assert "MapInArrow" in events and "stage(" in events
    for text in (stdout, server.log.read_text(errors="replace"), events):
        assert "s3cret" not in text
    # the listener ran in the client: its events carry the pid that wrote run_started
    records = [
        json.loads(x) for x in (tmp_path / "st/events/mobile.jsonl").read_text().splitlines()
    ]
    kinds = [r["event"] for r in records]
    assert kinds[0] == "run_started" and kinds.count("progress") == 2  # its 2 batches
    assert {r["pid"] for r in records} == {records[0]["pid"]}
    # status reads the event log the client's listener wrote (its latest rows show only a
    # state dir's default sink, not this database)
    out = io.StringIO()
    assert operate.status(tmp_path / "st", "mobile", True, out) == 0
    report = json.loads(out.getvalue())
    assert "s3cret" not in out.getvalue()
    queries = {q["query"]: q for q in report["queries"]}
    assert set(queries) == {"mobile.counts"}  # it writes its quarantine: no query beside it
    assert queries["mobile.counts"]["total_input_rows"] == len(lines)
    assert queries["mobile.counts"]["health"] == "stopped"


def _iso(value: Any) -> str:
    if isinstance(value, str):
        return value
    stamp = pd.Timestamp(value)
    return iso(stamp.tz_localize(UTC) if stamp.tzinfo is None else stamp.to_pydatetime())


def _plans(text: str) -> str:
    """What `check` printed after Spark analyzed the plans (its timing line dropped), but the
    state partitions, state store and file reads lines: a run's own choice on a local master,
    the server's through Connect (runtime/partitions.py)."""
    after = text.split(" s)\n", 1)[1]
    own = ("state partitions ", "state store ", "file reads: ")
    return "\n".join(x for x in after.split("\n") if not x.startswith(own))


def test_check_through_connect_reads_the_classic_plans_and_refuses_what_cannot_work(
    server: ConnectServer, spark: SparkSession, tmp_path: Path
) -> None:
    generate(replace(SPEC, events=50), tmp_path / "input")
    write_catalog(tmp_path / "catalog.csv", SPEC)
    flags = {
        "input": [f"events={tmp_path / 'input'}", f"catalog={tmp_path / 'catalog.csv'}"],
        "state_dir": str(tmp_path / "state"),
        "ingest_stage": False,  # a run through Connect never stages (ingest_stage.applies)
    }
    classic = io.StringIO()
    code = commands.check(load_settings("trending", flags, environ={}), classic, spark=spark)
    assert code == 0, classic.getvalue()
    args = [f"--input={v}" for v in flags["input"]]
    done = slipstream(
        "check", "trending", *args, "--state-dir", flags["state_dir"], "--remote", server.url,
        env=no_jvm_env(), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    plans = _plans(done.stdout).split("\n\nok: ", 1)[0]
    assert plans == _plans(classic.getvalue()).split("\n\nok: ", 1)[0]
    assert "state partitions the session's default: a cluster's" in done.stdout
    assert "state partitions 1: a live run's small batches" in classic.getvalue()
    assert "state store HDFSBackedStateStoreProvider: a live run's" in classic.getvalue()
    assert "state store the session's (RocksDB): state off the JVM's heap" in done.stdout
    assert "window      sliding 10m every 1m on ts" in plans  # the plan was read, not empty
    # the archive on, printing on the server: refused under Connect before Spark starts
    done = slipstream(
        "check", "trending", *args, "--sink=archive=console", "--state-dir", flags["state_dir"],
        "--remote", server.url, env=no_jvm_env(), timeout=600,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refused [CONNECT_NOT_SUPPORTED] output trending.archive: under Spark" in done.stdout
    assert "window      sliding" not in done.stdout  # no plan: nothing was asked of Spark
    # a static setting the server refuses is named, not silently ignored
    done = slipstream(
        "check", "mobile", "--input", str(MOBILE_SAMPLES), "--remote", server.url,
        "--conf", "spark.sql.ui.retainedExecutions=5", env=no_jvm_env(), timeout=600,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "[CONNECT_NOT_SUPPORTED]" in done.stderr
    assert "spark.sql.ui.retainedExecutions" in done.stderr


# --- refused before Spark starts (no server needed) -----------------------------------------


def _code(call: Any) -> str:
    with pytest.raises(SlipstreamError) as raised:
        call()
    return raised.value.code


def test_remote_refuses_master_server_settings_and_sinks_that_cannot_work() -> None:
    url = "sc://127.0.0.1:15002"
    both = {"remote": url, "master": "local[2]"}
    assert _code(lambda: load_settings("mobile", both, environ={})) == "CONNECT_NOT_SUPPORTED"
    memory = {"remote": url, "conf": ["spark.driver.memory=2g"]}
    assert _code(lambda: load_settings("mobile", memory, environ={})) == "CONNECT_NOT_SUPPORTED"
    flags = {"remote": url, "sink": ["console"], "input": [str(MOBILE_SAMPLES)]}
    settings = load_settings("mobile", flags, environ={})
    assert _code(lambda: runner.prepare(settings)) == "CONNECT_NOT_SUPPORTED"
    flags["sink"] = ["postgresql://u@127.0.0.1/db"]  # stages through mapInArrow: no RDD
    runner.prepare(load_settings("mobile", flags, environ={}))
    assert _code(lambda: load_settings("mobile", {"remote": "127.0.0.1:15002"})) == (
        "CONFIG_BAD_VALUE"
    )


def test_remote_from_spark_remote_makes_every_path_absolute(tmp_path: Path) -> None:
    environ = {"SPARK_REMOTE": "sc://127.0.0.1:15002"}
    flags = {"input": ["landing"], "sink": ["parquet:out"], "state_dir": "st"}
    settings = load_settings("mobile", flags, environ=environ)
    assert settings.remote == "sc://127.0.0.1:15002"
    assert settings.input[""] == Path.cwd() / "landing"
    assert settings.state_dir == Path.cwd() / "st"
    assert settings.checkpoint_root.is_absolute()
    assert settings.sink[""].target == str(Path.cwd() / "out")
    classic = load_settings("mobile", flags, environ={})
    assert classic.remote is None and classic.state_dir == Path("st")


class _Writer:
    """A DataStreamWriter whose start() fails with `errors` in turn, then starts."""

    def __init__(self, *errors: str) -> None:
        self.errors = list(errors)
        self.calls = 0

    def start(self) -> str:
        self.calls += 1
        if self.errors:
            raise RuntimeError(self.errors.pop(0))
        return "started"


def test_a_query_whose_server_worker_was_slow_to_connect_back_is_started_again() -> None:
    slow = "[PYTHON] Python worker failed to connect back."
    now = [0.0]
    paused: list[float] = []

    def wait(seconds: float) -> None:
        paused.append(seconds)
        now[0] += seconds + 10  # each failed start also takes Spark's 10 s

    def start(writer: _Writer, budget: float = 300.0) -> str:
        return start_query(writer, slow=SlowWorker(budget), wait=wait, clock=lambda: now[0])

    writer = _Writer(slow, slow)
    assert start(writer) == "started" and writer.calls == 3 and paused == [2, 4]
    paused.clear()
    now[0] = 0.0
    with pytest.raises(RuntimeError, match="connect back"):
        start(_Writer(*[slow] * 20), budget=50)  # the budget spent, the failure stands
    assert paused == [2, 4, 8] and now[0] <= 50
    other = _Writer("[STREAM_FAILED] something else")
    with pytest.raises(RuntimeError, match="STREAM_FAILED"):
        start(other)
    assert other.calls == 1  # any other failure is not retried
