"""`--input format:FORMAT[:PATH][?OPTION=VALUE&...]`: the grammar, the options checked before
start, the shortcuts kept, and the binding of a pipeline input to the format source."""

from __future__ import annotations

from pathlib import Path

import pytest

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.core.spark_format import SparkFormat
from slipstream.errors import ConfigError
from slipstream.runtime.bind import prepare
from slipstream.settings.config import load_settings


def test_a_format_with_a_path_and_spark_s_options_parses() -> None:
    parsed = SparkFormat.parse("format:orc:/data/in?maxFilesPerTrigger=2&latestFirst=TRUE")
    assert parsed == SparkFormat(
        "orc", "/data/in", (("maxFilesPerTrigger", "2"), ("latestFirst", "true"))
    )
    assert parsed.reads_files and parsed.needs_schema
    assert SparkFormat.parse("format:my_source?rows=5") == SparkFormat(
        "my_source", None, (("rows", "5"),)
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("format:orc", "reads a folder"),
        ("format:orc:/in?maxFilesPerTrigger=0", "a whole number above 0"),
        ("format:orc:/in?latestFirst=yes", "true or false"),
        ("format:x?a=1&a=2", "given twice"),
        ("format:socket?host=h", "--source socket"),
        ("format:kafka", "kafka://"),
        ("format:?a=1", "FORMAT is a name"),
    ],
)
def test_a_bad_format_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        SparkFormat.parse(text)


def test_an_unknown_format_s_options_pass_through_unchecked() -> None:
    assert SparkFormat.parse("format:com.example.Src?anything=at all").option_map == {
        "anything": "at all"
    }


class Readings(Pipeline):
    name = "format_readings"
    description = "readings from any format"
    inputs = (Input("readings", "sensor STRING, value INT", sources=("format",)),)
    outputs = (Output("all", modes=("append",)),)

    def build(self, spark, inputs, params: Params):  # type: ignore[no-untyped-def]
        return {"all": inputs["readings"]}


def _prepare(tmp_path: Path, given: str, **flags: object):  # type: ignore[no-untyped-def]
    settings = load_settings(
        "format_readings", {"input": given, "state_dir": tmp_path / "st", **flags}, environ={}
    )
    return prepare(settings, Readings())


def test_a_pipeline_reading_only_a_format_binds_it(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    prepared = _prepare(tmp_path, f"format:orc:{tmp_path / 'in'}")
    bound = prepared.inputs["readings"]
    assert bound.source is not None and bound.source.kind == "format"
    assert bound.binding.path == tmp_path / "in"
    assert "format:orc" in bound.source.describe(bound.binding, bound.source_options)


def test_a_format_binds_an_input_whatever_kinds_it_offers(tmp_path: Path) -> None:
    class FilesOnly(Readings):
        inputs = (Input("readings", "sensor STRING, value INT"),)  # files only

    settings = load_settings(
        "format_readings", {"input": "format:my_source", "state_dir": tmp_path}, environ={}
    )
    assert prepare(settings, FilesOnly()).inputs["readings"].binding.spark_format is not None


def test_a_missing_folder_and_a_conflicting_source_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a directory"):
        _prepare(tmp_path, f"format:orc:{tmp_path / 'nowhere'}")
    with pytest.raises(ConfigError, match="names a Spark format, but --source files"):
        _prepare(tmp_path, "format:my_source", source="files")


def test_orc_without_a_declared_schema_is_refused(tmp_path: Path) -> None:
    class Lines(Readings):
        inputs = (Input("readings", format="text", sources=("format",)),)

    (tmp_path / "in").mkdir()
    settings = load_settings(
        "format_readings",
        {"input": f"format:orc:{tmp_path / 'in'}", "state_dir": tmp_path},
        environ={},
    )
    with pytest.raises(ConfigError, match="needs their schema"):
        prepare(settings, Lines())
