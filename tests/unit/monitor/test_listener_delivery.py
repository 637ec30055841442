"""The listener hands each executed batch and each end to the handlers once, whether Spark's
late event or the run's own catch-up (`RunListener.catch_up` / `ended`, what a finite run's end
and a stop call instead of waiting for Spark's events) comes first."""

from __future__ import annotations

import threading
from typing import Any

from slipstream.monitor.listener import RunListener
from slipstream.monitor.totals import RunTotals


def progress(batch: int, run: str = "r1", rows: int = 10, name: str = "mobile.counts") -> Any:
    return {
        "name": name,
        "id": "q1",
        "runId": run,
        "batchId": batch,
        "numInputRows": rows,
        "durationMs": {"addBatch": 5, "triggerExecution": 9},
        "stateOperators": [],
    }


def idle(batch: int) -> Any:
    """Spark's idle report: the id of the batch not run yet, no addBatch."""
    return {**progress(batch, rows=0), "durationMs": {"triggerExecution": 1}}


def listener() -> tuple[RunListener, list[dict[str, Any]], RunTotals]:
    seen: list[dict[str, Any]] = []
    totals = RunTotals()
    listen = RunListener("mobile", [seen.append, totals])
    listen.register("q1", "mobile.counts")
    return listen, seen, totals


def batches(seen: list[dict[str, Any]]) -> list[int]:
    return [r["progress"]["batchId"] for r in seen if r["event"] == "progress"]


def test_caught_up_batches_are_not_handed_again_when_spark_delivers_them() -> None:
    listen, seen, totals = listener()
    listen.on_progress(progress(0))  # delivered by Spark before the run's end
    recent = [progress(0), progress(1), idle(2), progress(2)]
    assert listen.catch_up(recent, complete=True)
    for late in (progress(1), progress(2)):  # Spark's copies, after the catch-up
        listen.on_progress(late)
    assert batches(seen) == [0, 1, 2]
    assert totals.by_query["mobile.counts"]["rows"] == 30  # each batch counted once
    assert totals.last_batch["mobile.counts"] == 2


def test_a_new_run_of_the_query_starts_its_batches_afresh() -> None:
    """A query started again (a new run id) runs batch ids the first run had: not dropped."""
    listen, seen, _ = listener()
    listen.catch_up([progress(3, run="r1")], complete=True)
    listen.on_progress(progress(3, run="r2"))
    assert batches(seen) == [3, 3]


def test_idle_reports_are_not_batches() -> None:
    """An idle report names the batch not yet run: that batch, when it runs, is handed on."""
    listen, seen, _ = listener()
    listen.on_progress(idle(4))
    listen.on_progress(progress(4))
    assert batches(seen) == [4, 4] and seen[-1]["progress"]["numInputRows"] == 10


def test_progress_spark_no_longer_keeps_waits_for_the_listener() -> None:
    """`recentProgress` keeps the last 100 reports: when it is full, the batches before the
    oldest kept may still be on their way, and are not lost to the catch-up."""
    listen, seen, _ = listener()
    listen.on_progress(progress(0))
    late = threading.Thread(target=lambda: [listen.on_progress(progress(b)) for b in (1, 2)])
    kept = [progress(3), progress(4)]  # batches 1 and 2 no longer kept, not yet delivered
    assert not listen.catch_up(kept, complete=False, timeout=0.05)  # bounded: never hangs
    late.start()
    assert listen.catch_up(kept, complete=False, timeout=60)
    late.join()
    assert batches(seen) == [0, 1, 2, 3, 4]


def test_each_batch_is_handed_once_when_both_deliver_at_once() -> None:
    listen, seen, totals = listener()
    recent = [progress(b) for b in range(200)]
    spark = threading.Thread(target=lambda: [listen.on_progress(p) for p in recent])
    spark.start()
    assert listen.catch_up(recent, complete=True)
    spark.join()
    assert sorted(batches(seen)) == list(range(200))
    assert totals.by_query["mobile.counts"]["batches"] == 200


def test_an_end_is_handed_once_and_a_failure_is_left_to_spark() -> None:
    listen, seen, totals = listener()
    listen.register("q2", "mobile.quarantine")
    listen.ended("q1", "r1")
    event = type("Terminated", (), {"exception": None, "errorClassOnException": None})
    ok = event()
    ok.id, ok.runId = "q1", "r1"
    listen.onQueryTerminated(ok)  # Spark's copy
    failed = event()
    failed.id, failed.runId, failed.exception = "q2", "r9", "java.lang.RuntimeException: boom"
    listen.onQueryTerminated(failed)
    ends = [(r["query"], r["exception"]) for r in seen if r["event"] == "terminated"]
    assert ends == [("mobile.counts", None), ("mobile.quarantine", failed.exception)]
    assert totals.failures == {"mobile.quarantine": failed.exception}
