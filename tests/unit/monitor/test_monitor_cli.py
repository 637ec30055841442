"""The monitoring commands as a user runs them, in subprocesses: `status`, `dashboard`, and
`stop` ending a real `slipstream run` at a batch boundary, with a later run resuming."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from slipstream.app import operate
from slipstream.checkpoint.lifecycle import last_committed_batch, last_planned_batch
from slipstream.core.files import write_atomically
from slipstream.monitor.backfill import files_read, pending_files, source_log
from slipstream.monitor.eventlog import EventLog, event_log_path, read_events
from slipstream.monitor.events import QueryProgress, RunStarted, RunStopped, format_ts, parse_ts
from slipstream.runtime.ingest_stage import MARK as STAGED
from slipstream.sinks.sqlite import read_table
from tests.helpers import MOBILE_SAMPLES, cli_env, mobile_counts, slipstream

FIXTURES = Path(__file__).parents[2] / "fixtures" / "eventlogs"


def replay(state_dir: Path, fixture: str, ends_before_now: timedelta, name: str) -> None:
    """A recorded log as if it had just been written by this (live) process, as pipeline
    `name`: every timestamp shifted by one amount, so rates and lags stay as recorded."""
    records = [json.loads(line) for line in (FIXTURES / f"{fixture}.jsonl").open()]
    latest = max(datetime.fromisoformat(r["ts"]) for r in records)
    delta = datetime.now(UTC) - ends_before_now - latest

    def shift(value: Any) -> Any:
        parsed = parse_ts(value)
        return value if parsed is None or parsed.year == 1970 else format_ts(parsed + delta)

    with EventLog(event_log_path(state_dir, name)) as log:
        for r in records:
            r["ts"] = shift(r["ts"])
            if r.get("query"):
                r["query"] = name + r["query"][len(r["pipeline"]) :]
            if r.get("queries"):  # a run record names its queries
                r["queries"] = [name + q[len(r["pipeline"]) :] for q in r["queries"]]
            r["pipeline"], r["pid"] = name, os.getpid()
            if "progress" in r:
                r["progress"]["timestamp"] = shift(r["progress"].get("timestamp"))
                times = r["progress"].get("eventTime", {})
                for key in list(times):
                    times[key] = shift(times[key])
            log.append(r)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    replay(tmp_path, "healthy", timedelta(seconds=1), "news")
    replay(tmp_path, "falling_behind", timedelta(seconds=2), "backfill")
    replay(tmp_path, "stalled", timedelta(minutes=3), "clicks")
    replay(tmp_path, "failed", timedelta(seconds=30), "orders")
    return tmp_path


def test_status_json_reports_each_verdict(
    recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first `status` runs as a user types it; the others through the CLI's own `main`
    in this process (the same parser and command, a second fewer each)."""
    from slipstream.app.cli import main

    done = slipstream("status", "--json", "--state-dir", str(recorded), timeout=60)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    health = {q["query"]: (q["health"], q["running"]) for q in payload["queries"]}
    assert health == {
        "backfill.windows": ("falling_behind", True),
        "clicks.sessions": ("stalled", True),
        "news.ingest": ("healthy", True),
        "news.windows": ("healthy", True),
        "orders.to_db": ("failed", False),
    }
    failed = next(q for q in payload["queries"] if q["query"] == "orders.to_db")
    assert failed["error"] and failed["reason"].startswith("failed at ")

    assert main(["status", "orders", "--json", "--state-dir", str(recorded)]) == 0
    one = capsys.readouterr().out
    assert [q["query"] for q in json.loads(one)["queries"]] == ["orders.to_db"]
    assert main(["status", "--state-dir", str(recorded)]) == 0
    table = capsys.readouterr().out
    assert "FALLING BEHIND" in table and "STALLED" in table
    assert main(["status", "nothing", "--state-dir", str(recorded)]) == 1
    assert "no event log of nothing" in capsys.readouterr().err


def test_dashboard_command_serves_a_state_dir(recorded: Path) -> None:
    # -X faulthandler: a process that outlives its SIGTERM shows where it stands (_exit_code)
    command = [sys.executable, "-X", "faulthandler", "-m", "slipstream", "dashboard"]
    command += ["--state-dir", str(recorded)]
    with running(command + ["--port", "0"]) as (proc, lines):
        url = re.search(r"http://\S+", next(lines, ""))
        assert url is not None
        status = json.loads(get(url.group(0) + "api/status"))
        assert {q["pipeline"] for q in status["queries"]} == {
            "news",
            "backfill",
            "clicks",
            "orders",
        }
        assert json.loads(get(url.group(0) + "api/results"))["rows"] == []  # no such pipelines
        proc.send_signal(signal.SIGTERM)
        assert _exit_code(proc, lines) == 0


def _exit_code(proc: subprocess.Popen[str], lines: Iterator[str], timeout: float = 30) -> int:
    """`proc`'s exit code; one still running after `timeout` is aborted and the test fails
    with what it printed since, its threads' stacks among it (Python's faulthandler)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        proc.wait(timeout=timeout)
        pytest.fail(f"still running {timeout:.0f} s after SIGTERM:\n" + "\n".join(lines))


# --------------------------------------------------------------------------- stop


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


@contextmanager
def running(command: list[str], limit_s: float = 240) -> Iterator[tuple[Any, Iterator[str]]]:
    """A CLI process whose stdout is read line by line; killed if still running after
    `limit_s` (a watchdog, so a hung child fails the test instead of hanging it)."""
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
        start_new_session=True,
    )
    watchdog = threading.Timer(limit_s, proc.kill)
    watchdog.start()
    assert proc.stdout is not None
    try:
        yield proc, _lines(proc.stdout)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def _lines(stream: IO[str]) -> Iterator[str]:
    for line in stream:
        yield line.rstrip("\n")


BATCH_LINE = re.compile(r"^mobile\.counts\s+batch\s+(\d+) \|\s+([\d,]+) rows")


def sample(name: str) -> list[str]:
    return (MOBILE_SAMPLES / name).read_text().splitlines()


@pytest.mark.spark
@pytest.mark.slow
def test_stop_ends_a_running_pipeline_at_a_batch_boundary(tmp_path: Path) -> None:
    landing, state = tmp_path / "landing", tmp_path / "state"
    landing.mkdir()
    sent: list[str] = []
    for name in ("file1.json", "file2.json"):
        write_atomically(landing, name, sample(name))
        sent += sample(name)
    run = ["run", "mobile", "--input", str(landing), "--state-dir", str(state)]
    command = [sys.executable, "-m", "slipstream", *run, "--metrics-port", "0", "--dashboard", "0"]
    seen: list[str] = []
    with running(command) as (proc, lines):
        addresses: dict[str, str] = {}
        rows = 0
        for line in lines:  # the run prints its addresses, then one line per batch
            seen.append(line)
            if line.startswith(("dashboard ", "metrics ")):
                kind, url = line.split()[:2]
                addresses[kind] = url
            match = BATCH_LINE.match(line)
            rows += int(match.group(2).replace(",", "")) if match else 0
            if rows == len(sent):
                break
        else:
            pytest.fail("the run ended before it processed the input:\n" + "\n".join(seen))
        # the servers of the run answer while it runs
        metrics = get(addresses["metrics"])
        assert 'slipstream_batch_input_rows{pipeline="mobile",query="mobile.counts"}' in metrics
        status = json.loads(get(addresses["dashboard"] + "api/status"))
        assert {q["query"]: q["running"] for q in status["queries"]} == {"mobile.counts": True}
        assert json.loads(get(addresses["dashboard"] + "api/results"))["rows"]

        stopped = slipstream("stop", "mobile", "--state-dir", str(state), timeout=180)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"asked mobile (pid {proc.pid}) to stop" in stopped.stdout
        assert proc.wait(timeout=120) == 0, "\n".join(seen + list(lines))
    assert "stop requested by `slipstream stop`" in stopped.stdout
    assert "at a batch boundary" in stopped.stdout

    # no half batch: each query's last planned batch is its last committed batch
    root = state / "checkpoints" / "mobile"
    for query in ("counts",):  # it writes the quarantine too: no query beside it
        planned = last_planned_batch(root / query)
        assert planned is not None and planned == last_committed_batch(root / query)
    log = read_events(state / "events" / "mobile.jsonl")
    assert isinstance(log[-1], RunStopped) and log[-1].pid == proc.pid
    assert "slipstream stop" in (log[-1].reason or "")
    assert not (root / ".slipstream.stop").exists()

    done = slipstream("status", "mobile", "--json", "--state-dir", str(state), timeout=60)
    verdicts = {q["query"]: q["health"] for q in json.loads(done.stdout)["queries"]}
    assert verdicts == {"mobile.counts": "stopped"}
    assert not slipstream("stop", "mobile", "--state-dir", str(state)).returncode  # idempotent

    # more input while stopped; a backfill run resumes from the checkpoint
    # the query that reads the raw files: the output, or under the ingest stage its ingest query
    raw = "quarantine.actions" if (root / "counts" / STAGED).is_file() else "counts"
    read = source_log(root / raw)
    assert files_read(read) == {landing / "file1.json", landing / "file2.json"}
    for name in ("file3.json", "file4.json"):
        write_atomically(landing, name, sample(name))
        sent += sample(name)
    assert pending_files(landing, read) == {landing / "file3.json", landing / "file4.json"}
    resumed = slipstream(*run, "--trigger", "available-now", timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    runs = [e for e in read_events(state / "events" / "mobile.jsonl") if isinstance(e, RunStarted)]
    second = [
        e
        for e in read_events(state / "events" / "mobile.jsonl")
        if isinstance(e, QueryProgress) and e.query == "mobile.counts" and e.ts > runs[-1].ts
    ]
    assert sum(e.input_rows for e in second) == 4  # file3 and file4 only: nothing read twice
    table = read_table(state / "slipstream.db", "mobile_action_counts")
    got = sorted((r["window_start"], r["action"], r["count"]) for r in table)
    assert got == sorted(mobile_counts(sent).itertuples(index=False, name=None))


def test_status_of_a_pipeline_shows_its_outputs_latest_rows_from_the_sink(tmp_path: Path) -> None:
    replay(tmp_path, "healthy", timedelta(seconds=1), "mobile")
    rows = [(f"2026-01-01T10:{m:02d}:00Z", "open", m) for m in range(8)]
    with sqlite3.connect(tmp_path / "slipstream.db") as conn:  # mobile's default sink
        conn.execute(
            "CREATE TABLE mobile_action_counts (window_start TEXT, action TEXT, count INTEGER)"
        )
        conn.executemany("INSERT INTO mobile_action_counts VALUES (?, ?, ?)", rows)
    out = io.StringIO()
    assert operate.status(tmp_path, "mobile", True, out) == 0
    latest = json.loads(out.getvalue())["latest_rows"]["mobile.counts"]
    assert latest["columns"] == ["window_start", "action", "count"]
    assert latest["rows"] == [list(r) for r in reversed(rows)][:5]  # the newest five
    out = io.StringIO()
    assert operate.status(tmp_path, "mobile", False, out) == 0
    text = out.getvalue()
    assert "latest rows of mobile.counts (sqlite " in text and "2026-01-01T10:07:00Z" in text
    assert "2026-01-01T10:02:00Z" not in text
