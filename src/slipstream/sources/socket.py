"""Lines from a TCP socket (the seeds' quick example; `slipstream feed` serves one).

Not fault-tolerant: a socket cannot replay what it sent before a failure, so results are
at-most-once across restarts. `check` says so. Spark tells no one when the server closes the
socket: the query waits for more lines; `--stop-when-idle` ends such a run (runtime/idle.py).

`--include-timestamp` (Spark's `includeTimestamp`) adds Spark's `timestamp` column, when the
line arrived, so a pipeline can window on arrival time (Spark's windowed network word count).
Text lines only: a json or csv line is parsed into its declared columns, which have none."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.errors import ConfigError
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
        Option(
            "include_timestamp",
            values.boolean,
            "add Spark's arrival `timestamp` column to each line (socket source, text lines)",
            "true or false",
            default=False,
            kind="bool",
        ),
    )

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        if options["include_timestamp"] and binding.format != "text":
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"input {binding.name} reads {binding.format} lines from a socket with "
                "--include-timestamp: only text lines keep Spark's arrival timestamp (a "
                f"{binding.format} line becomes its declared columns)",
                "read the socket as text (--format text), or drop --include-timestamp",
            )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        where = f"{options['host']}:{options['port']}"
        arrival = ", with the arrival timestamp" if options["include_timestamp"] else ""
        return f"socket {where}{arrival} (not replayable: at-most-once on restart)"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        fmt = binding.format
        host, port = options["host"], options["port"]
        spark_options = {"host": host, "port": port}
        arrival = []
        if options["include_timestamp"]:
            spark_options["includeTimestamp"] = "true"
            arrival = [F.col("timestamp")]
        raw = spark_stream(spark, "socket", spark_options)
        frame = raw.select(F.col("value"), F.lit(f"socket:{host}:{port}").alias(SOURCE), *arrival)
        return RawInput(frame, fmt if fmt != "parquet" else "text", False)
