"""Kafka as a sink: `--sink [OUTPUT=]kafka://HOST:PORT/TOPIC`, Spark's own Kafka sink.

Each output row becomes one record: its key the output's key columns as a JSON object
(`{"window_start":"...","action":"open"}`), its value the whole row as JSON
(`to_json(struct(*))`, timestamps as ISO-8601 UTC). A record's key stays the same for every
update of one row, so a topic with `cleanup.policy=compact` keeps the latest of each.

Spark's Kafka sink is **at-least-once**: a batch that failed after some of its records were
written is written again when the query restarts, and Kafka has no ledger to tell. A consumer
stays correct by treating records as keyed upserts (the latest value of a key wins; update and
complete modes already repeat a row's key with its newer value), never by adding values up.

The topic must exist: it is checked when the query starts (KAFKA_TOPIC_NOT_FOUND otherwise)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from slipstream.core.kafka_url import KafkaTopic
from slipstream.sinks.base import Sink, SinkContext
from slipstream.sources.kafka import check_topic

AT_LEAST_ONCE = (
    "at-least-once: a batch retried after a failure is written again; consumers upsert by key"
)


class KafkaSink(Sink):
    kind = "kafka"
    target_grammar = "url"
    usage = "kafka://host:port/topic"
    continuous = True
    real_time = True
    real_time_writer = (
        "Spark's Kafka sink (at-least-once: a replayed epoch writes its records again)"
    )
    needs_kafka_connector = True

    @property
    def topic(self) -> KafkaTopic:
        return KafkaTopic.parse(str(self.spec.target), "sink")

    def shape(self, frame: DataFrame, ctx: SinkContext) -> DataFrame:
        value = F.to_json(F.struct(*[F.col(c) for c in frame.columns]))
        key = (
            F.to_json(F.struct(*[F.col(k) for k in ctx.key]))
            if ctx.key
            else F.lit(None).cast("string")
        )
        return frame.select(key.alias("key"), value.alias("value"))

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:

        check_topic(self.topic)  # before this query starts
        return writer.format("kafka").options(**self.topic.spark_options())

    def describe(self, ctx: SinkContext | None = None) -> str:
        topic = self.topic
        return f"kafka topic {topic.topic} at {topic.servers} ({AT_LEAST_ONCE})"

    def location(self, ctx: SinkContext) -> str | None:
        return self.topic.describe()
