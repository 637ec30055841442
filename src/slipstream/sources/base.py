"""The source extension point.

A Source turns settings into a streaming DataFrame of *raw* records: for line formats a `value`
string column and `_source` (where it came from); for typed formats the declared columns and
`_source`. Parsing and rejection happen after, in `slipstream.ingest`, once for every source.

To add a source: write one module in this folder with a `Source` subclass: its `kind`, its own
`options` (flags, TOML keys and `--help` come from them), `read`, and the capabilities below that
differ from the defaults (what it can do: replayable, continuous, real-time, staged by the ingest
stage, where `--from-checkpoint` starts it...). sources/registry.py finds it (core/registry.py);
nothing else to edit: the rest of slipstream asks the class, never names a kind. A source
defined elsewhere (a test's, a plugin's) is added with `sources.registry.register(cls)`.

A custom source that Spark does not ship is best written with PySpark's own
`pyspark.sql.datasource.DataSource` (`streamReader`) and then wrapped here in a few lines."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from slipstream.core.kafka_url import KafkaTopic
from slipstream.core.options import Option
from slipstream.core.spark_format import SparkFormat
from slipstream.errors import ConfigError

if TYPE_CHECKING:
    from slipstream.checkpoint.old import OldPosition
    from slipstream.checkpoint.start import InputStart

#: a source's own settings, by name (its `options`, with their defaults filled in)
SourceOptions = Mapping[str, Any]


@dataclass(frozen=True)
class Binding:
    """One stream input of a run: its name, where it is (files), its format and how the user
    names it on the command line (`--input` or `--input NAME=`), for messages."""

    name: str
    path: Path | None
    format: str
    flag: str = "--input"
    schema: StructType | None = None  # the input's declared schema (None: text lines)
    required: tuple[str, ...] = ()  # its required fields (a parquet file lacking one: rejected)
    topic: KafkaTopic | None = None  # bound to a Kafka topic (`kafka://...`) instead of a path
    #: bound to any format Spark loads (`format:FORMAT[:PATH]?...`); `path` is its PATH
    spark_format: SparkFormat | None = None
    #: files another checkpoint read, never read here (`--from-checkpoint`, as Spark names them:
    #: file:///..., file:/...); runtime/from_checkpoint.py
    skip_files: frozenset[str] = frozenset()

    def existing(self, needs: str, give: str, *, directory: bool = False) -> Path:
        """The bound path, which must be there (a folder with `directory`): otherwise a
        ConfigError saying that the input `needs` one, and to pass `give` (DIR, FILE)."""
        sep = "" if self.flag.endswith("=") else " "
        if self.path is None:
            raise ConfigError(
                "CONFIG_MISSING",
                f"input {self.name} needs {needs}",
                f"pass {self.flag}{sep}{give}",
            )
        there = self.path.is_dir() if directory else self.path.exists()
        if not there:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"{self.flag}{sep}{self.path} "
                + ("is not a directory" if directory else "does not exist"),
                f"create it first, or pass {self.flag}{sep}{give} with an existing one",
            )
        if directory:
            try:  # Spark lists it each trigger: an unreadable folder fails there, later
                with os.scandir(self.path) as entries:
                    next(entries, None)
            except OSError as exc:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"{self.flag}{sep}{self.path} cannot be read: {exc.strerror or exc}",
                    "give this user read and search permission on it (chmod a+rx), or pass "
                    f"{self.flag}{sep}{give} with a readable one",
                ) from None
        return self.path


@dataclass(frozen=True)
class RawInput:
    frame: DataFrame
    format: str  # json | csv | text | typed | parquet (typed, a rejected file's `_reason` set)
    replayable: bool  # can Spark re-read an offset range after a failure?


class Source(ABC):
    kind: ClassVar[str]
    #: can Spark re-read an offset range after a failure (exactly-once on restart)?
    replayable: ClassVar[bool] = True
    #: this source's own settings: `--NAME` flags, TOML keys and `--help` are built from them
    options: ClassVar[tuple[Option, ...]] = ()
    #: Spark's continuous trigger can read it (Spark: rate and Kafka)
    continuous: ClassVar[bool] = False
    #: Spark's real-time mode can read it (Spark: Kafka)
    real_time: ClassVar[bool] = False
    #: the ingest stage can land its records as bronze files (runtime/ingest_stage.py); False
    #: for a source that cannot be read twice (a socket)
    stageable: ClassVar[bool] = True
    #: its records are landing files on a local path (the backfill bar counts the pending ones)
    reads_files: ClassVar[bool] = False
    #: an input given as a topic URL (`--input kafka://HOST:PORT/TOPIC`) reads this source
    binds_topics: ClassVar[bool] = False
    #: an input given as `format:FORMAT[:PATH][?OPTION=VALUE&...]` reads this source, whatever
    #: kinds the pipeline's input offers (the user names Spark's format, the pipeline the columns)
    binds_formats: ClassVar[bool] = False
    #: an input given as `FORMAT:PATH[?...]` of this format (`delta:PATH`) reads this source
    reads_format: ClassVar[str | None] = None
    #: a session reading it needs Spark's Kafka connector (settings/kafka_connector.py)
    needs_kafka_connector: ClassVar[bool] = False
    #: a session reading it needs Delta Lake's jar and SQL extension (settings/delta_package.py)
    delta: ClassVar[bool] = False

    @abstractmethod
    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput: ...

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        """Raise ConfigError for settings this source cannot work with (before Spark starts);
        `conf` is the run's Spark configuration (`--conf`)."""

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        return self.kind

    def topic(self, binding: Binding, options: SourceOptions) -> KafkaTopic | None:
        """The Kafka topic this input reads; None for a source that reads no topic."""
        return None

    def real_time_slots(self, binding: Binding, options: SourceOptions) -> int:
        """The task slots a real-time query reading this input holds for it (a Kafka topic:
        one per partition, asked of the broker); 0 for a source real-time mode cannot read."""
        return 0

    def backlog_bytes(self, binding: Binding, options: SourceOptions) -> int | None:
        """The bytes this input holds now, before Spark starts (what a finite run will read on
        a new checkpoint; runtime/partitions.py sizes the state store by it); None for a
        source that cannot tell."""
        return None

    def start_from_old(self, binding: Binding, old: OldPosition) -> InputStart | None:
        """Where this input starts on a new checkpoint that starts where OLD stands
        (`--from-checkpoint`, runtime/from_checkpoint.py); None: a source with no position to
        start from, or an input bound so that it has none."""
        return None

    def given(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """This source's options from the run's (`Settings.source_options`), defaults filled in."""
        return {o.name: values.get(o.name, o.default) for o in self.options}


def spark_stream(spark: SparkSession, kind: str, options: Mapping[str, str | int]) -> DataFrame:
    """The stream of one of Spark's own sources (socket, kafka, rate), read with `options`."""
    return spark.readStream.format(kind).options(**options).load()


_LINES = ("json", "csv", "text")


def as_declared(raw: DataFrame, binding: Binding, where: Column, what: str) -> RawInput:
    """A source's rows (`what`: the source, for messages) as the input declares them, with
    `where` as their `_source`: the declared columns cast to their types when the rows hold
    them; otherwise a `value` column as lines of the input's format (json, csv: parsed into the
    declared columns); otherwise every column, typed."""
    schema = binding.schema
    lines = "value" in raw.columns and binding.format in _LINES
    if schema is not None:
        missing = [f.name for f in schema.fields if f.name not in raw.columns]
        if missing and lines and binding.format != "text":
            return RawInput(raw.select(F.col("value").cast("string"), where), binding.format, True)
        if missing:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"input {binding.name}: {what} gives no column {', '.join(missing)} (it gives "
                f"{', '.join(raw.columns)})",
                "declare the input's schema with the source's columns",
            )
        typed = [F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields]
        return RawInput(raw.select(*typed, where), "typed", True)
    if lines:
        return RawInput(raw.select(F.col("value").cast("string"), where), binding.format, True)
    return RawInput(raw.select("*", where), "typed", True)
