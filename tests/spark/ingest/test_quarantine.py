"""Bad input never stops a query and is never silently lost: it lands in the quarantine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from tests.helpers import mobile_counts

pytestmark = pytest.mark.spark

VALID = [
    '{"id": "p1", "action": "open", "ts": "2018-03-02T10:02:33"}',
    '{"id": "p2", "action": "open", "ts": "2018-03-02T10:03:35Z"}',
    '{"id": "p3", "action": "close", "ts": "2018-03-02T12:04:35+02:00"}',  # 10:04:35 UTC
    ' \t {"id": "p10", "action": "open", "ts": "2018-03-02T10:06:00"}',  # JSON space first
]
# (line, the start of the reason it must be quarantined with)
MALFORMED = [
    ("this is not json", "not JSON"),
    ('{"id": "p4", "action": "open", "ts": "2018-03-02T10:0', "not JSON"),
    ("[1, 2, 3]", "not a JSON object"),
    ('  "{just a string}"', "not a JSON object"),
    (" 42", "not a JSON object"),
    ('{"action": "open", "ts": "2018-03-02T10:02:33"}', "missing required field 'id'"),
    ('{"id": "p5", "ts": "2018-03-02T10:02:33"}', "missing required field 'action'"),
    ('{"id": "p6", "action": "open", "ts": null}', "missing required field 'ts'"),
    ('{"id": 6, "action": "open", "ts": "2018-03-02T10:02:33"}', "wrong type for 'id'"),
    ('{"id": "p7", "action": {"a": 1}, "ts": "2018-03-02T10:02:33"}', "wrong type for 'action'"),
    ('{"id": "p8", "action": "open", "ts": "yesterday at noon"}', "unparseable timestamp in 'ts'"),
    ('{"id": "p9", "action": "open", "ts": 1520000000}', "wrong type for 'ts'"),
]


def test_every_kind_of_malformed_record_is_quarantined(spark: SparkSession, tmp_path: Path) -> None:
    lines = VALID[:2] + [m[0] for m in MALFORMED] + VALID[2:]
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", mode="update") as h:
        landed = h.feed(lines, name="mixed.json")
        h.process()
        results = h.results()
        quarantined = read_quarantine(spark, h.prepared.inputs["actions"].quarantine).collect()
        totals = h.totals

    by_raw = {r["raw"]: r for r in quarantined}
    assert len(quarantined) == len(MALFORMED)
    for line, reason in MALFORMED:
        assert by_raw[line]["reason"].startswith(reason), (line, by_raw[line]["reason"])
        assert by_raw[line]["source"].endswith(landed.name)
    # the valid records were counted, exactly as an independent computation says
    expected = mobile_counts(VALID)
    assert sorted((r["window_start"], r["action"], r["count"]) for r in results) == sorted(
        expected.itertuples(index=False, name=None)
    )
    # counts reconcile: valid + quarantined = lines sent, and the batch line saw them
    assert len(VALID) + len(quarantined) == len(lines)
    assert totals["mobile.counts"]["quarantined"] == len(MALFORMED)
    assert totals["mobile.counts"]["rows"] == len(lines)
    assert "mobile.quarantine.actions" not in totals  # no query reads the records again


def test_quarantine_survives_restart_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    bad = [json.dumps({"id": f"x{i}", "action": "open", "ts": "nope"}) for i in range(5)]
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite") as h:
        h.feed(bad[:3])
        h.process()
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite") as h:
        h.feed(bad[3:] + VALID)
        h.process()
        quarantined = read_quarantine(spark, h.prepared.inputs["actions"].quarantine).collect()
    assert sorted(r["raw"] for r in quarantined) == sorted(bad)
