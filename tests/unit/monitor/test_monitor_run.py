"""The pieces that put monitoring into runs, without Spark: stop requests, the backfill bar,
results views, the servers `start_monitoring` starts, and the CLI flags."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import sqlite3
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from slipstream.app.parser import build_parser, settings_from_args
from slipstream.checkpoint.lifecycle import CheckpointLock
from slipstream.errors import ConfigError
from slipstream.monitor.backfill import BackfillBar, files_read, pending_files
from slipstream.monitor.events import QueryProgress, QueryStarted, format_ts
from slipstream.monitor.serve import start_monitoring
from slipstream.monitor.status import query_status
from slipstream.runtime import runner
from slipstream.runtime.control import REQUEST_FILE, StopControl, read_request, request_stop
from slipstream.settings.config import DEFAULT_DASHBOARD_PORT, load_settings
from slipstream.sinks.database import LEDGER_TABLE
from slipstream.sinks.sqlite import table_view
from slipstream.tools.views import results_view

# --------------------------------------------------------------------------- stop requests


def test_a_stop_request_names_the_run_holding_the_checkpoint(tmp_path: Path) -> None:
    assert request_stop(tmp_path) is None  # nobody holds it: nothing to ask
    assert not (tmp_path / REQUEST_FILE).exists()
    with CheckpointLock(tmp_path):
        control = StopControl(tmp_path)
        assert not control()
        request = request_stop(tmp_path, "maintenance")
        assert request is not None and request.pid == control.pid
        assert control() and control.reason == "maintenance"
        control.clear()
        assert read_request(tmp_path) is None and not control()


_HOLD = """
import fcntl, sys, time
from slipstream.checkpoint.lifecycle import ofd_lock
handle = open(sys.argv[1], "a+")
assert ofd_lock(handle.fileno(), fcntl.F_WRLCK)  # the lock a run takes
print("locked", flush=True)
if sys.argv[2] == "write-later":
    sys.stdin.readline()  # the test says when: the pid is written after the lock is taken
    handle.seek(0); handle.truncate(); handle.write('{"pid": %d}' % __import__("os").getpid())
    handle.flush()
    print("written", flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("left", ["", '{"pid": 999999999, "since": "earlier"}'])
def test_stop_never_takes_an_unwritten_or_stale_lock_file_for_the_holder(
    tmp_path: Path, left: str
) -> None:
    """A run takes the lock, then writes its pid over the last run's. A `stop` in between
    must not ask a pid that is not the holder (the request would be ignored and `stop` would
    report success while the run goes on): it waits for the pid, or refuses with a code."""
    import subprocess
    import sys

    from slipstream.errors import SlipstreamError

    lock = tmp_path / ".slipstream.lock"
    lock.write_text(left)  # empty, or the pid of a run long gone

    def hold(mode: str) -> subprocess.Popen[str]:
        """A process that takes the lock (and writes its pid when told, for `write-later`)."""
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLD, str(lock), mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
        return proc

    holder = hold("never-write")
    try:
        with pytest.raises(SlipstreamError) as err:
            request_stop(tmp_path, settle=0.3)
        assert err.value.code == "LOCK_HOLDER_UNKNOWN"
        assert read_request(tmp_path) is None  # nothing was asked of anyone
    finally:
        holder.kill()
        holder.wait()
    writer = hold("write-later")
    try:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
        request = request_stop(tmp_path, settle=30)  # sees the pid once it is written
        assert request is not None and request.pid == writer.pid
    finally:
        writer.kill()
        writer.wait()


def test_a_request_left_behind_never_stops_a_later_run(tmp_path: Path) -> None:
    with CheckpointLock(tmp_path):
        request_stop(tmp_path)
    left = read_request(tmp_path)
    assert left is not None  # the run ended on its own before it saw the request
    later = StopControl(tmp_path, pid=left.pid + 1)
    assert not later() and read_request(tmp_path) is None


def test_a_signal_asks_through_the_same_control(tmp_path: Path) -> None:
    control = StopControl(tmp_path)
    control.request("SIGTERM received")
    assert control() and control.reason == "SIGTERM received"


# --------------------------------------------------------------------------- backfill bar


def spark_source_log(log_dir: Path, batch: int, files: list[Path], compact: bool = False) -> None:
    """A file-source log entry in Spark's format: a version line, then one JSON line a file."""
    log_dir.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [
        json.dumps({"path": f.absolute().as_uri(), "timestamp": 1, "batchId": batch}) for f in files
    ]
    name = f"{batch}.compact" if compact else str(batch)
    (log_dir / name).write_text("\n".join(lines) + "\n")


def progress(log_offset: int) -> dict[str, Any]:
    """A progress record's source part, as Spark writes it for the file source."""
    return {"sources": [{"endOffset": {"logOffset": log_offset}}]}


def test_the_backfill_bar_counts_files_from_the_source_log(tmp_path: Path) -> None:
    landing = tmp_path / "in dir"  # a space: Spark writes the path URI-encoded
    landing.mkdir()
    files = [landing / f"f{i}.json" for i in range(4)]
    for f in files:
        f.write_text("{}\n")
    (landing / ".f9.json.tmp").write_text("")  # in flight: Spark skips dot and underscore files
    (landing / "_SUCCESS").write_text("")
    log = tmp_path / "ckpt" / "sources" / "0"
    spark_source_log(log, 0, files[:1])  # read by an earlier run
    pending = pending_files(landing, log)
    assert pending == set(files[1:])

    out = io.StringIO()
    bar = BackfillBar("mobile.counts", log, pending, out, enabled=True)
    base = {"query": "mobile.counts", "pipeline": "mobile"}
    bar({**base, "event": "started"})
    spark_source_log(log, 1, files[1:3])
    spark_source_log(log, 2, files[3:], compact=True)  # planned; every 10th is compacted
    bar({**base, "event": "progress", "progress": progress(1)})
    assert bar.bar.done == 2  # files of batches that ran, not of the one planned next
    bar({**base, "event": "progress", "progress": progress(2)})
    bar({**base, "event": "terminated", "exception": None})
    assert files_read(log) == set(files)
    text = out.getvalue()  # forced on, not a terminal: no bar drawn, one summary line
    assert text.splitlines() == [text.rstrip("\n")]
    assert text.startswith("backfill mobile.counts (files): 3/3 in")


def test_the_bar_stays_off_when_output_is_not_a_terminal(tmp_path: Path) -> None:
    out = io.StringIO()
    bar = BackfillBar("p.results", tmp_path, {tmp_path / "a"}, out)
    assert not bar.enabled
    bar({"query": "p.results", "event": "started"})
    bar.close()
    assert out.getvalue() == ""


# --------------------------------------------------------------------------- results views


def test_the_default_results_view_shows_newest_rows_first(tmp_path: Path) -> None:
    db = tmp_path / "results.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE word_counts (word TEXT PRIMARY KEY, count INTEGER)")
        conn.executemany("INSERT INTO word_counts VALUES (?, ?)", [("a", 1), ("b", 5), ("c", 2)])
        conn.execute(
            f"CREATE TABLE {LEDGER_TABLE} (query_id TEXT, batch_id INTEGER, pipeline TEXT, "
            "target_table TEXT, rows INTEGER, committed_at TEXT)"
        )
        conn.execute(
            f"INSERT INTO {LEDGER_TABLE} VALUES ('q', 0, 'wordcount', 'word_counts', 3, "
            "'2026-01-15 09:30:00')"
        )
    view = table_view(db, "word_counts", order_by="rowid DESC", limit=2)
    assert view == {
        "columns": ["word", "count"],
        "rows": [["c", 2], ["b", 5]],
        "updated": "2026-01-15T09:30:00Z",
    }
    assert table_view(tmp_path / "none.db", "word_counts", order_by="rowid")["rows"] == []

    wordcount = results_view(_prepared("wordcount", {"sink": f"sqlite:{db}"}))
    assert wordcount is not None and wordcount["rows"] == [["b", 5], ["c", 2], ["a", 1]]
    assert wordcount["title"] == "word_counts, most frequent first"


def _prepared(pipeline: str, flags: dict[str, Any]) -> runner.Prepared:
    return runner.prepare(load_settings(pipeline, flags, environ={}), check_source=False)


# --------------------------------------------------------------------------- servers


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


def test_start_monitoring_serves_what_the_settings_ask_for(tmp_path: Path) -> None:
    flags = {"state_dir": tmp_path, "metrics_port": 0, "dashboard": 0}
    settings = load_settings("mobile", flags, environ={})
    with start_monitoring(settings, partial(results_view, _prepared("mobile", flags))) as handles:
        assert handles.metrics is not None and handles.dashboard is not None
        assert len(handles.handlers) == 1  # metrics are fed from the listener's records
        out = io.StringIO()
        handles.announce(out)
        assert out.getvalue().splitlines() == [
            f"dashboard   http://127.0.0.1:{handles.dashboard.port}/",
            f"metrics     http://127.0.0.1:{handles.metrics.port}/metrics",
        ]
        assert b"slipstream_watermark_lag_seconds" in get(handles.metrics.url)
        results = json.loads(get(handles.dashboard.url + "api/results"))
        assert results["title"] == "mobile_action_counts, latest windows first"
    with start_monitoring(load_settings("mobile", {"state_dir": tmp_path}, environ={})) as none:
        assert none.handlers == [] and none.addresses() == []


def test_a_taken_port_is_refused_before_spark_starts(tmp_path: Path, taken_port: int) -> None:
    settings = load_settings("mobile", {"metrics_port": taken_port}, environ={})
    with pytest.raises(ConfigError) as refused:
        start_monitoring(settings)
    assert refused.value.code == "PORT_IN_USE"
    assert f"--metrics-port {taken_port}" in refused.value.message


def test_the_default_dashboard_port_falls_back_to_a_free_one(tmp_path: Path) -> None:
    with socket.socket() as sock:
        with contextlib.suppress(OSError):  # someone else holds it: the same fallback
            sock.bind(("127.0.0.1", DEFAULT_DASHBOARD_PORT))
        settings = load_settings("mobile", {"dashboard": DEFAULT_DASHBOARD_PORT}, environ={})
        with start_monitoring(settings) as handles:
            assert handles.dashboard is not None
            assert handles.dashboard.port != DEFAULT_DASHBOARD_PORT


def test_dashboard_flag_takes_an_optional_port() -> None:
    parser = build_parser()
    bare = parser.parse_args(["run", "mobile", "--dashboard", "--input", "x"])
    assert settings_from_args(bare).dashboard == DEFAULT_DASHBOARD_PORT
    given = parser.parse_args(["run", "mobile", "--dashboard", "0", "--metrics-port", "9108"])
    assert (settings_from_args(given).dashboard, settings_from_args(given).metrics_port) == (
        0,
        9108,
    )
    assert settings_from_args(parser.parse_args(["run", "mobile"])).dashboard is None


# --------------------------------------------------------------------------- verdicts


def sparse_batches(gap_s: float, watermark_batches: bool = False) -> list[Any]:
    """Batches of 4 rows taking 2 s, `gap_s` apart: Spark's input rate (rows over the time since
    the previous trigger, ~15 ms with the default trigger) dwarfs the processed rate. With
    `watermark_batches`, each is followed at once by a batch without input (how a stateful
    query moves its watermark when it has caught up)."""
    t0 = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)
    events: list[Any] = [QueryStarted(t0, "p", "p.results", "q", "r", 1)]
    start = t0
    rows = [4, 0] * 5 if watermark_batches else [4] * 5
    for batch, n in enumerate(rows):
        end = start + timedelta(seconds=2)
        progress = {
            "batchId": batch,
            "timestamp": format_ts(start),
            "batchDuration": 2000,
            "numInputRows": n,
            "inputRowsPerSecond": 260.0 if n else 0.0,
            "processedRowsPerSecond": 2.0 if n else 0.0,
            "durationMs": {"addBatch": 1900, "triggerExecution": 2000},
        }
        events.append(QueryProgress(end, "p", "p.results", "q", "r", 1, progress=progress))
        start = end + timedelta(seconds=gap_s if n or not watermark_batches else 0.01)
    return events


def test_small_batches_with_idle_gaps_keep_up() -> None:
    events = sparse_batches(gap_s=20)
    now = events[-1].ts + timedelta(seconds=1)
    (status,) = query_status(events, now, pid_check=lambda pid: True)
    assert status.health == "healthy"
    assert status.reason == "keeping up: waits for data between batches (last: 4 rows in 2.0s)"
    (busy,) = query_status(sparse_batches(gap_s=0.01), now, pid_check=lambda pid: True)
    assert busy.health == "falling_behind"
    # the demo's pattern: a file lands as soon as the previous one is done
    caught_up = sparse_batches(gap_s=0.01, watermark_batches=True)
    (demo,) = query_status(caught_up, now, pid_check=lambda pid: True)
    assert demo.health == "healthy" and demo.reason.startswith("keeping up: waits for data")
