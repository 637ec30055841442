"""The terminal's waiting lines (monitor/first_batch.py), decided from recorded listener events
and a clock set by hand: Spark's start, then batch 0's duration at a modest interval, quiet
once the first batch is done, and nothing at all off a terminal. No threads wait here: the
handler is fed with its ticking thread never started for the pure cases."""

from __future__ import annotations

import io

from slipstream.monitor.first_batch import FirstBatchNotice, FirstBatchWatch


def record(event: str, query: str) -> dict[str, object]:
    return {"event": event, "query": query, "pipeline": "trending"}


def test_spark_started_then_batch_0_every_15_s_until_its_progress() -> None:
    watch = FirstBatchWatch(began=100.0)
    assert watch.due(110.0) == []  # nothing started yet: the "starting Spark" line says it
    assert watch.seen(record("started", "trending.views"), 142.0) == [
        "Spark started in 42 s; batch 0 is running"
    ]
    assert watch.seen(record("started", "trending.quarantine.events"), 143.0) == []  # once
    said = {t: watch.due(float(t)) for t in range(143, 190)}
    lines = {t: x for t, x in said.items() if x}
    assert list(lines) == [157, 172, 187]  # after 15 s of batch 0, then every 15 s
    assert lines[157] == [
        "batch 0 still running: trending.quarantine.events 14 s, trending.views 15 s "
        "(the first batch is the slowest)"
    ]
    watch.seen(record("progress", "trending.views"), 190.0)
    assert watch.due(202.0) == ["batch 0 still running: trending.quarantine.events 59 s "
                                "(the first batch is the slowest)"]  # fmt: skip
    assert not watch.done
    watch.seen(record("progress", "trending.quarantine.events"), 203.0)
    assert watch.done and watch.due(500.0) == []


def test_a_quick_first_batch_says_nothing_but_the_start() -> None:
    watch = FirstBatchWatch(began=0.0)
    watch.seen(record("started", "mobile.counts"), 20.0)
    assert watch.due(34.0) == []
    watch.seen(record("progress", "mobile.counts"), 34.5)
    assert watch.due(60.0) == [] and watch.done


def test_only_the_watched_queries_and_a_failed_query_ends_its_wait() -> None:
    watch = FirstBatchWatch(began=0.0, queries={"trending.views"})
    assert watch.seen(record("started", "trending.quarantine.events"), 5.0) == []
    assert watch.seen(record("started", "trending.views"), 6.0) != []
    assert watch.due(30.0)[0].startswith("batch 0 still running: trending.views 24 s")
    watch.seen(record("terminated", "trending.views"), 31.0)
    assert watch.done


def test_the_handler_prints_on_a_terminal_only() -> None:
    now = [0.0]
    piped = io.StringIO()
    quiet = FirstBatchNotice(piped, clock=lambda: now[0])  # a StringIO is no terminal
    now[0] = 30.0
    quiet(record("started", "mobile.counts"))
    assert piped.getvalue() == "" and quiet._thread is None
    shown = io.StringIO()
    with FirstBatchNotice(shown, enabled=True, clock=lambda: now[0]) as notice:
        now[0] = 45.0
        notice(record("started", "mobile.counts"))
        notice.close()  # its thread ends at its next wake
    assert shown.getvalue() == "Spark started in 15 s; batch 0 is running\n"


def test_a_later_batch_that_runs_long_is_said_every_30_s_until_it_ends() -> None:
    """Issue 45's busy machine: batch 7 of one query processes for 75 s; the other query
    waits for data (not processing) and is never named; a query with no batch finished yet is
    the first-batch watch's."""
    from slipstream.monitor.first_batch import LongBatchWatch

    watch = LongBatchWatch()
    views, quarantine, fresh = "trending.views", "trending.quarantine.events", "trending.new"

    def statuses(processing: bool) -> dict[str, tuple[bool, int | None]]:
        return {views: (processing, 6), quarantine: (False, 6), fresh: (True, None)}

    said = {t: watch.due(float(t), statuses(True)) for t in range(100, 176)}
    lines = {t: x for t, x in said.items() if x}
    assert list(lines) == [130, 160]  # after 30 s of batch 7, then every 30 s
    assert lines[130] == ["still running: trending.views batch 7 30 s (a busy machine, "
                          "or a large batch)"]  # fmt: skip
    assert watch.due(176.0, statuses(False)) == []  # it ended
    # the next batch (8) is timed from its own start, not from batch 7's
    later = {views: (True, 7), quarantine: (False, 7)}
    assert [t for t in range(200, 240) if watch.due(float(t), later)] == [230]


def test_a_stopped_query_is_forgotten() -> None:
    from slipstream.monitor.first_batch import LongBatchWatch

    watch = LongBatchWatch(after_s=10, every_s=10)
    assert watch.due(0.0, {"p.a": (True, 0)}) == []
    assert watch.due(5.0, {}) == []  # stopped (no longer active)
    assert watch.due(20.0, {"p.a": (True, 0)}) == []  # started again: timed afresh
    assert watch.due(30.0, {"p.a": (True, 0)}) != []


def test_a_real_time_outputs_epoch_is_no_long_batch() -> None:
    """A real-time run watches only the queries that run micro-batches (its quarantine): the
    output's batch is an epoch of minutes while its rows flow, and is never called long."""
    now = [0.0]
    shown = io.StringIO()
    notice = FirstBatchNotice(
        shown, ["mobile.quarantine.actions"], enabled=True, clock=lambda: now[0]
    )
    busy = [False]
    notice.follow(lambda: {"mobile.counts": (True, 0), "mobile.quarantine.actions": (busy[0], 0)})
    notice(record("started", "mobile.counts"))
    notice(record("started", "mobile.quarantine.actions"))
    notice(record("progress", "mobile.quarantine.actions"))
    notice.close()
    said = []
    for t in range(0, 200):
        now[0] = float(t)
        busy[0] = t >= 100  # the quarantine's batch 1 processes from 100 s on
        said += notice.due() or []
    assert said == [
        "still running: mobile.quarantine.actions batch 1 30 s (a busy machine, or a large batch)",
        "still running: mobile.quarantine.actions batch 1 60 s (a busy machine, or a large batch)",
        "still running: mobile.quarantine.actions batch 1 90 s (a busy machine, or a large batch)",
    ]
