"""SinkSpec -> Sink. The one place that knows which class serves which kind."""

from __future__ import annotations

from pathlib import Path

from slipstream.errors import ConfigError
from slipstream.sinks.base import Sink
from slipstream.specs import SinkSpec


def make_sink(spec: SinkSpec, default_database: Path) -> Sink:
    from slipstream.sinks.spark_sinks import ConsoleSink, FileSink, MemorySink, NoopSink
    from slipstream.sinks.sqlite import SqliteSink

    if spec.kind == "console":
        return ConsoleSink(spec)
    if spec.kind == "memory":
        return MemorySink(spec)
    if spec.kind == "noop":
        return NoopSink(spec)
    if spec.is_file_sink:
        return FileSink(spec)
    if spec.kind == "sqlite":
        return SqliteSink(spec, default_database)
    if spec.kind == "postgresql":
        try:
            from slipstream.sinks.postgres import PostgresSink  # type: ignore[import-not-found]
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                "SINK_UNKNOWN",
                f"the PostgreSQL sink is unavailable: {exc}",
                "pip install 'psycopg[binary]'",
            ) from None
        return PostgresSink(spec)
    if spec.kind == "foreach":
        from slipstream.sinks.foreach import ForeachSink  # type: ignore[import-not-found]

        return ForeachSink(spec)
    raise ConfigError("SINK_UNKNOWN", f"no sink of kind {spec.kind!r}", "see --help for --sink")
