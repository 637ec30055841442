"""The source extension point.

A Source turns settings into a streaming DataFrame of *raw* records: for line formats a `value`
string column and `_source` (where it came from); for typed formats the declared columns and
`_source`. Parsing and rejection happen after, in `slipstream.quality`, once for every source.

To add a source: subclass `Source`, set `kind`, implement `read`, and register it with
`@register`. A custom source that Spark does not ship is best written with PySpark's own
`pyspark.sql.datasource.DataSource` (`streamReader`) and then wrapped here in a few lines."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from slipstream.errors import ConfigError

if TYPE_CHECKING:
    from slipstream.config import Settings
    from slipstream.kafka_url import KafkaTopic


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
        return self.path


@dataclass(frozen=True)
class RawInput:
    frame: DataFrame
    format: str  # json | csv | text | typed | parquet (typed, a rejected file's `_reason` set)
    replayable: bool  # can Spark re-read an offset range after a failure?


class Source(ABC):
    kind: ClassVar[str]
    replayable: ClassVar[bool] = True
    #: what `check` prints
    describe_fmt: ClassVar[str] = "{kind}"

    @abstractmethod
    def read(self, spark: SparkSession, settings: Settings, binding: Binding) -> RawInput: ...

    def validate(self, settings: Settings, binding: Binding) -> None:
        """Raise ConfigError for settings this source cannot work with (before Spark starts)."""

    def describe(self, settings: Settings, binding: Binding) -> str:
        return self.kind


SOURCES: dict[str, type[Source]] = {}


def register(cls: type[Source]) -> type[Source]:
    SOURCES[cls.kind] = cls
    return cls


def spark_stream(spark: SparkSession, kind: str, options: dict[str, str | int]) -> DataFrame:
    """The stream of one of Spark's own sources (socket, kafka, rate), read with `options`."""
    return spark.readStream.format(kind).options(**options).load()


def get_source(kind: str) -> Source:
    # Import the built-in modules so their @register runs.
    from slipstream.sources import files, kafka, rate, socket, table  # noqa: F401

    if kind not in SOURCES:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"unknown source {kind!r}",
            f"use one of {', '.join(sorted(SOURCES))}",
        )
    return SOURCES[kind]()
