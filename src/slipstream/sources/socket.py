"""Lines from a TCP socket (the seeds' quick example; `slipstream feed` serves one).

Not fault-tolerant: a socket cannot replay what it sent before a failure, so results are
at-most-once across restarts. `check` says so."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, register, spark_stream

if TYPE_CHECKING:
    from slipstream.settings.config import Settings


@register
class SocketSource(Source):
    kind = "socket"
    replayable = False

    def describe(self, settings: Settings, binding: Binding) -> str:
        return f"socket {settings.host}:{settings.port} (not replayable: at-most-once on restart)"

    def read(self, spark: SparkSession, settings: Settings, binding: Binding) -> RawInput:
        fmt = binding.format
        raw = spark_stream(spark, "socket", {"host": settings.host, "port": settings.port})
        frame = raw.select(
            F.col("value"), F.lit(f"socket:{settings.host}:{settings.port}").alias(SOURCE)
        )
        return RawInput(frame, fmt if fmt != "parquet" else "text", False)
