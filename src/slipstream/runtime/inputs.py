"""Reading a run's inputs: a stream input's records from its source, parsed into typed rows with
a `_reason` (ingest.parse) and judged by the event-time guard; a static input read as a batch.
The outputs' queries and the ingest stage's queries share these."""

from __future__ import annotations

import sys

from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession

from slipstream.api.pipeline import Input
from slipstream.ingest.parse import check_typed, parse_csv, parse_json
from slipstream.ingest.records import REASON
from slipstream.runtime.bound import BoundInput, Prepared


def read_records(spark: SparkSession, prepared: Prepared, bound: BoundInput) -> DataFrame:
    """A stream input -> one row per record with typed columns and a `_reason` (NULL when
    valid)."""
    assert bound.source is not None
    register_data_sources(spark, prepared)
    raw = bound.source.read(spark, bound.binding, bound.source_options)
    parsed = parse_input(raw.frame, raw.format, bound.spec)
    if bound.parses and REASON not in parsed.columns and bound.spec.schema is not None:
        # typed rows (a table, a Spark format) of a json or csv input that declares no required
        # field: nothing to reject, but its quarantine query still reads a `_reason`
        parsed = check_typed(parsed, bound.spec.schema, bound.spec.required)
    return parsed


def register_data_sources(spark: SparkSession, prepared: Prepared) -> None:
    """The pipeline's Python data sources, registered on the session (again: harmless), so that
    `spark.readStream.format(NAME)` finds them (sources/spark_format.py). Spark's Python workers
    unpickle them, and may not import the module that defines them (a pipeline given as
    `module:Class` from the working folder, a test's): its classes travel by value."""
    for data_source in prepared.pipeline.data_sources:
        module = sys.modules.get(data_source.__module__)
        if module is not None and module.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(module)
        spark.dataSource.register(data_source)


def parse_input(frame: DataFrame, fmt: str, spec: Input) -> DataFrame:
    """Raw records of an input (json, csv, typed, parquet) -> typed rows with a `_reason`."""
    if fmt == "json":
        assert spec.schema is not None, f"input {spec.name} declares no schema for json"
        return parse_json(frame, spec.schema, spec.required)
    if fmt == "csv":
        assert spec.schema is not None
        return parse_csv(frame, spec.schema, spec.required)
    if fmt == "parquet":  # rows read and rejected files (sources/parquet_files.py)
        assert spec.schema is not None, f"input {spec.name} declares no schema for parquet"
        return check_typed(frame, spec.schema, spec.required)
    if fmt == "typed" and spec.schema is not None and (spec.required or spec.event_time):
        return check_typed(frame, spec.schema, spec.required)
    return frame


def read_guarded(spark: SparkSession, prepared: Prepared, bound: BoundInput) -> DataFrame:
    """`read_records`, then the event-time guard: both the outputs' branch and the quarantine
    query read this, so a record outside the bounds is quarantined and never reaches a
    watermark."""
    records = read_records(spark, prepared, bound)
    return records if bound.guard is None else bound.guard.apply(records)


def read_table(spark: SparkSession, bound: BoundInput) -> DataFrame:
    """A static input, read as a batch (a plan: each micro-batch reads the file again)."""
    spec, path = bound.spec, str(bound.binding.path)
    reader = spark.read
    if spec.schema is not None:
        reader = reader.schema(spec.schema)
    if spec.format == "csv":
        return reader.option("header", "true").csv(path)
    return reader.format(spec.format).load(path)
