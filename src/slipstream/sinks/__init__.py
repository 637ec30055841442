"""Sinks: `base` (Sink, BatchSink, DatabaseSink with the exactly-once ledger), one module per
kind, and `registry` (SinkSpec -> Sink)."""

from slipstream.sinks.base import BatchInfo, BatchSink, DatabaseSink, Sink, SinkContext
from slipstream.sinks.registry import make_sink

__all__ = ["BatchInfo", "BatchSink", "DatabaseSink", "Sink", "SinkContext", "make_sink"]
