"""issue 29 item 12: SIGTERM under available-now drained 10 and 14 more batches (up to 60 s)
before stopping: the batches run back to back, and the moment between two triggers was never
seen. The run now stops as soon as the batch running at the request has committed. A stand-in
for Spark's StreamingQuery (no Spark): its trigger is always active, and each wait of the poll
completes one batch, as under available-now."""

from __future__ import annotations

from typing import Any

from slipstream.runtime.run import _stop_at_batch_boundary


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
    assert _stop_at_batch_boundary(query, timeout=60.0, poll=0.001)  # type: ignore[arg-type]
    assert query.stopped_after == 4  # the batch running at the request, and no more


def test_a_query_between_triggers_is_stopped_at_once() -> None:
    query = BackToBack()
    query.status["isTriggerActive"] = False
    assert _stop_at_batch_boundary(query, timeout=60.0, poll=0.001)  # type: ignore[arg-type]
    assert query.stopped_after == 3
