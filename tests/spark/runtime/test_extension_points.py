"""Adding a source or a sink is one class: a test-only source and a test-only sink, defined
here and registered through the public registries, run a pipeline end to end; and the
capabilities the built-in kinds declare are the ones slipstream had as string sets."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.core.specs import SinkSpec, sink_help
from slipstream.ingest.records import SOURCE
from slipstream.sinks import registry as sink_registry
from slipstream.sinks.base import BatchInfo, BatchSink, local_rows
from slipstream.sources import registry as source_registry
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions
from slipstream.testing import PipelineHarness


class LinesSource(Source):
    """Text lines from the files of the input's folder, as Spark's text source reads them."""

    kind = "test_lines"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        frame = spark.readStream.format("text").load(str(binding.path))
        return RawInput(frame.withColumn(SOURCE, F.lit(self.kind)), "text", True)


class JsonLinesSink(BatchSink):
    """Each batch's rows appended to the JSON lines file `test_rows:PATH` names."""

    kind = "test_rows"
    target_grammar = "required"
    usage = "test_rows:FILE"

    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        with Path(str(self.spec.target)).open("a") as out:
            for row in local_rows(batch):
                out.write(json.dumps(row.asDict()) + "\n")


class ShoutPipeline(Pipeline):
    name = "shout"
    description = "each non-empty line upper-cased, with its length"
    inputs = (Input("lines", format="text", sources=("test_lines",)),)
    outputs = (Output("shouted", modes=("append",), sink=None),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        lines = inputs["lines"].filter(F.col("value") != "")
        return {
            "shouted": lines.select(
                F.upper("value").alias("line"), F.length("value").alias("length")
            )
        }


@pytest.fixture
def registered() -> Iterator[None]:
    source_registry.register(LinesSource)
    sink_registry.register(JsonLinesSink)
    yield
    source_registry.unregister(LinesSource.kind)
    sink_registry.unregister(JsonLinesSink.kind)


def test_a_registered_sink_kind_parses_and_is_made_from_its_spec(
    registered: None, tmp_path: Path
) -> None:
    spec = SinkSpec.parse(f"test_rows:{tmp_path / 'out.jsonl'}")
    assert spec == SinkSpec("test_rows", str(tmp_path / "out.jsonl"))
    assert "test_rows:FILE" in sink_help()
    assert isinstance(sink_registry.make_sink(spec, tmp_path / "db"), JsonLinesSink)
    assert isinstance(source_registry.get_source("test_lines"), LinesSource)
    with pytest.raises(ValueError):
        SinkSpec.parse("test_rows")  # its target is required, as it declared


def test_registering_needs_a_class_of_the_base_with_its_own_kind() -> None:
    with pytest.raises(TypeError):
        sink_registry.register(BatchSink)  # type: ignore[type-abstract]
    with pytest.raises(TypeError):
        source_registry.register(JsonLinesSink)  # type: ignore[arg-type]


@pytest.mark.spark
def test_a_test_only_source_and_sink_run_a_pipeline_end_to_end(
    spark: SparkSession, registered: None, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    batches = [["hello world", "", "a"], ["slipstream", "streams", ""]]
    with PipelineHarness(
        spark, ShoutPipeline(), tmp_path, source="test_lines", sink=f"shouted=test_rows:{out}"
    ) as h:
        for lines in batches:
            h.feed(lines)
            h.process()
    written = pd.DataFrame([json.loads(line) for line in out.read_text().splitlines()])

    given = pd.Series([line for batch in batches for line in batch], name="value")
    given = given[given != ""]
    expected = pd.DataFrame({"line": given.str.upper(), "length": given.str.len()})
    key = ["line", "length"]
    pd.testing.assert_frame_equal(
        written.sort_values(key).reset_index(drop=True),
        expected.sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )


# -- the built-in kinds declare what slipstream decided by string sets before ----------------


def _sources_that(capable: str) -> set[str]:
    return set(source_registry.kinds_that(capable))


def _sinks_that(capable: str) -> set[str]:
    return set(sink_registry.kinds_that(capable))


def test_the_built_in_sources_capabilities_are_todays() -> None:
    kinds = ["files", "socket", "rate", "table", "kafka", "format", "delta"]
    assert list(source_registry.sources()) == kinds
    assert _sources_that("continuous") == {"rate", "kafka"}  # validate.CONTINUOUS_SOURCES
    assert _sources_that("real_time") == {"kafka"}  # realtime.SOURCES
    assert set(source_registry.sources()) - _sources_that("stageable") == {"socket"}
    assert set(source_registry.sources()) - _sources_that("replayable") == {"socket"}
    assert _sources_that("reads_files") == {"files"}
    assert _sources_that("binds_topics") == {"kafka"}
    assert _sources_that("binds_formats") == {"format"}
    assert _sources_that("needs_kafka_connector") == {"kafka"}
    assert _sources_that("delta") == _sources_that("reads_format") == {"delta"}
    resumes = {
        k for k, c in source_registry.sources().items()
        if c.start_from_old is not Source.start_from_old
    }  # fmt: skip
    assert resumes == {"files", "kafka"}  # --from-checkpoint: OLD's files, OLD's offsets


def test_the_built_in_sinks_capabilities_are_todays() -> None:
    kinds = ["console", "memory", "noop", "parquet", "orc", "json", "csv", "sqlite", "postgresql"]
    assert list(sink_registry.sinks()) == [*kinds, "foreach", "batch", "kafka", "table", "delta"]
    assert _sinks_that("continuous") == {"console", "memory", "kafka", "foreach"}
    assert _sinks_that("real_time") == {"console", "foreach", "kafka", "sqlite", "postgresql"}
    assert _sinks_that("database") == {"sqlite", "postgresql"}
    assert _sinks_that("file") == {"parquet", "orc", "json", "csv"}
    assert _sinks_that("local_path") == {"parquet", "orc", "json", "csv", "sqlite", "delta"}
    assert _sinks_that("needs_kafka_connector") == {"kafka"}
    assert _sinks_that("delta") == {"delta"}
    refused = {k for k, c in sink_registry.sinks().items() if c.connect_refusal}
    assert refused == {"console"}
    drivers = {
        k: (c.jdbc.coordinate, c.jdbc.driver_class)
        for k, c in sink_registry.sinks().items()
        if c.jdbc is not None
    }
    assert drivers == {
        "sqlite": ("org.xerial:sqlite-jdbc:3.54.1.0", "org.sqlite.JDBC"),
        "postgresql": ("org.postgresql:postgresql:42.7.14", "org.postgresql.Driver"),
    }
    assert sink_help() == (
        "console, memory, noop, parquet:DIR, orc:DIR, json:DIR, csv:DIR, sqlite[:PATH], "
        "postgresql[://user[:password]@host[:port]/db], foreach:module:attr, "
        "batch:module:attr, kafka://host:port/topic, table:NAME, delta:DIR"
    )
    targets = {k: c.target_grammar for k, c in sink_registry.sinks().items()}
    assert targets == {
        "console": "none", "memory": "none", "noop": "none", "parquet": "required",
        "orc": "required", "json": "required", "csv": "required", "sqlite": "optional",
        "postgresql": "url",
        "foreach": "module", "batch": "module", "kafka": "url", "table": "required",
        "delta": "required",
    }  # fmt: skip
    how = {k: c.real_time_how() for k, c in sink_registry.sinks().items() if c.real_time}
    assert how["console"] == "Spark's console sink" and how["foreach"] == "Spark's foreach sink"
    assert how["kafka"].startswith("Spark's Kafka sink (at-least-once")
    assert how["sqlite"] == how["postgresql"]
    assert how["sqlite"].startswith("upserted on the output's key")


def test_settings_parse_a_sink_in_a_program_that_never_imported_the_sinks() -> None:
    # settings sit below sinks: the package root hands core the sinks' registry to load
    import subprocess
    import sys

    program = (
        "import sys\n"
        "import slipstream.core.specs  # this checkout's\n"
        "from slipstream.settings.config import load_settings\n"
        "assert 'slipstream.sinks.registry' not in sys.modules\n"
        "s = load_settings('wordcount', {'sink': 'csv:/tmp/x'}, environ={})\n"
        "print(s.sink[''].kind, s.sink[''].is_file_sink)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["csv", "True"]
