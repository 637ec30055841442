"""issue 44: a pipeline's configuration error fails the harness before any JVM starts, when
the harness is given `session` (uncalled) instead of a session. The fast tier refuses a JVM to
a test without the `spark` mark (tests/conftest.py), so reaching Spark would fail this test."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.errors import SlipstreamError
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
