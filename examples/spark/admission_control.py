"""Spark's `python_datasource_admission_control.py` as a slipstream pipeline: a Python data
source of ten numbered rows that admits at most two a micro-batch, read as any Spark format.

    slipstream run examples.spark.admission_control:AdmissionControl \\
        --input format:admission_control_example --sink parquet:out --trigger available-now

The data source is Spark 4's DataSource API (`pyspark.sql.datasource`), unchanged from what a
plain PySpark job would register; the pipeline lists it in `data_sources`, so slipstream
registers it on the session, and `format:admission_control_example` reads it. What the port
gains over the original's `foreachBatch` that collects and prints: an exactly-once sink, the
`check` before start, the run's metrics and dashboard."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from slipstream.api.pipeline import Input, Output, Params, Pipeline

#: the rows the source holds, and the most it admits a micro-batch by default
ROWS = 10
PER_BATCH = 2


def row(i: int) -> tuple[int, str]:
    return i, f"value_{i}"


class Span(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class NumbersReader(DataSourceStreamReader):
    """Rows 0..ROWS-1, at most PER_BATCH a micro-batch unless Spark asks for all
    (available-now): Spark's admission control."""

    def initialOffset(self) -> dict[str, int]:
        return {"offset": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(PER_BATCH)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        at = start["offset"]
        if isinstance(limit, ReadAllAvailable):
            return {"offset": ROWS}
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else PER_BATCH
        return {"offset": min(at + most, ROWS)}

    def reportLatestOffset(self) -> dict[str, int]:
        return {"offset": ROWS}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        if start["offset"] >= end["offset"]:
            return []
        return [Span(start["offset"], end["offset"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, Span)
        return iter([row(i) for i in range(partition.start, partition.end)])


class NumbersSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "admission_control_example"

    def schema(self) -> str:
        return "id INT, value STRING"

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return NumbersReader()


class AdmissionControl(Pipeline):
    name = "admission_control"
    description = "Spark's admission-control example: a Python data source's rows, as read"
    inputs = (Input("numbers", "id INT, value STRING", sources=("format",)),)
    outputs = (Output("rows", modes=("append",), sink="parquet"),)
    data_sources = (NumbersSource,)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"rows": inputs["numbers"]}
