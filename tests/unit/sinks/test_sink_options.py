"""Sink options (issue 42 item 3): `KIND[:TARGET]?NAME=VALUE&...`, Spark's own names, checked
when the spec is parsed; every spec without `?` parses as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.settings.config import load_settings
from slipstream.sinks.registry import make_sink
from slipstream.sinks.spark_sinks import ConsoleSink


@pytest.mark.parametrize(
    ("text", "kind", "target", "options"),
    [
        (
            "console?numRows=20&truncate=true",
            "console",
            None,
            {"numRows": "20", "truncate": "true"},
        ),
        ("console:?numRows=20", "console", None, {"numRows": "20"}),
        (
            "parquet:/out?compression=zstd&partitionBy=action,id",
            "parquet",
            "/out",
            {"compression": "zstd", "partitionBy": "action,id"},
        ),
        ("csv:out?sep=;&header=false", "csv", "out", {"sep": ";", "header": "false"}),
        ("json:/o?compression=gzip", "json", "/o", {"compression": "gzip"}),
    ],
)
def test_options_follow_a_question_mark(
    text: str, kind: str, target: str | None, options: dict[str, str]
) -> None:
    spec = SinkSpec.parse(text)
    assert (spec.kind, spec.target, spec.option_map) == (kind, target, options)
    assert SinkSpec.parse(spec.describe()) == spec  # what `check` shows parses back


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("console", SinkSpec("console")),
        ("parquet:/out", SinkSpec("parquet", "/out")),
        ("sqlite", SinkSpec("sqlite")),
        ("sqlite:/x/y.db", SinkSpec("sqlite", "/x/y.db")),
        ("foreach:pkg.mod:Writer", SinkSpec("foreach", "pkg.mod:Writer")),
        (
            "postgresql://u@h:5/db?parallel_rows=5",
            SinkSpec("postgresql", "postgresql://u@h:5/db?parallel_rows=5"),
        ),
        ("kafka://h:9092/t?kafka.acks=all", SinkSpec("kafka", "kafka://h:9092/t?kafka.acks=all")),
    ],
)
def test_specs_without_options_and_url_kinds_parse_as_before(text: str, spec: SinkSpec) -> None:
    parsed = SinkSpec.parse(text)
    assert parsed == spec and parsed.options == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("console?bogus=1", "its options: numRows, truncate"),
        ("parquet:/o?header=true", "partitionBy, compression, maxRecordsPerFile"),
        ("memory?numRows=1", "takes no options"),
        ("sqlite:/x.db?journal=wal", "takes no options"),
        ("parquet:/o?compression", "NAME=VALUE"),
        ("console?numRows=1&numRows=2", "given twice"),
    ],
)
def test_an_option_the_kind_does_not_take_is_config_bad_value(
    text: str, says: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings("mobile", {"sink": text}, environ={})
    assert err.value.code == "CONFIG_BAD_VALUE"
    assert says in str(err.value)


@pytest.mark.parametrize("text", ["console?numRows=0", "console?numRows=x", "console?truncate=1"])
def test_console_values_are_checked_when_the_sink_is_made(text: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        make_sink(SinkSpec.parse(text), tmp_path)
    assert err.value.code == "CONFIG_BAD_VALUE"


class Writer:
    """A DataStreamWriter's calls, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Writer:
            self.calls.append((name, kwargs or args))
            return self

        return call


def test_the_options_reach_sparks_writer_under_their_own_names(tmp_path: Path) -> None:
    console = make_sink(SinkSpec.parse("console?numRows=7"), tmp_path)
    assert isinstance(console, ConsoleSink)
    w = Writer()
    console.attach(w, None)  # type: ignore[arg-type]
    assert ("options", {"truncate": "false", "numRows": "7"}) in w.calls  # defaults kept

    out = tmp_path / "out"
    files = make_sink(SinkSpec.parse(f"parquet:{out}?compression=zstd&partitionBy=a,b"), tmp_path)
    w = Writer()
    ctx = type("Ctx", (), {"checkpoint": tmp_path / "cp"})()
    files.attach(w, ctx)  # type: ignore[arg-type]
    assert ("options", {"compression": "zstd"}) in w.calls
    assert ("partitionBy", ("a", "b")) in w.calls
