"""issue 44: a pipeline's configuration error fails the harness before any JVM starts, when
the harness is given `session` (uncalled) instead of a session. The fast tier refuses a JVM to
a test without the `spark` mark (tests/conftest.py), so reaching Spark would fail this test.
The harness's reading of a query's progress is checked here too, on Spark's progress records
as a loaded machine left them (no JVM needed)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pyspark.sql import DataFrame, SparkSession

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.errors import SlipstreamError
from slipstream.runtime.run import Run
from slipstream.testing import PipelineHarness, session


class AppendOnly(Pipeline):
    """An output that offers append only (no `modes=`), as a new user writes it first."""

    name = "append_only"
    inputs = (Input("lines", format="text", sources=("files",)),)
    outputs = (Output("counts", key=("value",)),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"counts": inputs["lines"].groupBy("value").count()}


def test_a_mode_the_output_does_not_offer_fails_before_any_jvm(tmp_path: Path) -> None:
    began = time.monotonic()
    with pytest.raises(SlipstreamError) as refused:
        PipelineHarness(session, AppendOnly(), tmp_path, sink="sqlite", mode="complete")
    assert refused.value.code == "MODE_NOT_SUPPORTED", refused.value
    assert "complete" in str(refused.value)
    assert time.monotonic() - began < 5


def test_a_factory_is_called_only_when_the_run_needs_a_session(tmp_path: Path) -> None:
    made: list[str] = []

    def factory() -> SparkSession:
        made.append("session")
        raise RuntimeError("no JVM in the fast tier")

    harness = PipelineHarness(factory, "wordcount", tmp_path, sink="sqlite", mode="complete")
    assert made == []  # bound and checked without a session
    with pytest.raises(RuntimeError, match="no JVM"):
        harness.spark  # noqa: B018 - the property makes the session
    assert made == ["session"]


def _ran(batch: int, rows: int, watermark: str, state: int) -> dict[str, Any]:
    """A batch's progress as Spark reports it (a batch of no data has 0 rows and addBatch)."""
    return {
        "batchId": batch,
        "numInputRows": rows,
        "durationMs": {"addBatch": 3, "latestOffset": 1, "triggerExecution": 9, "walCommit": 2},
        "eventTime": {"watermark": watermark},
        "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": state}],
    }


def _idle(next_batch: int) -> dict[str, Any]:
    """Spark's idle report: no batch ran for noDataProgressEventInterval; it carries the next
    batch's id, no rows, no watermark and no state operators."""
    return {
        "batchId": next_batch,
        "numInputRows": 0,
        "durationMs": {"latestOffset": 1, "triggerExecution": 1},
        "eventTime": {},
        "stateOperators": [],
    }


def test_progress_is_the_batches_that_ran_not_sparks_idle_reports(tmp_path: Path) -> None:
    """What `recentProgress` held in a CI run on a loaded machine: an idle report before the
    first file's batch, another between batches and one after the last."""
    h = PipelineHarness(session, "mobile", tmp_path, sink="sqlite", mode="update")
    recent = [
        _idle(0),
        _ran(0, 5, "2026-01-01T00:00:00.000Z", 4),
        _idle(1),
        _ran(1, 0, "2026-01-01T01:00:00.000Z", 0),  # a batch of no data: it ran
        _ran(2, 3, "2026-01-01T01:00:00.000Z", 3),
        _idle(3),
    ]
    h.run = cast(Run, SimpleNamespace(queries={"counts": SimpleNamespace(recentProgress=recent)}))
    assert [(p["batchId"], p["numInputRows"]) for p in h.progress("counts")] == [
        (0, 5),
        (1, 0),
        (2, 3),
    ]
    assert h.progress() == h.progress("counts")  # the first output by default
    assert h.watermark() == datetime(2026, 1, 1, 1, tzinfo=UTC)  # not the idle report's none
    assert h.state_rows() == 3
    h.run = None  # nothing to stop
