"""Any Spark format as an input (`format:FORMAT[:PATH]?...`, sources/spark_format.py): a Python
data source the pipeline registers, read through slipstream with its required field and
event-time guard, equals pandas over the same rows; ORC files read the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
import pyarrow.orc as po
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.sinks.quarantine import read_quarantine
from slipstream.testing import PipelineHarness

pytestmark = pytest.mark.spark

START = datetime(2026, 1, 1, tzinfo=UTC)


def reading(i: int) -> tuple[str | None, int, datetime]:
    """Row i of the counter source: every 7th has no sensor (a required field)."""
    sensor = None if i % 7 == 3 else f"s{i % 3}"
    return sensor, i * 10 % 17, START + timedelta(seconds=i)


class CounterReader(SimpleDataSourceStreamReader):
    """`rows` readings in all, at most `per_batch` each time Spark asks; replayable: a range
    of offsets is read again the same."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.rows = int(options.get("rows", "50"))
        self.per_batch = int(options.get("per_batch", "20"))

    def initialOffset(self) -> dict[str, int]:
        return {"i": 0}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        end = min(start["i"] + self.per_batch, self.rows)
        return iter([reading(i) for i in range(start["i"], end)]), {"i": end}

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[tuple[Any, ...]]:
        return iter([reading(i) for i in range(start["i"], end["i"])])


class CounterSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "slipstream_test_counter"

    def schema(self) -> str:
        return "sensor STRING, value INT, ts TIMESTAMP"

    def simpleStreamReader(self, schema: StructType) -> CounterReader:
        return CounterReader(self.options)


SCHEMA = "sensor STRING, value INT, ts TIMESTAMP"


class SensorTotals(Pipeline):
    name = "sensor_totals"
    description = "the sum and count of each sensor's values (a Python data source)"
    inputs = (
        Input(
            "readings",
            SCHEMA,
            required=("sensor",),
            event_time="ts",
            sources=("format",),
        ),
    )
    outputs = (Output("totals", modes=("complete",)),)
    data_sources = (CounterSource,)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        totals = inputs["readings"].groupBy("sensor")
        return {"totals": totals.agg(F.sum("value").alias("total"), F.count("*").alias("n"))}


def _last(h: PipelineHarness) -> pd.DataFrame:
    """The complete-mode result: the collect sink's last batch."""
    assert h.collector is not None
    return pd.DataFrame(h.collector.batches[max(h.collector.batches)])


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("sensor").reset_index(drop=True)


def test_a_python_data_source_read_through_slipstream_equals_pandas(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = 50
    with PipelineHarness(
        spark,
        SensorTotals(),
        tmp_path,
        source="format",
        input=[f"format:slipstream_test_counter?rows={rows}&per_batch=50"],
        mode="complete",
    ) as h:
        h.process()
        got = _last(h)
        quarantined = spark.read.json(str(h.prepared.inputs["readings"].quarantine)).count()
    given = pd.DataFrame([reading(i) for i in range(rows)], columns=["sensor", "value", "ts"])
    valid = given.dropna(subset=["sensor"])
    expected = valid.groupby("sensor").agg(total=("value", "sum"), n=("value", "size"))
    pd.testing.assert_frame_equal(
        _sorted(got[["sensor", "total", "n"]]),
        _sorted(expected.reset_index()),
        check_dtype=False,
    )
    assert quarantined == len(given) - len(valid)  # the rows without a sensor, kept aside


class OrcReadings(Pipeline):
    name = "orc_readings"
    description = "the valid readings, as read (ORC in, ORC out)"
    inputs = (Input("readings", SCHEMA, required=("sensor",), sources=("format",)),)
    outputs = (Output("rows", modes=("append",)),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"rows": inputs["readings"]}


def test_orc_files_in_and_out_equal_pandas(spark: SparkSession, tmp_path: Path) -> None:
    """ORC read with `format:orc` (Spark's ORC source), written by the orc sink, read back with
    pyarrow: the rows with a sensor, as pandas has them."""
    folder, out = tmp_path / "orc", tmp_path / "out"
    given = pd.DataFrame([reading(i) for i in range(30)], columns=["sensor", "value", "ts"])
    spark.createDataFrame(given, SCHEMA).coalesce(2).write.orc(str(folder))
    with PipelineHarness(
        spark,
        OrcReadings(),
        tmp_path,
        source="format",
        input=[f"format:orc:{folder}?maxFilesPerTrigger=1"],
        sink=f"orc:{out}?compression=zlib",
    ) as h:
        h.process()
        quarantined = read_quarantine(spark, h.prepared.inputs["readings"].quarantine).collect()
    files = sorted(out.glob("*.orc"))
    assert files and all(".zlib." in f.name for f in files)  # the sink's option reached Spark
    got = pd.concat([po.read_table(f).to_pandas() for f in files])
    got["ts"] = pd.to_datetime(got["ts"], utc=True)
    expected = given.dropna(subset=["sensor"]).astype({"value": "int32"})
    expected["ts"] = pd.to_datetime(expected["ts"], utc=True)
    key = ["ts"]
    pd.testing.assert_frame_equal(
        got[["sensor", "value", "ts"]].sort_values(key).reset_index(drop=True),
        expected.sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )
    # each rejected record (no sensor) is quarantined with its own file as `source`: the file
    # pyarrow finds it in
    written = sorted(folder.glob("*.orc"))
    in_file = {
        row["value"]: path
        for path in written
        for row in po.read_table(path).to_pylist()
        if row["sensor"] is None
    }
    assert {
        json.loads(r["raw"])["value"]: Path(urlparse(r["source"]).path) for r in quarantined
    } == in_file
    assert len(set(in_file.values())) == 2  # rejected records in both files: each its own
