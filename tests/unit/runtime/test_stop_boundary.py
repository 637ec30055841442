"""issue 29 item 12: SIGTERM under available-now drained 10 and 14 more batches (up to 60 s)
before stopping: the batches run back to back, and the moment between two triggers was never
seen. The run now stops as soon as the batch running at the request has committed. A stand-in
for Spark's StreamingQuery (no Spark): its trigger is always active, and each wait of the poll
completes one batch, as under available-now."""

from __future__ import annotations

from typing import Any

from slipstream.runtime.run import _stop_at_batch_boundaries


class BackToBack:
    """A query running batches back to back: never between triggers when looked at."""

    def __init__(self, batches_left: int = 1000) -> None:
        self.batch = 3  # batches 0..3 done; 4 running
        self.batches_left = batches_left
        self.isActive = True
        self.status: dict[str, Any] = {"isTriggerActive": True}
        self.stopped_after: int | None = None

    @property
    def lastProgress(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        return {"batchId": self.batch}

    def awaitTermination(self, timeout: float) -> bool:  # noqa: N802 (Spark's name)
        self.batch += 1  # the running batch commits, the next starts at once
        return False

    def stop(self) -> None:
        self.isActive = False
        self.stopped_after = self.batch


def test_a_stop_under_available_now_ends_after_the_running_batch() -> None:
    query = BackToBack()
    assert _stop_at_batch_boundaries({"q": query}, poll=0.001) == {"q"}  # type: ignore[dict-item]
    assert query.stopped_after == 4  # the batch running at the request, and no more


def test_a_query_between_triggers_is_stopped_at_once() -> None:
    query = BackToBack()
    query.status["isTriggerActive"] = False
    assert _stop_at_batch_boundaries({"q": query}, poll=0.001) == {"q"}  # type: ignore[dict-item]
    assert query.stopped_after == 3


class AfterIdle(BackToBack):
    """A query that had waited for input before the request: its last progress is Spark's idle
    report, which carries the id of the batch it has not run yet (4; batches 0..3 done), not
    the last batch it ran. Then batch 4 runs, and the next ones back to back."""

    def __init__(self) -> None:
        super().__init__()
        self.idle = True

    @property
    def lastProgress(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        if self.idle:
            phases = {"latestOffset": 1, "triggerExecution": 1}
            return {"batchId": self.batch + 1, "numInputRows": 0, "durationMs": phases}
        return {"batchId": self.batch, "numInputRows": 5, "durationMs": {"addBatch": 9}}

    def awaitTermination(self, timeout: float) -> bool:  # noqa: N802 (Spark's name)
        self.idle = False
        return super().awaitTermination(timeout)


def test_a_stop_after_an_idle_spell_ends_after_the_batch_running_at_the_request() -> None:
    """The idle report's id is not a batch that ran: read as one, the stop waited for one
    more batch (or its deadline, which cuts a batch Spark then replays)."""
    query = AfterIdle()
    assert _stop_at_batch_boundaries({"q": query}, poll=0.001) == {"q"}  # type: ignore[dict-item]
    assert query.stopped_after == 4


class Clock:
    """Time for the queries of one run: every wait of the poll is one tick for all of them."""

    ticks = 0


class Epochs:
    """A real-time query: always inside an epoch (its trigger active); an epoch ends every
    `length` ticks, `phase` ticks apart from its siblings'."""

    def __init__(self, clock: Clock, length: int, phase: int) -> None:
        self.clock, self.length, self.phase = clock, length, phase
        self.isActive = True
        self.status: dict[str, Any] = {"isTriggerActive": True}
        self.stopped_at: int | None = None

    @property
    def lastProgress(self) -> dict[str, Any]:  # noqa: N802 (Spark's name)
        return {"batchId": (self.clock.ticks + self.phase) // self.length}

    def awaitTermination(self, timeout: float) -> bool:  # noqa: N802 (Spark's name)
        self.clock.ticks += 1
        return False

    def stop(self) -> None:
        self.isActive = False
        self.stopped_at = self.clock.ticks


def test_the_queries_of_a_run_stop_at_their_own_next_epoch_end_together() -> None:
    """rt39: a real-time run of three queries took minutes to stop on Ctrl-C, each query's
    wait for its epoch's end starting after the one before had stopped. All are watched from
    the request on: each stops when the epoch running at the request ends."""
    clock = Clock()
    queries = {f"q{n}": Epochs(clock, length=100, phase=30 * n) for n in range(3)}
    ended = _stop_at_batch_boundaries(queries, poll=0.001)  # type: ignore[arg-type]
    assert ended == set(queries)
    assert [q.stopped_at for q in queries.values()] == [100, 70, 40]  # no epoch waited twice


class Query:
    """A query of a run under available-now: `failed` has ended with an error; a running one
    ends by itself after 50 waits (batches), as an available-now query with input left."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.isActive = error is None
        self.status: dict[str, Any] = {"isTriggerActive": False}
        self.lastProgress: dict[str, Any] | None = None
        self.recentProgress: list[Any] = []
        self.id = self.runId = f"query-{id(self)}"
        self.waits = 0
        self.stopped = False

    def exception(self) -> Exception | None:
        return self.error

    def awaitTermination(self, timeout: float) -> bool:  # noqa: N802 (Spark's name)
        self.waits += 1
        if self.waits >= 50:
            self.isActive = False
        return not self.isActive

    def stop(self) -> None:
        self.isActive = False
        self.stopped = True


def test_a_failed_query_stops_its_siblings_under_available_now(tmp_path: Any) -> None:
    """The damaged-checkpoint list: when one query failed, the quarantine went on alone and
    the outputs ended at different places."""
    from types import SimpleNamespace

    import pytest

    from slipstream.runtime.run import Run

    failed, sibling = Query(RuntimeError("offsets/1: Incomplete log file")), Query()
    trigger = SimpleNamespace(finite=True, kind="available-now")
    prepared = SimpleNamespace(
        settings=SimpleNamespace(trigger=trigger, checkpoint_root=tmp_path),
        pipeline=SimpleNamespace(name="mobile"),
        inputs={},
    )
    ended: list[str] = []
    run = Run(
        spark=SimpleNamespace(conf=SimpleNamespace(get=lambda key, default: default)),  # type: ignore[arg-type]
        prepared=prepared,  # type: ignore[arg-type]
        queries={"counts": failed, "quarantine": sibling},  # type: ignore[dict-item]
        lock=SimpleNamespace(release=lambda: None),  # type: ignore[arg-type]
        listener=SimpleNamespace(  # type: ignore[arg-type]
            catch_up=lambda recent, complete, timeout: True,
            ended=lambda qid, run: ended.append(qid),
        ),
        totals=SimpleNamespace(),  # type: ignore[arg-type]
    )
    with pytest.raises(RuntimeError, match="Incomplete log file"):
        run.wait(poll=0.001)
    assert sibling.stopped and sibling.waits == 0  # stopped at once, not run to its end
    assert run.stop_reason == "query mobile.counts failed"
    assert ended == [sibling.id]  # the failed query's end is Spark's event, with its failure
