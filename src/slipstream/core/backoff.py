"""`SlowWorker`: how long a run keeps starting a query again when Spark's Python worker was too
slow to connect back, and what it says while it does (issue 45's busy machine).

Spark gives a Python worker that it starts itself a fixed 10 s to connect back (no setting:
`PythonWorkerFactory.createSimpleWorker`); transformWithState's driver-side worker and a Spark
Connect server's foreachBatch worker are such workers. On a machine whose load is many times
its cores, the worker's interpreter and imports take longer than that; nothing has been written
then, and a start resumes from the checkpoint. So the query is started again, after a pause that
doubles each time (the run's other queries, whose first batches are what keeps the machine
busiest, get the cores meanwhile), for as long as `budget_s` allows in all. Pure: the caller
passes the clock's readings and does the waiting."""

from __future__ import annotations

from dataclasses import dataclass, field

#: what Spark says when a worker did not connect back within its fixed 10 s
WORKER_TIMEOUT = "Python worker failed to connect back"
#: the first pause, its ceiling, and the time after the first failure past which a query is not
#: started again: a machine whose load is 8x its cores fits in it (docs/operations.md)
FIRST_PAUSE_S = 2.0
MAX_PAUSE_S = 30.0
BUDGET_S = 300.0


@dataclass
class SlowWorker:
    """Decides, failure by failure, whether to start again and after what pause."""

    budget_s: float = BUDGET_S
    first_pause_s: float = FIRST_PAUSE_S
    max_pause_s: float = MAX_PAUSE_S
    tries: int = 0
    _first_failure: float | None = field(default=None, repr=False)

    @staticmethod
    def is_slow_start(error: object) -> bool:
        """Whether a failure is a worker that did not connect back in time."""
        return error is not None and WORKER_TIMEOUT in str(error)

    def pause_after_failure(self, now: float) -> float | None:
        """The pause before the next start, or None when the budget is spent (then the
        failure stands). `now`: the clock's reading at the failure."""
        if self._first_failure is None:
            self._first_failure = now
        waited = now - self._first_failure
        pause: float = min(self.first_pause_s * 2.0**self.tries, self.max_pause_s)
        if waited + pause > self.budget_s:
            return None
        self.tries += 1
        return pause

    def waited(self, now: float) -> float:
        """Seconds since the first failure."""
        return 0.0 if self._first_failure is None else now - self._first_failure

    def says(self, what: str, pause: float, now: float) -> str:
        """The line the terminal shows before a start again."""
        return (
            f"slipstream: {what}: {WORKER_TIMEOUT} within Spark's fixed 10 s (a busy "
            f"machine); starting again from the checkpoint in {pause:.0f} s "
            f"(try {self.tries + 1}, {self.waited(now):.0f} s since the first failure, "
            f"giving up after {self.budget_s:.0f} s)"
        )
