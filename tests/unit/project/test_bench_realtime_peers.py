"""Scenario realtime_peers (issue 39, item 4): the peers' model of mobile's valid action and
window is mobile's, a run's summary reads growth and the final table as documented, the
producer sends no record before its time, and a pinned run keeps the engine on its own core."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from bench.peers.peer_common import mobile_action, tumbling_start
from bench.procs import Proc, split_cores
from bench.scenarios.realtime import Observed, paced, summary
from bench.scenarios.realtime_peers import engine_of, peer_argv

from tests import stream_reference as ref

LINES = [
    '{"id": "p1", "action": "open", "ts": "2026-11-29T10:03:07.123456Z"}',
    '{"id": "p1", "action": "open", "ts": "2026-11-29T10:03:07.123"}',
    '{"id": "p1", "action": "swipe", "ts": "2026-11-29T12:09:59+02:00"}',
    '{"id": 7, "action": "open", "ts": "2026-11-29T10:03:07Z"}',
    '{"id": "p1", "action": ["open"], "ts": "2026-11-29T10:03:07Z"}',
    '{"id": "p1", "action": "open", "ts": "yesterday"}',
    '{"id": "p1", "action": "open"}',
    '["p1", "open"]',
    "not json",
]


@pytest.mark.parametrize("line", LINES)
def test_a_peer_takes_the_actions_mobile_takes(line: str) -> None:
    expected = ref.mobile_action(line)
    got = mobile_action(line)
    if expected is None:
        assert got is None
    else:
        assert got == (expected["action"], expected["ts"])
        window = ref.window_start(expected["ts"], timedelta(minutes=10))
        assert tumbling_start(got[1]) == window


def observed(latency_at: dict[float, float], final: dict, expected: dict) -> Observed:
    samples = [(t, lat) for t, lat in sorted(latency_at.items())]
    return Observed(samples, len(samples), 1000.0, final, expected)


def test_a_variant_may_name_its_flush_interval_and_flink_is_given_it() -> None:
    assert engine_of("slipstream", 20) == ("slipstream", 20)
    assert engine_of("flink:5", 20) == ("flink", 5)
    for bad in ("flinck", "slipstream:fast", "flink:-5"):
        with pytest.raises(ValueError, match="unknown variant"):
            engine_of(bad, 20)
    with pytest.raises(ValueError, match="flush interval"):
        engine_of("bytewax:5", 20)  # its interval would be ignored
    assert "--flush-ms=7" in peer_argv("flink", "127.0.0.1:9092", "t", 7)
    assert not any(a.startswith("--flush-ms") for a in peer_argv("bytewax", "b:1", "t", 7))


def test_steady_compares_the_last_20_s_with_the_first() -> None:
    # records every 0.5 s for 60 s: 0.1 s of latency over the first 30 s, 0.4 s after
    latency = {i / 2: (0.1 if i < 60 else 0.4) for i in range(120)}
    key = ("2026-11-29T10:00:00Z", "open")
    row = summary(observed(latency, {key: 120}, {key: 120}))
    assert (row["p50_first_ms"], row["p50_last_ms"], row["steady"]) == (100, 400, 4.0)
    assert row["equal"] and row["visible"] == 120
    assert row["max_ms"] == 400


def test_a_table_that_misses_a_count_is_not_equal() -> None:
    key = ("2026-11-29T10:00:00Z", "open")
    row = summary(observed({0.0: 0.05, 1.0: 0.05}, {key: 1}, {key: 2}))
    assert not row["equal"]
    assert "steady" not in row  # 1 s measured: no first and last 20 s to compare


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="splitting needs two cores")
def test_split_cores_puts_the_engine_on_its_core_and_the_rest_elsewhere(tmp_path: Path) -> None:
    mine = os.sched_getaffinity(0)
    engine = {min(mine)}
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    with split_cores(engine) as others:
        assert others == mine - engine
        assert os.sched_getaffinity(0) == others  # this process, and what it starts itself
        plain = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True)
        proc = Proc([sys.executable, "-c", show], tmp_path / "engine.log")
        assert proc.wait(60) == 0
    assert os.sched_getaffinity(0) == mine
    assert plain.stdout.strip() == str(sorted(others))
    assert (tmp_path / "engine.log").read_text().splitlines()[-1] == str(sorted(engine))
    # outside the split, an engine runs wherever the system puts it
    proc = Proc([sys.executable, "-c", show], tmp_path / "free.log")
    assert proc.wait(60) == 0
    assert (tmp_path / "free.log").read_text().splitlines()[-1] == str(sorted(mine))


class FakeClock:
    """Time that moves only when slept, and by `step` at every read (a slow producer)."""

    def __init__(self, step: float = 0.0) -> None:
        self.now, self.step, self.slept = 100.0, step, 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        self.slept += seconds


@pytest.mark.parametrize(("tick_s", "step"), [(0.001, 0.0), (0.001, 0.0004), (0.0, 0.0)])
def test_the_producer_sends_every_record_once_and_none_before_its_time(
    tick_s: float, step: float
) -> None:
    clock, rate, total = FakeClock(step), 10_000, 2_000
    began = clock.now + step  # paced reads the clock once to start
    sent: list[int] = []
    for batch in paced(total, rate, tick_s, clock=clock, sleep=clock.sleep):
        at = clock.now
        assert len(batch) > 0
        assert all(began + n / rate <= at + 1e-9 for n in batch), (batch, at)
        sent.extend(batch)
    assert sent == list(range(total))
    again = FakeClock(step)
    sizes = [len(b) for b in paced(total, rate, tick_s, clock=again, sleep=again.sleep)]
    if tick_s == 0:
        assert sizes == [1] * total
    else:  # several records a request: up to a tick's (or a slow read's) worth
        assert len(sizes) <= total / 4
        assert max(sizes) <= rate * max(tick_s, 2 * step) + 2
