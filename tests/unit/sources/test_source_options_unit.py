"""Source options of Spark's own sources, without Spark (issue 42 items 4 and 6): the socket's
`--include-timestamp` (Spark's `includeTimestamp`) and the files source's `--latest-first`
(`latestFirst`) reach the stream reader from the command line, and the refusals come before
anything starts. tests/spark/sources/ runs both on Spark."""

from __future__ import annotations

from typing import Any

import pytest

from slipstream.errors import ConfigError
from slipstream.settings.config import load_settings
from slipstream.sources import files as files_module
from slipstream.sources import socket as socket_module
from slipstream.sources.base import Binding
from slipstream.sources.files import FilesSource
from slipstream.sources.socket import SocketSource


class _Column(str):
    def alias(self, name: str) -> _Column:
        return _Column(f"{self} AS {name}")


class _Functions:
    """The two column functions the sources use, as text (no JVM)."""

    @staticmethod
    def col(name: str) -> _Column:
        return _Column(name)

    @staticmethod
    def lit(value: Any) -> _Column:
        return _Column(repr(value))


class _Stream:
    """spark.readStream, and what it loads: the options, the format and the columns."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.kind = ""
        self.columns: tuple[str, ...] = ()

    def option(self, name: str, value: Any) -> _Stream:
        self.seen[name] = str(value)
        return self

    def options(self, **given: Any) -> _Stream:
        for name, value in given.items():
            self.option(name, value)
        return self

    def format(self, kind: str) -> _Stream:
        self.kind = kind
        return self

    def load(self, path: str | None = None) -> _Stream:
        return self

    def select(self, *columns: str) -> _Stream:
        self.columns = columns
        return self


class _Spark:
    def __init__(self) -> None:
        self.readStream = _Stream()


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (files_module, socket_module):
        monkeypatch.setattr(module, "F", _Functions)


def _options(source: Any, pipeline: str, flags: dict[str, Any]) -> dict[str, Any]:
    return source.given(load_settings(pipeline, flags, environ={}).source_options)


@pytest.mark.parametrize("given", [True, False])
def test_include_timestamp_asks_spark_for_the_arrival_timestamp_column(
    no_jvm: None, given: bool
) -> None:
    spark, source = _Spark(), SocketSource()
    flags = {"source": "socket", "include_timestamp": given}
    options = _options(source, "wordcount", flags)
    binding = Binding("lines", None, "text")
    source.validate(binding, options, {})
    source.read(spark, binding, options)  # type: ignore[arg-type]
    stream = spark.readStream
    assert stream.kind == "socket"
    assert ("includeTimestamp" in stream.seen) is given
    assert ("timestamp" in stream.columns) is given
    assert ("with the arrival timestamp" in source.describe(binding, options)) is given


def test_include_timestamp_with_json_lines_is_refused_before_start() -> None:
    source = SocketSource()
    options = _options(source, "mobile", {"source": "socket", "include_timestamp": True})
    with pytest.raises(ConfigError) as err:
        source.validate(Binding("actions", None, "json"), options, {})
    assert err.value.code == "CONFIG_BAD_VALUE" and "--format text" in err.value.fix


@pytest.mark.parametrize("given", [True, False])
def test_latest_first_reaches_the_file_sources_reader(
    no_jvm: None, given: bool, tmp_path: Any
) -> None:
    spark, source = _Spark(), FilesSource()
    options = _options(source, "wordcount", {"input": [str(tmp_path)], "latest_first": given})
    source.read(spark, Binding("lines", tmp_path, "text"), options)  # type: ignore[arg-type]
    assert spark.readStream.seen.get("latestFirst") == ("true" if given else None)
    assert ("latest first" in source.describe(Binding("lines", tmp_path, "text"), options)) is given
