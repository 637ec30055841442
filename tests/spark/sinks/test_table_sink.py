"""A table of Spark's catalog at both ends: a pipeline reads one as a stream
(`--source table`, Spark's `readStream.table`) and writes another (`--sink table:NAME`, Spark's
`toTable`); the written table's files, read with pyarrow, equal pandas over the rows given."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.testing import PipelineHarness

pytestmark = pytest.mark.spark

SCHEMA = "sensor STRING, value INT, ts TIMESTAMP"
START = datetime(2026, 1, 1, tzinfo=UTC)


class TableReadings(Pipeline):
    name = "table_readings"
    description = "the readings with a sensor, from one table into another"
    inputs = (Input("readings", SCHEMA, required=("sensor",), sources=("table",)),)
    outputs = (Output("rows", modes=("append",)),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"rows": inputs["readings"]}


@pytest.fixture
def tables(spark: SparkSession, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Two external parquet tables (in tmp_path, not the warehouse), dropped after."""
    where = {"slipstream_test_in": tmp_path / "in", "slipstream_test_out": tmp_path / "out"}
    for name, folder in where.items():
        spark.sql(f"CREATE TABLE {name} ({SCHEMA}) USING parquet LOCATION '{folder}'")
    yield where
    for name in where:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def test_a_table_read_as_a_stream_and_written_with_to_table_equals_pandas(
    spark: SparkSession, tmp_path: Path, tables: dict[str, Path]
) -> None:
    given = pd.DataFrame(
        [
            (None if i % 5 == 2 else f"s{i % 3}", i * 7 % 11, START + timedelta(seconds=i))
            for i in range(24)
        ],
        columns=["sensor", "value", "ts"],
    )
    spark.createDataFrame(given, SCHEMA).coalesce(2).write.insertInto("slipstream_test_in")
    with PipelineHarness(
        spark,
        TableReadings(),
        tmp_path / "run",
        source="table",
        source_table="slipstream_test_in",
        sink="table:slipstream_test_out",
    ) as h:
        h.process()
        assert h.prepared.primary.sink.describe().startswith("Spark table slipstream_test_out")
    got = pq.read_table(tables["slipstream_test_out"]).to_pandas()  # skips _spark_metadata
    got["ts"] = pd.to_datetime(got["ts"], utc=True)
    expected = given.dropna(subset=["sensor"]).copy()
    expected["ts"] = pd.to_datetime(expected["ts"], utc=True)
    pd.testing.assert_frame_equal(
        got[["sensor", "value", "ts"]].sort_values("ts").reset_index(drop=True),
        expected.sort_values("ts").reset_index(drop=True),
        check_dtype=False,
    )
