"""The foreach sink: a ForeachWriter-style object, and what open(partition, epoch) allows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.sinks.foreach import ForeachSink, JsonLinesWriter, load_writer, read_jsonl

SAMPLES = Path(__file__).resolve().parents[3] / "src" / "slipstream" / "data" / "mobile"


def print_row(row) -> None:  # a plain function: Spark accepts it, but it cannot deduplicate
    print(row)


class Row:
    def __init__(self, **values) -> None:
        self.values = values

    def asDict(self) -> dict:  # noqa: N802 - pyspark's Row API
        return self.values


def test_bad_targets_are_refused_before_start() -> None:
    for target in ("no_such_module_xyz:Writer", "slipstream.sinks.foreach:Nope", "json:dumps_"):
        with pytest.raises(ConfigError) as err:
            load_writer(target)
        assert err.value.code == "SINK_BAD_TARGET"


def test_describe_says_what_is_guaranteed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SLIPSTREAM_FOREACH_DIR", str(tmp_path))
    writer = ForeachSink(SinkSpec.parse("foreach:slipstream.sinks.foreach:JsonLinesWriter"))
    assert writer.deduplicates and "open(partition, epoch) can skip replays" in writer.describe()
    function = ForeachSink(SinkSpec.parse(f"foreach:{__name__}:print_row"))
    assert not function.deduplicates and "cannot recognise replayed" in function.describe()


def test_a_replayed_epoch_is_skipped_by_open(tmp_path) -> None:
    writer = JsonLinesWriter(tmp_path)
    assert writer.open(partition_id=1, epoch_id=7)
    writer.process(Row(action="open", count=3))
    writer.close(None)
    # The driver crashed before Spark committed epoch 7: Spark replays it, same partitions.
    assert not writer.open(partition_id=1, epoch_id=7)
    assert writer.open(partition_id=0, epoch_id=7)  # another partition is still to be written
    writer.close(RuntimeError("task failed"))  # nothing is published for a failed partition
    assert read_jsonl(tmp_path) == [{"_epoch": 7, "action": "open", "count": 3}]


@pytest.mark.spark
def test_mobile_through_a_foreach_writer(spark, tmp_path, monkeypatch) -> None:
    from slipstream.testing import PipelineHarness

    out = tmp_path / "out"
    monkeypatch.setenv("SLIPSTREAM_FOREACH_DIR", str(out))
    files = sorted(SAMPLES.glob("file*.json"))
    sink = "foreach:slipstream.sinks.foreach:JsonLinesWriter"
    with PipelineHarness(spark, "mobile", tmp_path, sink=sink, mode="update") as h:
        for path in files:
            h.feed(path.read_text(), name=path.name)
            h.process()
    # Update mode: each epoch carries the changed rows; the latest epoch per key is the count.
    rows = pd.DataFrame(read_jsonl(out)).sort_values("_epoch")
    latest = rows.groupby(["window_start", "action"]).tail(1)
    got = dict(
        zip(zip(latest.window_start, latest.action, strict=True), latest["count"], strict=True)
    )
    events = pd.concat([pd.read_json(f, lines=True) for f in files])
    events["start"] = pd.to_datetime(events.ts, utc=True).dt.floor("10min")
    expected = events.groupby(["start", "action"]).size()
    assert got == {
        (start.strftime("%Y-%m-%dT%H:%M:%SZ"), action): n for (start, action), n in expected.items()
    }
