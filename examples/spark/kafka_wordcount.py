"""Spark's `structured_kafka_wordcount.py` as a slipstream pipeline: a running count of the words
of the messages of one or more Kafka topics, split on single spaces as the original splits them.

    slipstream run examples.spark.kafka_wordcount:KafkaWordCount \\
        --input 'kafka://HOST:PORT/topic1,topic2' --mode complete --sink sqlite:counts.db

The original's three ways to subscribe are the input URL's: a topic list (`/a,b`),
`?subscribePattern=REGEX` or `?assign={"a":[0,1]}`. What the port gains over the original's
console sink: the counts upserted exactly once into a table, the consumer lag per partition in
the run's metrics, the mode checked before start."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import not_null
from slipstream.api.pipeline import Input, Output, Params, Pipeline


class KafkaWordCount(Pipeline):
    name = "kafka_wordcount"
    description = "Spark's Kafka word count: a running count per word of the messages' text"
    inputs = (Input("lines", format="text", sources=("kafka",)),)
    outputs = (
        Output("counts", table="kafka_word_counts", key=("word",), modes=("complete", "update")),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        words = inputs["lines"].select(F.explode(F.split(F.col("value"), " ")).alias("word"))
        # a word is never NULL (split gives strings; a NULL message, no words): said to Spark,
        # so that the table's key can be upserted on (`check` refuses a nullable key)
        return {"counts": not_null(words.groupBy("word").count(), "word")}
