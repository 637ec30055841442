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
