"""Kafka, where Spark's Kafka connector is installed (it is not part of the PyPI pyspark).

The connector jar (`spark-sql-kafka-0-10_2.13-<spark version>.jar` and its dependencies) must
be on the classpath: in pyspark's `jars/` folder or listed in `--conf spark.jars=...`. Without
it the source is refused before Spark starts with SOURCE_NOT_AVAILABLE."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, register, spark_stream

if TYPE_CHECKING:
    from slipstream.settings.config import Settings


def connector_jars(settings: Settings) -> list[str]:
    import pyspark

    jars_dir = Path(pyspark.__file__).parent / "jars"
    found = [p.name for p in jars_dir.glob("spark-sql-kafka-0-10*.jar")]
    found += [j for j in settings.conf.get("spark.jars", "").split(",") if "kafka" in j]
    return found


@register
class KafkaSource(Source):
    kind = "kafka"

    def validate(self, settings: Settings, binding: Binding) -> None:
        if not connector_jars(settings):
            raise ConfigError(
                "SOURCE_NOT_AVAILABLE",
                "the Kafka source needs Spark's Kafka connector, which is not installed",
                "put spark-sql-kafka-0-10_2.13 (matching your Spark version) and its "
                "dependencies on the classpath, e.g. --conf spark.jars=/path/a.jar,/path/b.jar",
            )
        if not settings.kafka_bootstrap or not settings.kafka_topic:
            raise ConfigError(
                "CONFIG_MISSING",
                "the Kafka source needs servers and a topic",
                "pass --kafka-bootstrap HOST:PORT and --kafka-topic TOPIC",
            )

    def describe(self, settings: Settings, binding: Binding) -> str:
        return f"kafka {settings.kafka_topic} at {settings.kafka_bootstrap}"

    def read(self, spark: SparkSession, settings: Settings, binding: Binding) -> RawInput:
        fmt = binding.format
        servers, topic = str(settings.kafka_bootstrap), str(settings.kafka_topic)
        raw = spark_stream(spark, "kafka", {"kafka.bootstrap.servers": servers, "subscribe": topic})
        where = F.concat_ws(
            ":", F.lit("kafka"), F.col("topic"), F.col("partition"), F.col("offset")
        )
        frame = raw.select(F.col("value").cast("string").alias("value"), where.alias(SOURCE))
        return RawInput(frame, fmt if fmt in ("json", "csv", "text") else "json", True)
