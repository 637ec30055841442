"""Lines from a TCP socket (the seeds' quick example; `slipstream feed` serves one).

Not fault-tolerant: a socket cannot replay what it sent before a failure, so results are
at-most-once across restarts. `check` says so."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, spark_stream


class SocketSource(Source):
    kind = "socket"
    replayable = False
    stageable = False  # the ingest stage would read it as a second client
    options = (
        Option(
            "host", values.text, "host of the socket source", "a host name", default="localhost"
        ),
        Option(
            "port",
            values.port,
            "port of the socket source",
            "an integer from 0 to 65,535",
            default=9999,
        ),
    )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        where = f"{options['host']}:{options['port']}"
        return f"socket {where} (not replayable: at-most-once on restart)"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        fmt = binding.format
        host, port = options["host"], options["port"]
        raw = spark_stream(spark, "socket", {"host": host, "port": port})
        frame = raw.select(F.col("value"), F.lit(f"socket:{host}:{port}").alias(SOURCE))
        return RawInput(frame, fmt if fmt != "parquet" else "text", False)
