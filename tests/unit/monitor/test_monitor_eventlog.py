"""The event log writer (rotation, thread safety) and its readers."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from slipstream.monitor.eventlog import (
    EventLog,
    EventLogFollower,
    event_log_path,
    log_files,
    pipelines_in,
    read_events,
)
from slipstream.monitor.events import QueryIdle, QueryProgress, format_ts

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def progress(seq: int, pipeline: str = "trending", query: str = "trending.q") -> dict[str, Any]:
    return {
        "event": "progress",
        "ts": format_ts(T0 + timedelta(milliseconds=seq)),
        "pipeline": pipeline,
        "query": query,
        "query_id": "8c1f3f0e-0000-4000-8000-000000000001",
        "run_id": "8c1f3f0e-0000-4000-8000-000000000002",
        "pid": 4242,
        "progress": {"batchId": seq, "numInputRows": 10, "inputRowsPerSecond": float("nan")},
    }


def batch_ids(events: list[Any]) -> list[int]:
    return [e.batch_id for e in events if isinstance(e, QueryProgress)]


def test_records_are_written_one_json_object_per_line(tmp_path: Path) -> None:
    path = event_log_path(tmp_path, "trending")
    with EventLog(path) as log:
        log.append(progress(0))
        log.append(QueryIdle(T0, "trending", "trending.windows", "qid", "rid", 1))
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["progress"]["inputRowsPerSecond"] is None  # NaN cannot travel as JSON
    assert json.loads(lines[1])["event"] == "idle"
    assert batch_ids(read_events(path)) == [0]


def test_rotation_keeps_the_log_bounded_and_the_newest_records(tmp_path: Path) -> None:
    path = tmp_path / "events" / "trending.jsonl"
    max_bytes, backups = 4_000, 2
    with EventLog(path, max_bytes=max_bytes, backups=backups) as log:
        for seq in range(2_000):
            log.append(progress(seq))
    files = log_files(path)
    assert [f.name for f in files] == ["trending.jsonl.2", "trending.jsonl.1", "trending.jsonl"]
    assert all(f.stat().st_size <= max_bytes for f in files)
    assert sum(f.stat().st_size for f in files) <= (backups + 1) * max_bytes
    ids = batch_ids(read_events(path))
    assert ids[-1] == 1_999
    assert ids == list(range(ids[0], 2_000))  # contiguous: oldest backup first, nothing lost


def test_without_backups_rotation_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with EventLog(path, max_bytes=1_000, backups=0) as log:
        for seq in range(100):
            log.append(progress(seq))
    assert log_files(path) == [path]
    assert path.stat().st_size <= 1_000
    assert batch_ids(read_events(path))[-1] == 99


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    threads, each = 8, 300
    with EventLog(path) as log:

        def writer(worker: int) -> None:
            for i in range(each):
                log.append(progress(worker * each + i))

        pool = [threading.Thread(target=writer, args=(w,)) for w in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    lines = path.read_text().splitlines()
    assert len(lines) == threads * each
    assert sorted(json.loads(line)["progress"]["batchId"] for line in lines) == list(
        range(threads * each)
    )


def test_concurrent_appends_with_rotation_stay_readable(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with EventLog(path, max_bytes=20_000, backups=3) as log:

        def writer(worker: int) -> None:
            for i in range(500):
                log.append(progress(worker * 500 + i))

        pool = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    for file in log_files(path):
        for line in file.read_text().splitlines():
            json.loads(line)  # every kept line is whole
    assert sum(f.stat().st_size for f in log_files(path)) <= 4 * 20_000


def test_corrupt_and_partial_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    good = [json.dumps(progress(i)) for i in range(3)]
    path.write_text(
        good[0]
        + "\n{not json\n"
        + '{"event": "progress"}\n'  # an object, but not an event
        + "[1, 2]\n\n"
        + good[1]
        + "\n"
        + good[2][:40]  # a write cut short by a crash
        + "\n"
        + good[2]
        + "\n"
    )
    assert batch_ids(read_events(path)) == [0, 1, 2]


def test_reading_a_missing_log_gives_no_events(tmp_path: Path) -> None:
    assert read_events(tmp_path / "nothing.jsonl") == []


def test_pipelines_in_lists_event_logs(tmp_path: Path) -> None:
    assert pipelines_in(tmp_path) == []
    for name in ("trending", "orders"):
        EventLog(event_log_path(tmp_path, name)).close()
    (tmp_path / "events" / "orders.jsonl.1").write_text("")
    assert pipelines_in(tmp_path) == ["orders", "trending"]


def test_event_log_path_refuses_names_that_escape_the_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="plain file name"):
        event_log_path(tmp_path, "../etc")


def test_follower_returns_each_event_once_across_rotations(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    follower = EventLogFollower(path)
    assert follower.poll() == []  # the log does not exist yet
    seen: list[int] = []
    with EventLog(path, max_bytes=3_000, backups=2) as log:
        log.append(progress(0))
        seen += batch_ids(follower.poll())
        for seq in range(1, 15):  # enough to rotate once or twice between polls
            log.append(progress(seq))
            if seq % 7 == 0:
                seen += batch_ids(follower.poll())
        seen += batch_ids(follower.poll())
    follower.close()
    assert len(log_files(path)) > 1
    assert seen == list(range(15))


def test_follower_holds_back_a_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    line = json.dumps(progress(1))
    path.write_text(line[:30])
    follower = EventLogFollower(path)
    assert follower.poll() == []
    with open(path, "a") as handle:
        handle.write(line[30:] + "\n")
    assert batch_ids(follower.poll()) == [1]
    assert follower.poll() == []
    follower.close()


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "p.jsonl")
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append(progress(0))


@pytest.mark.parametrize(("max_bytes", "backups"), [(0, 2), (10, -1)])
def test_bad_limits_are_refused(tmp_path: Path, max_bytes: int, backups: int) -> None:
    with pytest.raises(ValueError):
        EventLog(tmp_path / "p.jsonl", max_bytes=max_bytes, backups=backups)
