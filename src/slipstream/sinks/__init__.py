"""Sinks: `base` (Sink, BatchSink: the extension points and how to add a sink), `database`
(DatabaseSink with the exactly-once ledger), one module per kind, and `registry` (kind -> class,
SinkSpec -> Sink, `register` for a sink defined elsewhere)."""

from slipstream.sinks.base import BatchInfo, BatchSink, Sink, SinkContext
from slipstream.sinks.database import DatabaseSink
from slipstream.sinks.registry import make_sink

__all__ = ["BatchInfo", "BatchSink", "DatabaseSink", "Sink", "SinkContext", "make_sink"]
