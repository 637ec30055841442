"""Sinks: `base` (Sink, BatchSink), `database` (DatabaseSink with the exactly-once ledger), one
module per kind, and `registry` (SinkSpec -> Sink)."""

from slipstream.sinks.base import BatchInfo, BatchSink, Sink, SinkContext
from slipstream.sinks.database import DatabaseSink
from slipstream.sinks.registry import make_sink

__all__ = ["BatchInfo", "BatchSink", "DatabaseSink", "Sink", "SinkContext", "make_sink"]
