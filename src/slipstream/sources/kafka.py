"""Kafka, where Spark's Kafka connector is installed (it is not part of the PyPI pyspark).

The connector jar (`spark-sql-kafka-0-10_2.13-<spark version>.jar` and its dependencies) must
be on the classpath: in pyspark's `jars/` folder or listed in `--conf spark.jars=...`. Without
it the source is refused before Spark starts with SOURCE_NOT_AVAILABLE."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, spark_stream


def connector_jars(conf: Mapping[str, str]) -> list[str]:
    jars_dir = Path(pyspark.__file__).parent / "jars"
    found = [p.name for p in jars_dir.glob("spark-sql-kafka-0-10*.jar")]
    found += [j for j in conf.get("spark.jars", "").split(",") if "kafka" in j]
    return found


class KafkaSource(Source):
    kind = "kafka"
    options = (
        Option(
            "kafka_bootstrap",
            values.text,
            "Kafka bootstrap servers (kafka source)",
            "host:port[,...]",
            metavar="SERVERS",
            env="SLIPSTREAM_KAFKA_BOOTSTRAP",
        ),
        Option(
            "kafka_topic",
            values.text,
            "Kafka topic to subscribe to (kafka source)",
            "a topic name",
            metavar="TOPIC",
        ),
    )

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        if not connector_jars(conf):
            raise ConfigError(
                "SOURCE_NOT_AVAILABLE",
                "the Kafka source needs Spark's Kafka connector, which is not installed",
                "put spark-sql-kafka-0-10_2.13 (matching your Spark version) and its "
                "dependencies on the classpath, e.g. --conf spark.jars=/path/a.jar,/path/b.jar",
            )
        if not options["kafka_bootstrap"] or not options["kafka_topic"]:
            raise ConfigError(
                "CONFIG_MISSING",
                "the Kafka source needs servers and a topic",
                "pass --kafka-bootstrap HOST:PORT and --kafka-topic TOPIC",
            )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        return f"kafka {options['kafka_topic']} at {options['kafka_bootstrap']}"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        fmt = binding.format
        servers, topic = str(options["kafka_bootstrap"]), str(options["kafka_topic"])
        raw = spark_stream(spark, "kafka", {"kafka.bootstrap.servers": servers, "subscribe": topic})
        where = F.concat_ws(
            ":", F.lit("kafka"), F.col("topic"), F.col("partition"), F.col("offset")
        )
        frame = raw.select(F.col("value").cast("string").alias("value"), where.alias(SOURCE))
        return RawInput(frame, fmt if fmt in ("json", "csv", "text") else "json", True)
