"""`--query-name [OUTPUT=]NAME` (issue 42 item 3): Spark's name of an output's query, checked
before any JVM; the monitor keeps slipstream's name for it (monitor/listener.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slipstream.errors import ConfigError
from slipstream.monitor.listener import RunListener
from slipstream.settings.config import load_settings
from slipstream.testing import PipelineHarness


def no_jvm() -> Any:
    raise AssertionError("the harness asked for a session while binding")


def test_the_default_is_pipeline_dot_output(tmp_path: Path) -> None:
    h = PipelineHarness(no_jvm, "mobile", tmp_path)
    assert h.prepared.spark_names["mobile.counts"] == "mobile.counts"


@pytest.mark.parametrize("given", [{"counts": "lake_counts"}, "lake_counts"])
def test_a_name_for_an_output_or_the_first(given: Any, tmp_path: Path) -> None:
    h = PipelineHarness(no_jvm, "mobile", tmp_path, query_name=given)
    names = h.prepared.spark_names
    assert names == {"mobile.counts": "lake_counts"}


def test_a_name_for_an_output_the_pipeline_lacks_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:  # when binding: before the JVM
        PipelineHarness(no_jvm, "mobile", tmp_path, query_name={"nope": "x"})
    assert err.value.code == "CONFIG_BAD_VALUE" and "counts" in str(err.value)


@pytest.mark.parametrize("bad", ["has space", "semi;colon", "", ".dot-first"])
def test_a_name_spark_or_the_logs_could_not_carry_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"query_name": [f"counts={bad}"]}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE"


def test_the_listener_reports_a_renamed_query_under_slipstreams_name() -> None:
    seen: list[dict[str, Any]] = []
    listener = RunListener("mobile", [seen.append], {"lake_counts": "mobile.counts"})
    event = type("Started", (), {"name": "lake_counts", "id": "i", "runId": "r"})()
    listener.onQueryStarted(event)
    other = type("Started", (), {"name": "someone_else", "id": "j", "runId": "r"})()
    listener.onQueryStarted(other)
    assert [(r["event"], r["query"]) for r in seen] == [("started", "mobile.counts")]


def test_a_query_registered_uncounted_says_so_in_its_progress_alone() -> None:
    """A deduplication by timers counts no state rows: its records say so, so its lines show
    no count rather than Spark's 0; the run's other queries keep theirs."""
    seen: list[dict[str, Any]] = []
    listener = RunListener("trending", [seen.append])
    listener.register("i", "trending.views", rows_counted=False)
    listener.register("i2", "trending.views")  # restarted: registered again, still uncounted
    listener.register("j", "trending.sections")
    for name in ("trending.views", "trending.sections"):
        listener.on_progress({"name": name, "id": "x", "runId": "r", "stateOperators": []})
    said = {r["query"]: r.get("state_rows_counted", True) for r in seen}
    assert said == {"trending.views": False, "trending.sections": True}
