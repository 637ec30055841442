"""The warning before a live run's state fills the driver's heap (runtime/state_heap.py): once,
when the state stores' memory over all of the run's queries passes half the heap, naming the
sizes and the way off the heap; never for a state that stays under it."""

from __future__ import annotations

import logging

import pytest

from slipstream.runtime.partitions import ROCKSDB_STORE
from slipstream.runtime.state_heap import MIB, StateHeapWatch
from slipstream.settings.session import STATE_PROVIDER


def progress(query: str, *used: int) -> dict[str, object]:
    operators = [{"operatorName": "op", "memoryUsedBytes": u} for u in used]
    return {"event": "progress", "query": query, "progress": {"stateOperators": operators}}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_warns_once_when_the_queries_state_passes_half_the_heap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    heap = 1000 * MIB
    watch = StateHeapWatch("trending", "state/checkpoints/trending", heap)
    caplog.set_level(logging.WARNING, logger="slipstream.runtime.state_heap")
    watch(progress("trending.views", 200 * MIB, 100 * MIB))
    watch({"event": "idle", "query": "trending.views"})
    watch(progress("trending.other", 150 * MIB))
    assert warnings(caplog) == []  # 450 MiB of 1000: under half
    watch(progress("trending.views", 250 * MIB, 150 * MIB))  # the latest per query: 400 + 150
    watch(progress("trending.views", 300 * MIB, 200 * MIB))
    [message] = warnings(caplog)
    assert "holds 550 MiB of the driver's heap (55% of 1000 MiB)" in message
    assert "trending.other, trending.views" in message
    assert "slipstream run trending --from-checkpoint state/checkpoints/trending" in message
    assert f"--state-dir NEW --conf {STATE_PROVIDER}={ROCKSDB_STORE}`" in message
    assert "spark.driver.memory" in message


def test_a_state_under_half_the_heap_or_without_memory_figures_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = StateHeapWatch("trending", "cp", 1000 * MIB)
    caplog.set_level(logging.WARNING, logger="slipstream.runtime.state_heap")
    watch(progress("trending.views", 500 * MIB))  # exactly half: not over it
    watch({"event": "progress", "query": "trending.views", "progress": {}})
    watch(progress("trending.views", 0))
    assert warnings(caplog) == []


def test_a_deduplication_within_the_watermark_is_pointed_at_its_form_by_timers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`trending` under `--dedup within-watermark` (a live run's): the way off the heap is
    `--dedup timers`, whose query keeps its state on RocksDB and whose batch does not read
    every id held."""
    watch = StateHeapWatch("trending", "cp", 1000 * MIB, dedup="within-watermark")
    caplog.set_level(logging.WARNING, logger="slipstream.runtime.state_heap")
    watch(progress("trending.views", 600 * MIB))
    [message] = warnings(caplog)
    assert "--from-checkpoint cp --state-dir NEW --dedup timers`" in message
    assert "RocksDBStateStoreProvider" not in message
