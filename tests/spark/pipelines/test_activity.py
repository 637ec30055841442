"""activity, seed 000's user-status example: the processors with their clocks set by hand
(ProcessorClock, on Spark's TwsTester), the event-time timeout in a real query batch by batch,
session boundaries at the gap and just under it, and every output over generated input against
an independent replay of the same files.

Nothing waits by sleeping: the processors' clocks are set by hand, and the queries run on
files landed one per batch."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.tws_tester import TwsTester

from slipstream.pipelines.activity import AlertProcessor, PandasStatusProcessor, StatusProcessor
from slipstream.testing import PipelineHarness, ProcessorClock
from slipstream.tools.generators import activity as generator
from slipstream.tools.generators.streams import StreamSpec, generate
from tests import stream_reference as ref
from tests.helpers import at, built, landed_batches

HOUR, MS = timedelta(hours=1), timedelta(milliseconds=1)


def act(user: str, action: str, minutes: float) -> dict[str, Any]:
    return {"user_id": user, "action": action, "ts": ref.iso_exact(at(minutes))}


# --- the processors, clocks by hand -----------------------------------------------------------


def test_event_time_timeout_fires_when_the_watermark_reaches_last_seen_plus_the_timeout() -> None:
    clock = ProcessorClock(StatusProcessor(3_600_000), event_time="ts", mode="update")
    rows = clock.feed("u1", [{"action": "open", "ts": at(0)}, {"action": "click", "ts": at(5)}])
    assert [(r["status"], r["last_action"], r["last_seen"], r["actions"]) for r in rows] == [
        ("active", "click", at(5), 2)
    ]
    assert clock.watermark(at(65) - MS) == []  # a millisecond short of last_seen + 1h
    assert clock.value_state("status", "u1") is not None
    gone = clock.watermark(at(65))
    assert [(r["user_id"], r["status"], r["actions"]) for r in gone] == [("u1", "inactive", 2)]
    assert clock.value_state("status", "u1") is None  # state removed
    again = clock.feed("u1", [{"action": "open", "ts": at(70)}])
    assert [(r["status"], r["actions"]) for r in again] == [("active", 1)]  # starts over


def test_the_newest_action_decides_whatever_order_rows_come_in() -> None:
    clock = ProcessorClock(StatusProcessor(3_600_000), event_time="ts", mode="update")
    first = clock.feed("u", [{"action": "close", "ts": at(9)}, {"action": "click", "ts": at(2)}])
    assert (first[0]["status"], first[0]["last_action"]) == ("closed", "close")
    later_but_older = clock.feed("u", [{"action": "crash", "ts": at(8)}])  # out of order
    assert (later_but_older[0]["status"], later_but_older[0]["actions"]) == ("closed", 3)
    assert clock.watermark(at(68) + MS) == []  # the timer follows the newest action (9 + 60)
    assert clock.watermark(at(69))[0]["status"] == "inactive"
    assert clock.feed("u", [{"action": "open", "ts": at(5)}]) == []  # at or before: late


def test_processing_time_timeout_runs_on_the_clock_and_each_action_rearms_it() -> None:
    clock = ProcessorClock(StatusProcessor(60_000, "processing"), time="processing", mode="update")
    clock.clock(1_000)
    assert clock.feed("u", [{"action": "open", "ts": at(0)}])[0]["status"] == "active"
    clock.clock(30_000)
    clock.feed("u", [{"action": "click", "ts": at(500)}])  # due again at 30 s + 60 s
    assert clock.clock(61_000) == []  # the first deadline is gone
    assert clock.clock(90_000 - 1) == []
    gone = clock.clock(90_000)
    assert [(r["status"], r["last_action"], r["actions"]) for r in gone] == [
        ("inactive", "click", 2)
    ]
    assert clock.value_state("status", "u") is None  # the state is gone with the timer


def test_alerts_one_per_crash_and_one_per_minute_that_passes_the_burst_bound() -> None:
    clock = ProcessorClock(AlertProcessor(burst=3), event_time="ts")
    minute = [{"action": "click", "ts": at(1 + s / 60)} for s in range(3)]
    assert clock.feed("u", minute) == []  # 3 in the minute: not more than 3
    out = clock.feed("u", [{"action": "crash", "ts": at(1.5)}, {"action": "click", "ts": at(1.9)}])
    assert sorted((r["alert"], r["alert_time"]) for r in out) == [
        ("burst", at(1)),  # the 4th action of minute 1, in the second batch: once
        ("crash", at(1.5)),
    ]
    assert clock.feed("u", [{"action": "click", "ts": at(1.95)}]) == []  # not twice
    assert clock.map_state("minutes", "u") == {(int(at(1).timestamp() * 1000),): (6,)}
    clock.watermark(at(2))  # the minute is over: its count is forgotten
    assert clock.map_state("minutes", "u") == {}


def test_the_pandas_processor_emits_what_the_row_processor_emits() -> None:
    batches = [
        [("open", 0), ("click", 3), ("scroll", 1)],
        [("close", 20)],
        [("open", 200)],
    ]
    rows_clock = ProcessorClock(StatusProcessor(3_600_000), event_time="ts", mode="update")
    pandas_tester = TwsTester(
        PandasStatusProcessor(3_600_000),
        timeMode="EventTime",
        outputMode="Update",
        eventTimeExtractor=lambda row: int(row["ts"].timestamp() * 1000),
    )
    for batch in batches:
        got = rows_clock.feed("u", [{"action": a, "ts": at(m)} for a, m in batch])
        frame = pd.DataFrame(
            {"action": [a for a, _ in batch], "ts": [at(m).replace(tzinfo=None) for _, m in batch]}
        )
        out = pandas_tester.testInPandas("u", frame)
        assert out[["status", "last_action", "actions"]].values.tolist() == [
            [got[0]["status"], got[0]["last_action"], got[0]["actions"]]
        ]
        assert out["last_seen"][0] == got[0]["last_seen"].replace(tzinfo=None)


# --- real queries -----------------------------------------------------------------------------

pytest_spark = pytest.mark.spark


@pytest_spark
def test_a_user_goes_inactive_in_the_batch_the_watermark_passes_the_timeout_not_before(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Watermark 10m, timeout 1h: u1 last acts at 00:05, so goes inactive once the watermark
    reaches 01:05, which needs an action at 01:15 or later (from anyone)."""
    settings = {"sink": "sqlite", "max_files_per_trigger": 1}
    with PipelineHarness(spark, "activity", tmp_path, **settings) as h:
        h.step(actions=[act("u1", "open", 0), act("u1", "click", 5), act("u2", "open", 10)])
        h.step(actions=[act("u2", "click", 75 - 1 / 60_000)])  # watermark 01:04:59.999
        status = {r["user_id"]: r for r in h.results("user_status")}
        assert h.watermark("user_status") == at(65) - MS
        assert status["u1"]["status"] == "active" and status["u1"]["actions"] == 2
        h.step(actions=[act("u2", "click", 75)])  # watermark 01:05:00.000 = last_seen + 1h
        assert h.watermark("user_status") == at(65)
        status = {r["user_id"]: r for r in h.results("user_status")}
        assert (status["u1"]["status"], status["u1"]["actions"]) == ("inactive", 2)
        assert status["u2"]["status"] == "active"
        assert h.state_rows("user_status") < 10  # u1's value and timer are gone
        h.step(actions=[act("u1", "open", 80)])  # back: counted from scratch
        status = {r["user_id"]: r for r in h.results("user_status")}
        assert (status["u1"]["status"], status["u1"]["actions"]) == ("active", 1)


@pytest_spark
def test_sessions_hold_an_action_at_exactly_the_gap_and_split_a_millisecond_after(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's session window of an action is [ts, ts + gap], closed for merging: an action
    exactly one gap after the previous one joins its session; one a millisecond later opens
    a new session."""
    ms = 1 / 60_000
    settings = {"sink": "sqlite", "max_files_per_trigger": 1}
    with PipelineHarness(spark, "activity", tmp_path, **settings) as h:
        h.step(actions=[act("a", "open", 0), act("a", "click", 30),  # exactly the gap
                        act("b", "open", 0), act("b", "click", 30 - ms),  # just under
                        act("c", "open", 0), act("c", "click", 30 + ms)])  # fmt: skip
        assert h.results("user_sessions") == []  # not final yet
        h.step(actions=[act("z", "open", 200)])  # watermark 03:10: all final
        got = sorted(
            (r["user_id"], r["session_start"], r["session_end"], r["actions"])
            for r in h.results("user_sessions")
        )
    iso = ref.iso_exact
    assert got == [
        ("a", iso(at(0)), iso(at(60)), 2),
        ("b", iso(at(0)), iso(at(60 - ms)), 2),
        ("c", iso(at(0)), iso(at(30)), 1),
        ("c", iso(at(30 + ms)), iso(at(60 + ms)), 1),
    ]
    assert ref.sessions(
        [{"user_id": u, "ts": at(m)} for u, ms_ in (("a", 30), ("b", 30 - ms), ("c", 30 + ms))
         for m in (0, ms_)],
        timedelta(minutes=30),
        at(190),
    ) == {(u, s): n for u, s, _, n in got}  # fmt: skip


WATERMARK, INACTIVE, GAP, BURST = timedelta(minutes=10), HOUR, timedelta(minutes=30), 30
SPEC = StreamSpec(
    duration=timedelta(hours=2),
    seed=12,
    file_every=timedelta(minutes=15),
    watermark=WATERMARK,
    out_of_order=0.05,
    late=0.02,
    duplicates=0.03,
    malformed=0.02,
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("activity")
    users = generator.Users(users=40, bursty=2, idle=timedelta(minutes=45), seed=SPEC.seed)
    report = generate(SPEC, users, root / "landing")
    return {"root": root, "report": report, "batches": landed_batches(root / "landing", "actions")}


def _run(spark: SparkSession, workdir: Path, batches: list[list[str]], **params: Any) -> dict:
    h = PipelineHarness(
        spark, "activity", workdir, sink="sqlite", max_files_per_trigger=1, **params
    )
    for batch in batches:
        h.feed(batch)
    with h:
        h.process()
        tables = {name: h.results(name) for name in h.prepared.outputs}
        tables["totals"] = dict(h.totals)
    return tables


@pytest_spark
@pytest.mark.parametrize("api", ["rows", "pandas"])
def test_every_output_equals_an_independent_replay_of_the_generated_files(
    spark: SparkSession, tmp_path: Path, generated: dict[str, Any], api: str
) -> None:
    batches = generated["batches"]
    got = _run(spark, tmp_path, batches, state_api=api)
    stats = check_every_output(got, batches, generated["report"].info["bursty"])
    counts = generated["report"].streams["actions"]
    assert (stats["late"], stats["duplicates"], stats["invalid"]) == (
        counts.late, counts.duplicates, counts.malformed
    )  # fmt: skip


def check_every_output(
    got: dict[str, Any], batches: list[list[str]], bursty: list[str]
) -> dict[str, Any]:
    """The three tables and the accounting of a run over `batches` (one micro-batch each, then
    the no-data batch) against the independent replay; the replay's counts (invalid, late,
    duplicates) are returned. The bursty users are the ones the generator made bursty."""
    now = datetime.now(UTC)

    want_status = ref.activity_status(batches, now, WATERMARK, INACTIVE)
    table = {r["user_id"]: r for r in got["user_status"]}
    assert set(table) == set(want_status)
    for user, want in want_status.items():
        row = table[user]
        assert (row["status"], row["last_action"], row["actions"]) == (
            want["status"], want["last_action"], want["actions"]
        ), user  # fmt: skip
        assert row["last_seen"] == ref.iso_exact(want["last_seen"]), user
    statuses = {r["status"] for r in got["user_status"]}
    assert {"inactive", "closed"} <= statuses  # the replay is not trivially all-active

    kept, stats = ref.counted(
        batches,
        lambda line: ref.activity_action(line, now),
        "ts",
        lambda r: (r["user_id"], r["action"], r["ts"]),
        WATERMARK,
    )
    crashes = sorted((r["user_id"], ref.iso_exact(r["ts"])) for r in kept if r["action"] == "crash")
    per_minute = pd.Series(
        [
            (r["user_id"], ref.iso_exact(ref.window_start(r["ts"], timedelta(minutes=1))))
            for r in kept
        ]  # fmt: skip
    ).value_counts()
    bursts = sorted(k for k, n in per_minute.items() if n > BURST)
    alerts = got["user_alerts"]
    assert sorted((a["user_id"], a["alert_time"]) for a in alerts if a["alert"] == "crash") == (
        crashes
    )
    assert sorted((a["user_id"], a["alert_time"]) for a in alerts if a["alert"] == "burst") == (
        bursts
    )
    assert crashes and bursts
    assert {u for u, _ in bursts} == set(bursty)

    want_sessions = ref.sessions(kept, GAP, stats["watermark"])
    sessions = {(r["user_id"], r["session_start"]): r["actions"] for r in got["user_sessions"]}
    assert sessions == want_sessions

    if "totals" in got:
        totals = got["totals"]["activity.user_status"]
        assert (totals["quarantined"], totals["late"]) == (stats["invalid"], stats["late"])
    return stats


#: a Python for Spark's workers that is slow the first time Spark starts transformWithState's
#: driver-side worker: longer than Spark's fixed 10 s wait for it to connect back, as on a
#: machine busy enough (seen at a load of 17-40 on 2 cores)
SLOW_FIRST_WORKER = """#!/bin/sh
case "$*" in
  *transform_with_state_driver_worker*)
    if mkdir "{mark}" 2>/dev/null; then sleep 15; fi ;;
esac
exec "{python}" "$@"
"""


@pytest.mark.spark
@pytest.mark.slow
def test_a_query_whose_python_worker_connects_back_too_late_is_started_again(
    tmp_path: Path, generated: dict[str, Any]
) -> None:
    """`slipstream run activity` as a user types it, with Spark's first transformWithState
    driver-side worker 15 s slow to start: that query fails to start ("Python worker failed
    to connect back"), the run starts it again from its checkpoint, says so, and ends with
    every table equal to the independent replay (all files in one batch)."""
    import os
    import subprocess
    import sys

    from slipstream.sinks.sqlite import read_table

    slow = tmp_path / "slow-python"
    slow.write_text(SLOW_FIRST_WORKER.format(mark=tmp_path / "slowed", python=sys.executable))
    slow.chmod(0o755)
    command = [
        sys.executable, "-m", "slipstream", "run", "activity",
        "--input", str(generated["root"] / "landing"), "--trigger", "available-now",
        "--sink", "sqlite", "--state-dir", str(tmp_path / "state"), "--master", "local[2]",
    ]  # fmt: skip
    src = str(Path(__file__).resolve().parents[3] / "src")
    env = {**os.environ, "PYSPARK_PYTHON": str(slow), "PYTHONPATH": src}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "slowed").is_dir()  # the slow start happened
    assert "Python worker failed to connect back" in done.stderr
    assert "starting again from the checkpoint in 2 s (try 2," in done.stderr, done.stderr
    database = tmp_path / "state" / "slipstream.db"
    got = {name: read_table(database, name) for name in ("user_status", "user_alerts")}
    got["user_sessions"] = read_table(database, "user_sessions")
    one_batch = [[line for batch in generated["batches"] for line in batch]]
    check_every_output(got, one_batch, generated["report"].info["bursty"])


@pytest_spark
def test_processing_time_mode_in_a_real_query_keeps_every_status_until_the_clock_runs_out(
    spark: SparkSession, tmp_path: Path, generated: dict[str, Any]
) -> None:
    """--timeout processing, one batch of all the files (`--trigger once`): an hour's timeout
    cannot run out within the run, so every user's row is their status from all their actions.
    (Timers firing on the clock are proven above with ProcessorClock, without waiting.)"""
    batches = generated["batches"]
    h = PipelineHarness(spark, "activity", tmp_path, sink="sqlite", trigger="once",
                        timeout="processing")  # fmt: skip
    for batch in batches:
        h.feed(batch)
    with h:
        h.process()
        table = {r["user_id"]: r for r in h.results("user_status")}
    kept, _ = ref.counted(
        [[line for batch in batches for line in batch]],
        lambda line: ref.activity_action(line, datetime.now(UTC)),
        "ts",
        lambda r: (r["user_id"], r["action"], r["ts"]),
        WATERMARK,
    )
    frame = pd.DataFrame(kept).sort_values("ts", kind="stable")
    last = frame.groupby("user_id").tail(1).set_index("user_id")
    assert set(table) == set(last.index)
    for user, row in table.items():
        assert row["actions"] == int((frame["user_id"] == user).sum())
        assert row["last_action"] == last.loc[user, "action"]
        assert row["status"] == ref.status_of(row["last_action"])


@pytest.mark.spark
def test_processing_timers_refuse_an_available_now_run_before_it_starts(tmp_path: Path) -> None:
    """Spark asks for a batch on every trigger while processing-time timers exist, so an
    available-now run would never end: refused with a code, before any query starts."""
    from tests.helpers import slipstream

    (tmp_path / "in").mkdir()
    result = slipstream(
        "run", "activity", "--input", str(tmp_path / "in"), "--state-dir", str(tmp_path / "st"),
        "--timeout", "processing", "--trigger", "available-now", timeout=300,
    )  # fmt: skip
    assert result.returncode != 0
    assert "PROCESSING_TIMERS_UNBOUNDED" in result.stderr + result.stdout
    assert not (tmp_path / "st" / "checkpoints" / "activity" / "user_status" / "offsets").exists()


def test_generated_actions_name_the_bursty_users(tmp_path: Path) -> None:
    users = generator.Users(users=10, bursty=1, seed=4)
    generate(StreamSpec(duration=HOUR, seed=4, late=0, malformed=0, duplicates=0), users, tmp_path)
    lines = [json.loads(x) for p in sorted(tmp_path.glob("actions-*.jsonl"))
             for x in p.read_text().splitlines()]  # fmt: skip
    assert {r["action"] for r in lines} <= set(ref.ACTIONS)
    assert len(users.bursty) == 1 and any(r["user_id"] in users.bursty for r in lines)


@pytest_spark
@pytest.mark.parametrize("timeout", ["event", "processing"])
def test_the_plans_show_arbitrary_state_its_time_mode_and_the_session_gap(
    spark: SparkSession, tmp_path: Path, timeout: str
) -> None:
    from slipstream.analysis.plan import plan_of
    from slipstream.pipelines.activity import ActivityPipeline

    frames = built(spark, ActivityPipeline(), tmp_path, {"timeout": timeout})
    status, alerts, sessions = (
        plan_of(frames[n]) for n in ("user_status", "user_alerts", "user_sessions")
    )
    assert status.arbitrary_state and not status.aggregation  # its own rows: not an aggregation
    assert status.processing_timers == (timeout == "processing")
    assert alerts.arbitrary_state and not alerts.processing_timers  # alerts: event time always
    assert sessions.window == "session" and sessions.window_length == timedelta(minutes=30)
    assert (sessions.watermark_column, sessions.watermark_delay) == ("ts", timedelta(minutes=10))
