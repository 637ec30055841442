"""`format:FORMAT[:PATH][?OPTION=VALUE&...]`: any streaming format Spark can load, as an input.

FORMAT is what `spark.readStream.format(...)` takes: a built-in one (`orc`, `avro`), a source
jar's on the classpath (its short name or class), or a Python data source the pipeline
registers (`Pipeline.data_sources`, its `name()`). PATH is what `load(PATH)` reads (a folder for
the file formats); the options are Spark's own names, passed as they are. Examples:

    --input format:orc:/data/events?maxFilesPerTrigger=10
    --input clicks=format:my_source?rows=100

The options slipstream knows are checked here, before Spark starts (a value Spark would only
refuse at the first batch); others pass through to the format unchecked. A format slipstream
has a kind for with more to it (socket, rate, Kafka's lag and dead-letter) is refused here with
the shortcut to use. Nothing here imports Spark."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from slipstream.core.url_options import true_or_false, whole_above_zero

SCHEME = "format:"
USAGE = "format:FORMAT[:PATH][?OPTION=VALUE&...]"
#: a Delta table as a stream (sources/delta.py): `delta:PATH[?OPTION=VALUE&...]`
DELTA_SCHEME = "delta:"
DELTA_USAGE = "delta:PATH[?OPTION=VALUE&...]"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")

#: Spark's file formats: they read the folder PATH names, and all but these need a schema
FILE_FORMATS = frozenset({"orc", "parquet", "json", "csv", "text", "avro", "xml", "binaryfile"})
SCHEMALESS = frozenset({"text", "binaryfile"})
#: formats slipstream reads with a kind of its own, which does more than `format:` would
SHORTCUTS = {
    "socket": "--source socket (--host, --port, --include-timestamp)",
    "rate": "--source rate",
    "kafka": "--input kafka://HOST:PORT/TOPIC[?OPTION=VALUE&...] (lag, dead-letter, "
    "--from-checkpoint)",
    "delta": f"--input {DELTA_USAGE} (its options checked before start)",
}


_positive = whole_above_zero(2**31)
_boolean = true_or_false


def _clean_source(value: str) -> str:
    if value.lower() not in ("archive", "delete", "off"):
        raise ValueError("archive, delete or off")
    return value.lower()


#: the options of Spark's file source (every file format) slipstream checks before start
FILE_OPTIONS: dict[str, Callable[[str], str]] = {
    "maxFilesPerTrigger": _positive,
    "latestFirst": _boolean,
    "fileNameOnly": _boolean,
    "cleanSource": _clean_source,
    "recursiveFileLookup": _boolean,
    "ignoreMissingFiles": _boolean,
    "ignoreCorruptFiles": _boolean,
    "mergeSchema": _boolean,
}


def _version(value: str) -> str:
    if value.lower() == "latest":
        return "latest"
    if not value.isdigit():
        raise ValueError("a table version (0, 1, ...) or latest")
    return value


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("a value")
    return value.strip()


#: the options of Delta's streaming source (Delta Lake's docs, "Table streaming reads"): every
#: other name is refused before start
DELTA_OPTIONS: dict[str, Callable[[str], str]] = {
    "startingVersion": _version,
    "startingTimestamp": _text,
    "maxFilesPerTrigger": _positive,
    "maxBytesPerTrigger": _text,
    "ignoreDeletes": _boolean,
    "ignoreChanges": _boolean,
    "skipChangeCommits": _boolean,
    "withEventTimeOrder": _boolean,
    "readChangeFeed": _boolean,
}


def is_delta_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(DELTA_SCHEME)


def is_format_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(SCHEME)


@dataclass(frozen=True)
class SparkFormat:
    """One input read with `spark.readStream.format(name).options(...).load([path])`."""

    name: str
    path: str | None = None
    options: tuple[tuple[str, str], ...] = ()  # (Spark's option name, value), as given

    @classmethod
    def parse(cls, text: str) -> SparkFormat:
        raw = text.strip()
        if not is_format_url(raw):
            raise ValueError(USAGE)
        head, question, query = raw[len(SCHEME) :].partition("?")
        name, _, path = head.partition(":")
        if not _NAME.match(name):
            raise ValueError(f"{USAGE}: FORMAT is a name such as orc or my_source")
        shortcut = SHORTCUTS.get(name.lower())
        if shortcut is not None:
            raise ValueError(f"slipstream reads {name} with its own kind: use {shortcut}")
        if name.lower() in FILE_FORMATS and not path:
            raise ValueError(f"format:{name}:DIR: the {name} files source reads a folder")
        options = _options(name, query) if question else ()
        return cls(name, path or None, options)

    @classmethod
    def parse_delta(cls, text: str) -> SparkFormat:
        """`delta:PATH[?OPTION=VALUE&...]`: Delta's streaming source over the table at PATH."""
        raw = text.strip()
        if not is_delta_url(raw):
            raise ValueError(DELTA_USAGE)
        path, question, query = raw[len(DELTA_SCHEME) :].partition("?")
        if not path.strip():
            raise ValueError(f"{DELTA_USAGE}: PATH is the table's folder")
        options = _options("delta", query) if question else ()
        return cls("delta", path.strip(), options)

    @property
    def reads_files(self) -> bool:
        return self.name.lower() in FILE_FORMATS

    @property
    def needs_schema(self) -> bool:
        """Spark's streaming file source needs a schema for these (no inference by default)."""
        return self.reads_files and self.name.lower() not in SCHEMALESS

    @property
    def option_map(self) -> dict[str, str]:
        return dict(self.options)

    def describe(self) -> str:
        scheme = DELTA_SCHEME if self.name == "delta" else f"{SCHEME}{self.name}:"
        text = scheme.rstrip(":") + (f":{self.path}" if self.path else "")
        return f"{text}?{urlencode(self.options, safe=',:/')}" if self.options else text

    def __str__(self) -> str:
        return self.describe()


def _options(name: str, query: str) -> tuple[tuple[str, str], ...]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ValueError(f"{USAGE}: options as NAME=VALUE joined by &") from None
    seen: set[str] = set()
    out = []
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"option {key} is given twice")
        seen.add(key)
        check = FILE_OPTIONS.get(key) if name.lower() in FILE_FORMATS else None
        if name == "delta":
            check = DELTA_OPTIONS.get(key)
            if check is None:
                raise ValueError(
                    f"option {key}: Delta's streaming source takes {', '.join(DELTA_OPTIONS)}"
                )
        if check is not None:
            try:
                value = check(value)
            except ValueError as exc:
                raise ValueError(f"option {key}={value!r}: {exc}") from None
        out.append((key, value))
    return tuple(out)
