"""The public test harness: drive a pipeline's micro-batches and time from a test
(`PipelineHarness`, `ProcessorClock`), collect a batch's rows (`CollectSink`), inject a fault
(`fault`), and build the one shared SparkSession of a test run (`session`)."""

from slipstream.testing.harness import (
    FAULT_ENV,
    CollectSink,
    PipelineHarness,
    ProcessorClock,
    article_views_db,
    fault,
    session,
)

__all__ = [
    "FAULT_ENV",
    "CollectSink",
    "PipelineHarness",
    "ProcessorClock",
    "article_views_db",
    "fault",
    "session",
]
