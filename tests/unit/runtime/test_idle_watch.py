"""`--stop-when-idle` (runtime/idle.py): a run ends once none of its queries has run a batch or
found data for the given time, counted from the last sign of work. Stand-ins for Spark's
StreamingQuery and an injected clock: no Spark, no waiting."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from slipstream.runtime.idle import INITIALISING, IdleWatch


class Query:
    def __init__(self) -> None:
        self.status: dict[str, Any] = {"message": INITIALISING, "isDataAvailable": False}
        self.recentProgress: list[dict[str, Any]] = []

    def ran(self, batch: int) -> None:
        self.recentProgress.append({"batchId": batch, "durationMs": {"addBatch": 5}})

    def idle_progress(self, next_batch: int) -> None:  # Spark's idle entries: no addBatch
        self.recentProgress.append({"batchId": next_batch, "durationMs": {"triggerExecution": 1}})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_idle_counts_from_the_last_batch_and_ignores_idle_progress() -> None:
    clock, query = Clock(), Query()
    watch = IdleWatch(timedelta(seconds=3), clock)
    queries = {"counts": query}
    assert not watch.idle(queries)
    clock.now = 10.0  # a slow start: sources still initialising
    assert not watch.idle(queries)
    query.status = {"message": "Waiting for data to arrive", "isDataAvailable": False}
    query.ran(0)
    clock.now = 11.0
    assert not watch.idle(queries)  # a batch ran: the time counts from here
    clock.now = 13.5
    query.idle_progress(1)
    assert not watch.idle(queries)
    query.status["isDataAvailable"] = True  # data found: work again
    clock.now = 14.5
    assert not watch.idle(queries)
    query.status["isDataAvailable"] = False
    clock.now = 17.0
    assert not watch.idle(queries)  # 2.5 s since the data was found
    clock.now = 17.5
    assert watch.idle(queries)


def test_every_query_must_be_idle() -> None:
    clock, a, b = Clock(), Query(), Query()
    for q in (a, b):
        q.status = {"message": "Waiting for data to arrive", "isDataAvailable": False}
    watch = IdleWatch(timedelta(seconds=1), clock)
    assert not watch.idle({"a": a, "b": b})
    clock.now = 0.9
    b.ran(0)
    assert not watch.idle({"a": a, "b": b})
    clock.now = 1.5
    assert not watch.idle({"a": a, "b": b})
    clock.now = 2.0
    assert watch.idle({"a": a, "b": b})
