"""The event-time guard (issue 13): one record dated 9999 must not move the watermark and make
every later record late; the runner quarantines it, with its reason, on every input that declares
an event-time column. Settings first (no Spark), then a streaming run against plain Python."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from slipstream.api.pipeline import Input, Output, Pipeline, check_declaration
from slipstream.errors import ConfigError
from slipstream.ingest.guard import TOO_FAR_IN_FUTURE, TOO_OLD
from slipstream.pipelines import get_pipeline
from slipstream.pipelines.registry import pipelines
from slipstream.runtime.bind import prepare
from slipstream.settings.config import load_settings
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from tests.helpers import late_records

# --- settings: bounded, named, before Spark -------------------------------------------------


def test_max_future_defaults_to_a_day_and_max_past_to_off() -> None:
    s = load_settings("mobile", environ={})
    assert (s.max_future, s.max_past) == (timedelta(days=1), None)
    s = load_settings("mobile", {"max_future": "2h", "max_past": "30d"}, environ={})
    assert (s.max_future, s.max_past) == (timedelta(hours=2), timedelta(days=30))
    assert load_settings("mobile", {"max_past": "off"}, environ={}).max_past is None


def test_the_guard_settings_are_toml_keys(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('max-future = "90m"\nmax_past = "7d"\n')
    s = load_settings("mobile", config_file=config, environ={})
    assert (s.max_future, s.max_past) == (timedelta(minutes=90), timedelta(days=7))


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"max_future": "3651d"}, "3650 days"),  # the bound, in the message
        ({"max_past": "100000h"}, "3650 days"),
        ({"max_future": "0s"}, "positive"),
        ({"max_future": "off"}, "--max-future"),  # the upper bound cannot be turned off
        ({"max_past": "soon"}, "--max-past"),
    ],
)
def test_guard_settings_out_of_bounds_are_refused_naming_the_bound(
    flags: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings("mobile", flags, environ={})
    assert caught.value.code == "CONFIG_BAD_VALUE"
    assert named in caught.value.message
    assert "--max-" in caught.value.message


def _guarded(pipeline: Pipeline, tmp_path: Path) -> dict[str, str | None]:
    settings = load_settings(pipeline.name, {"state_dir": tmp_path}, environ={})
    prepared = prepare(settings, pipeline, check_source=False)
    return {
        n: (b.guard.column if b.guard else None)
        for n, b in prepared.inputs.items()
        if b.source is not None
    }


def test_every_stream_input_with_an_event_time_column_is_guarded(tmp_path: Path) -> None:
    """The runner guards by declaration: built-ins, the examples and user pipelines alike; no
    pipeline declares a rule of its own for it."""
    found = dict(pipelines())
    for ref in ("examples.orders:Orders", "examples.seeds:OpenActions"):
        found[ref] = get_pipeline(ref)
    assert len(found) >= 10
    for pipeline in found.values():
        declared = {i.name: i.event_time for i in pipeline.stream_inputs()}
        assert _guarded(pipeline, tmp_path) == declared, pipeline.name
        for spec in pipeline.stream_inputs():
            rules = pipeline.expectations(spec.name, pipeline.parse_params({}))
            assert not [r for r in rules if "future" in r.name], pipeline.name
    assert _guarded(found["mobile"], tmp_path) == {"actions": "ts"}
    assert _guarded(found["wordcount"], tmp_path) == {"lines": None}


def test_an_event_time_column_that_is_not_a_timestamp_field_is_refused() -> None:
    class Wrong(Pipeline):
        name = "wrong"
        description = "event_time names a text field"
        inputs = (Input("a", StructType([StructField("ts", StringType())]), event_time="ts"),)
        outputs = (Output("o"),)

        def build(self, spark: Any, inputs: Any, params: Any) -> Any:
            return {}

    with pytest.raises(ConfigError) as caught:
        check_declaration(Wrong())
    assert caught.value.code == "PIPELINE_INVALID"
    assert "event_time 'ts'" in caught.value.message


# --- a streaming run: the 9999 record is quarantined, later records still count -------------

WINDOW = WATERMARK = timedelta(minutes=10)
T0 = datetime(2018, 3, 2, 10, 0, tzinfo=UTC)


def _action(ident: str, action: str, at: datetime | str) -> str:
    ts = at if isinstance(at, str) else at.isoformat().replace("+00:00", "Z")
    return json.dumps({"id": ident, "action": action, "ts": ts})


FUTURE = _action("f1", "open", "9999-12-31T00:00:00Z")
ANCIENT = _action("o1", "open", "2000-01-01T00:00:00Z")  # older than --max-past 3650d
BATCHES = [
    [_action("p1", "open", T0 + timedelta(minutes=2)), FUTURE, ANCIENT,
     _action("p2", "close", T0 + timedelta(minutes=4))],
    [_action("p3", "open", T0 + timedelta(minutes=21)),
     _action("p4", "open", T0 + timedelta(minutes=25))],
    [_action("p5", "click", T0 + timedelta(minutes=41)),
     _action("p6", "open", T0 + timedelta(minutes=38))],
    [_action("p7", "open", T0 + timedelta(minutes=5)),  # late: the watermark is at 10:31
     _action("p8", "close", T0 + timedelta(minutes=44))],
]  # fmt: skip


def _independent(batches: list[list[str]], now: datetime) -> tuple[Counter, list[str], int]:
    """Plain Python: the guard's bounds, then Spark's late rule for a window aggregation (a
    row whose window ended at or before the previous batch's watermark is dropped). The
    harness runs each file until idle, so a no-data batch at the new watermark follows every
    data batch: the previous batch's watermark is the newest valid event time of all earlier
    batches minus the delay."""
    counts: Counter = Counter()
    quarantined: list[str] = []
    late = 0
    newest: datetime | None = None
    for batch in batches:
        watermark = None if newest is None else newest - WATERMARK
        for line in batch:
            record = json.loads(line)
            at = datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
            if at > now + timedelta(days=1) or at < now - timedelta(days=3650):
                quarantined.append(line)
                continue
            newest = at if newest is None else max(newest, at)
            start = at.replace(minute=at.minute - at.minute % 10, second=0, microsecond=0)
            if watermark is not None and start + WINDOW <= watermark:
                late += 1
                continue
            counts[(start.isoformat().replace("+00:00", "Z"), record["action"])] += 1
    return counts, quarantined, late


@pytest.mark.spark
def test_a_9999_record_is_quarantined_and_later_records_still_count(
    spark: SparkSession, tmp_path: Path
) -> None:
    with PipelineHarness(
        spark,
        "mobile",
        tmp_path,
        sink="sqlite",
        mode="update",
        max_files_per_trigger=1,
        max_past="3650d",
    ) as h:
        for batch in BATCHES:
            h.feed(batch)
            h.process()
        table = h.results()
        quarantine = read_quarantine(spark, h.prepared.inputs["actions"].quarantine).collect()
        totals = h.totals["mobile.counts"]
        watermark = h.watermark()

    counts, want_quarantined, want_late = _independent(BATCHES, datetime.now(UTC))
    assert want_quarantined == [FUTURE, ANCIENT] and want_late == 1
    got = Counter({(r["window_start"], r["action"]): r["count"] for r in table})
    assert got == counts
    assert sum(counts.values()) == 7  # p1..p8 but the late p7
    reasons = {r["raw"]: r["reason"] for r in quarantine}
    assert set(reasons) == set(want_quarantined)
    assert reasons[FUTURE].startswith(TOO_FAR_IN_FUTURE + ":")
    assert reasons[ANCIENT].startswith(TOO_OLD + ":")
    # the watermark followed the valid records, not year 9999
    assert watermark == T0 + timedelta(minutes=44) - WATERMARK
    # valid + quarantined + late = sent
    sent = sum(len(b) for b in BATCHES)
    assert totals["rows"] == sent
    assert (totals["quarantined"], totals["late"]) == (2, 1)
    late = [r for b in late_records(tmp_path / "state", "mobile", "counts").values() for r in b]
    assert len(late) == 1 and late[0]["raw"] not in reasons  # not also quarantined
    assert sum(got.values()) + totals["quarantined"] + len(late) == sent
