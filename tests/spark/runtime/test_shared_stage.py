"""The shared stage (runtime/shared_stage.py): sensors' watermark and deduplication run once, in
one query, and its three outputs read its rows. Finite runs, one after another over the same
checkpoint, each over the files landed since the last (one batch each), over the dirty stream of
tests/spark/pipelines/test_sensors.py: every output equals the independent computation, every
record is accounted for once per output, the late rows are in the shared query's dead-letter and
the rejected ones in the quarantine; a run of the other kind on that checkpoint is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.errors import CheckpointError
from slipstream.monitor.state import read_state
from slipstream.runtime.bound import QueryKind
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness
from slipstream.tools.generators import sensors as sensors_generator
from slipstream.tools.generators.streams import generate
from tests import stream_reference as ref
from tests.helpers import data_batch_ids, landed_batches, late_records
from tests.spark.pipelines.test_sensors import (
    SPEC,
    WATERMARK,
    WINDOW,
    _assert_alerts,
    _assert_baseline,
    _assert_stats_equal,
)

pytestmark = pytest.mark.spark

OUTPUTS = ("sensor_stats", "sensor_alerts", "sensor_baseline")
FILES_PER_RUN = 2


@pytest.fixture(scope="module")
def shared(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("shared-stage")
    fleet = sensors_generator.Sensors(12, 2, 2, 2, seed=SPEC.seed)
    report = generate(SPEC, fleet, root / "generated")
    files = landed_batches(root / "generated", "readings")
    runs = [files[i : i + FILES_PER_RUN] for i in range(0, len(files), FILES_PER_RUN)]
    totals: dict[str, dict[str, int]] = {}
    kinds: set[QueryKind] = set()
    for run in runs:
        harness = PipelineHarness(spark, "sensors", root, sink="sqlite", trigger="available-now")
        for lines in run:
            harness.feed(lines)
        with harness as h:
            assert h.run is not None
            h.run.wait()
            kinds |= {o.kind for o in h.prepared.outputs.values()}
            for query, t in h.totals.items():
                mine = totals.setdefault(query, {})
                for term in ("rows", "quarantined", "late", "duplicates"):
                    mine[term] = mine.get(term, 0) + int(t.get(term, 0))
            tables = {n: h.results(n) for n, o in h.prepared.outputs.items() if o.is_output}
            folder = h.prepared.inputs["readings"].quarantine
            checkpoint = h.prepared.outputs["shared.readings"].ctx.checkpoint
    quarantine = [r.asDict() for r in read_quarantine(spark, folder).collect()]
    batches = [[line for lines in run for line in lines] for run in runs]
    now = datetime.now(UTC)
    readings, stats = ref.counted_readings(batches, WATERMARK, data_batch_ids(checkpoint))
    state = root / "state"
    late = {name: late_records(state, "sensors", name) for name in ("shared.readings", *OUTPUTS)}
    held = read_state(spark, checkpoint)  # what `slipstream state` shows of its deduplication
    malformed = [x for b in batches for x in b if ref.sensor_reading(x, now) is None]
    return {"report": report, "tables": tables, "totals": totals, "readings": readings,
            "stats": stats, "late": late, "quarantine": quarantine, "malformed": malformed,
            "kinds": kinds, "root": root, "sent": sum(map(len, batches)),
            "held": held}  # fmt: skip


def test_the_outputs_read_one_shared_query_and_equal_an_independent_computation(
    shared: dict[str, Any],
) -> None:
    assert QueryKind.SHARED in shared["kinds"]
    stats = shared["stats"]
    assert min(stats["invalid"], stats["late"], stats["duplicates"]) > 0  # every kind of dirt
    _assert_stats_equal(shared["tables"]["sensor_stats"], ref.sensor_stats(shared["readings"],
                        WINDOW), WINDOW)  # fmt: skip
    _assert_alerts(shared, WINDOW)
    _assert_baseline(shared)


def test_every_output_accounts_for_every_record_sent(shared: dict[str, Any]) -> None:
    """Each output's summary counts from the source, as without the stage: records read = the
    lines sent, and the shared query's quarantined, late and duplicates are its own."""
    stats = shared["stats"]
    expected = (shared["sent"], stats["invalid"], stats["late"], stats["duplicates"])
    for query in ("shared.readings", *OUTPUTS):
        t = shared["totals"][f"sensors.{query}"]
        assert (t["rows"], t["quarantined"], t["late"], t["duplicates"]) == expected, query


def test_late_rows_are_written_once_by_the_shared_query_and_rejected_ones_quarantined(
    shared: dict[str, Any],
) -> None:
    late = shared["late"]
    assert sum(len(b) for b in late["shared.readings"].values()) == shared["stats"]["late"]
    assert all(not late[name] for name in OUTPUTS)  # nothing the shared query kept is late
    assert sorted(r["raw"] for r in shared["quarantine"]) == sorted(shared["malformed"])


def test_the_shared_querys_state_is_read_by_slipstream_state(shared: dict[str, Any]) -> None:
    """Its deduplication's ids, keyed by one timestamp (the event time): the newest is the
    newest reading kept, which no watermark has passed yet."""
    (dedup,) = shared["held"]
    assert dedup.operator == "dedupeWithinWatermark" and dedup.error is None
    assert dedup.rows is not None and dedup.rows > 0
    newest = max(r["event_time"] for r in shared["readings"])
    assert dedup.newest_event_time == newest.isoformat().replace("+00:00", "Z")


def test_a_run_of_the_other_kind_on_that_checkpoint_is_refused(
    spark: SparkSession, shared: dict[str, Any]
) -> None:
    harness = PipelineHarness(
        spark, "sensors", shared["root"], sink="sqlite", trigger="available-now",
        shared_stage=False,
    )  # fmt: skip
    with pytest.raises(CheckpointError) as refused, harness:
        pass
    assert refused.value.code == "CHECKPOINT_FROM_SHARED_STAGE"
