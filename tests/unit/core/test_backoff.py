"""core/backoff.py: the pauses before a query whose Python worker was slow to connect back is
started again, and where they end."""

from __future__ import annotations

from slipstream.core.backoff import SlowWorker


def test_pauses_double_up_to_their_ceiling_within_the_budget() -> None:
    slow = SlowWorker(budget_s=300, first_pause_s=2, max_pause_s=30)
    now, pauses = 100.0, []
    while (pause := slow.pause_after_failure(now)) is not None:
        pauses.append(pause)
        now += pause + 10  # the pause, then Spark's fixed 10 s of the next failed start
    assert pauses[:6] == [2, 4, 8, 16, 30, 30]
    # the last start begins within the budget, counted from the first failure at 100
    assert sum(pauses) + 10 * (len(pauses) - 1) <= 300
    assert now - 100 + 30 > 300  # one more pause would have passed it
    assert slow.tries == len(pauses)


def test_only_a_worker_that_did_not_connect_back_is_a_slow_start() -> None:
    assert SlowWorker.is_slow_start(RuntimeError("[PYTHON] Python worker failed to connect back."))
    assert not SlowWorker.is_slow_start(RuntimeError("[STREAM_FAILED] something else"))
    assert not SlowWorker.is_slow_start(None)


def test_the_line_says_what_happens_and_for_how_long() -> None:
    slow = SlowWorker(budget_s=300)
    pause = slow.pause_after_failure(50.0)
    assert pause == 2
    line = slow.says("activity.user_status", pause, 53.0)
    assert "activity.user_status" in line and "fixed 10 s" in line
    assert "in 2 s (try 2, 3 s since the first failure, giving up after 300 s)" in line
