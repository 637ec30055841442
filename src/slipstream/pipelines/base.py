"""What a pipeline declares, and nothing about how it is run.

A pipeline says what it reads (format, schema, required fields), what it offers (modes,
sources, defaults), how its shape looks (`plan`, checked before start) and how valid records
become results (`transform`, returning a lazy DataFrame). The runner does the rest: sources,
parsing and quarantine, sinks, checkpoints and monitoring."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from slipstream.config import Settings
from slipstream.plan import Plan
from slipstream.quality.expectations import Expectation
from slipstream.specs import OutputMode, SinkSpec


@dataclass(frozen=True)
class ExtraOutput:
    """A second query of the same run (e.g. trending's Parquet archive of final windows)."""

    name: str
    frame: DataFrame
    sink: SinkSpec
    mode: OutputMode
    key: tuple[str, ...] = ()


class Pipeline(ABC):
    name: ClassVar[str]
    description: ClassVar[str]
    output: ClassVar[str]  # result table name
    key: ClassVar[tuple[str, ...]]
    modes: ClassVar[tuple[OutputMode, ...]]  # offered; the first is the default
    sources: ClassVar[tuple[str, ...]] = ("files",)  # the first is the default
    input_format: ClassVar[str] = "json"
    schema: ClassVar[StructType | None] = None  # input record schema (None for text lines)
    required: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[dict[str, Any]] = {}

    def resolve(self, settings: Settings) -> Settings:
        """Fill what the user left unset with this pipeline's defaults."""
        changes: dict[str, Any] = {}
        for name, value in self.defaults.items():
            if getattr(settings, name) is None:
                changes[name] = value
        if settings.source is None:
            changes["source"] = self.sources[0]
        if settings.format is None:
            changes["format"] = self.input_format
        sink = settings.sink or SinkSpec("sqlite")
        changes["sink"] = sink
        if settings.mode is None:
            changes["mode"] = self.default_mode(sink)
        return settings.with_(**changes)

    def default_mode(self, sink: SinkSpec) -> OutputMode:
        if sink.is_file_sink and "append" in self.modes:
            return "append"
        return self.modes[0]

    @abstractmethod
    def plan(self, settings: Settings) -> Plan:
        """The shape of the query for these (resolved) settings."""

    @abstractmethod
    def transform(self, records: DataFrame, settings: Settings, spark: SparkSession) -> DataFrame:
        """Valid, typed input records -> the result the sink receives (lazy)."""

    def extra_outputs(
        self, result: DataFrame, records: DataFrame, settings: Settings, spark: SparkSession
    ) -> list[ExtraOutput]:
        return []

    def expectations(self, settings: Settings) -> Sequence[Expectation]:
        """Data-quality rules on the valid input records (see slipstream.quality.expectations).
        The runner counts, drops or fails on them before `transform` sees the records."""
        return ()

    def validate(self, settings: Settings) -> None:
        """Pipeline-specific settings checks (raise ConfigError), before Spark starts."""

    def results_view(self, settings: Settings) -> dict[str, Any] | None:
        """What the dashboard shows as this pipeline's results: `{"title", "columns", "rows",
        "updated"}`, or None. Default: the main table of a SQLite sink, newest rows first (last
        inserted); None for other sinks. Called on every dashboard poll: keep it cheap."""
        return self.sqlite_results(settings, "rowid DESC", "newest rows first")

    def sqlite_results(
        self, settings: Settings, order_by: str, order_text: str, limit: int = 50
    ) -> dict[str, Any] | None:
        """The first `limit` rows of the main table of a SQLite sink in `order_by` order (SQL
        the pipeline writes, never user input); None when the sink is not SQLite."""
        from slipstream.monitor.results import sqlite_database, sqlite_view

        settings = self.resolve(settings)
        db = sqlite_database(settings)
        if db is None:
            return None
        table = settings.table or self.output
        title = f"{table}, {order_text}"
        return sqlite_view(db, table, title=title, order_by=order_by, limit=limit)
