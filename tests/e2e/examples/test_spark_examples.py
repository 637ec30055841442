"""Apache Spark's Python Structured Streaming examples, ported to slipstream pipelines in
`examples/spark/` (docs/howto/migrate.md): each port run with `slipstream run` as a user runs it,
its output compared with the original query's run with plain PySpark on the same input."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from examples.spark import admission_control, blockchain_admission_control
from examples.spark.simple_streaming_query import SimpleStreamingQuery
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import explode, split

from slipstream.app import cli, exits
from slipstream.sinks.sqlite import read_table
from slipstream.testing import PipelineHarness
from tests.services import produce

pytestmark = pytest.mark.spark


def run_here(*args: str) -> int:
    """`slipstream run ARGS --trigger available-now`, parsed and run by the CLI in this
    process, on the test session's Spark (its Python data sources registered on it)."""
    return cli.main(["run", *args, "--trigger", "available-now", "--quiet"], io.StringIO())


def original_admission_control(spark: SparkSession) -> tuple[pd.DataFrame, list[int]]:
    """Spark's example as it runs its query: the data source registered, read with
    `readStream.format`, each batch collected by `foreachBatch` (available-now)."""
    cloudpickle.register_pickle_by_value(sys.modules[admission_control.__name__])
    spark.dataSource.register(admission_control.NumbersSource)
    batches: list[list[dict[str, Any]]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches.append([r.asDict() for r in batch.collect()])

    frame = spark.readStream.format("admission_control_example").load()
    query = frame.writeStream.trigger(availableNow=True).foreachBatch(collect).start()
    query.awaitTermination()
    rows = pd.DataFrame([r for b in batches for r in b])
    return rows, [len(b) for b in batches]


def test_admission_control_port_equals_the_original(spark: SparkSession, tmp_path: Path) -> None:
    want, sizes = original_admission_control(spark)
    assert sum(sizes) == admission_control.ROWS  # available-now: every row, then it stops
    out, state = tmp_path / "out", tmp_path / "state"
    assert run_here(
        "examples.spark.admission_control:AdmissionControl",
        "--input", "format:admission_control_example", "--sink", f"parquet:{out}",
        "--state-dir", str(state),
    ) == exits.EXIT_OK  # fmt: skip
    got = pq.read_table(out).to_pandas()
    key = ["id"]
    pd.testing.assert_frame_equal(
        got[["id", "value"]].sort_values(key).reset_index(drop=True),
        want[["id", "value"]].sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )


def original_blockchain(spark: SparkSession, height: int) -> tuple[pd.DataFrame, list[int]]:
    """Spark's blockchain example's query with the default trigger (the original's), each batch
    collected by `foreachBatch` instead of printed, until the chain is read."""
    blockchain = blockchain_admission_control
    cloudpickle.register_pickle_by_value(sys.modules[blockchain.__name__])
    spark.dataSource.register(blockchain.BlockchainSource)
    batches: list[list[dict[str, Any]]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches.append([r.asDict() for r in batch.collect()])

    frame = spark.readStream.format("blockchain_example").option("height", height).load()
    query = frame.writeStream.foreachBatch(collect).start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return pd.DataFrame([r for b in batches for r in b]), [len(b) for b in batches if b]


def test_blockchain_port_equals_the_original_and_ends_when_idle(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The original's trigger (not available-now): the port's run ends by itself once the chain
    is read (`--stop-when-idle`), with the blocks the original's batches held."""
    height = 100
    want, sizes = original_blockchain(spark, height)
    per_batch = blockchain_admission_control.PER_BATCH
    assert sizes == [per_batch] * (height // per_batch)  # the admission control held
    out, state = tmp_path / "out", tmp_path / "state"
    code = cli.main(
        ["run", "examples.spark.blockchain_admission_control:BlockchainBlocks",
         "--input", f"format:blockchain_example?height={height}", "--sink", f"parquet:{out}",
         "--state-dir", str(state), "--stop-when-idle", "5s", "--quiet"],
        io.StringIO(),
    )  # fmt: skip
    assert code == exits.EXIT_OK
    got = pq.read_table(out).to_pandas()
    columns, key = list(want.columns), ["block_number"]
    pd.testing.assert_frame_equal(
        got[columns].sort_values(key).reset_index(drop=True),
        want[columns].sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )


RATE = 10  # rows a second: rate's row i comes 1/RATE s after row i-1


def rate_rows_as_spark_makes_them(frame: pd.DataFrame) -> None:
    """The rate source's rows: values 0..n-1, each 1/RATE s after the one before."""
    frame = frame.sort_values("value").reset_index(drop=True)
    assert list(frame["value"]) == list(range(len(frame))) and len(frame) > RATE
    # ISO 8601 with or without a fraction: a row on a whole second is written "...:45Z"
    steps = pd.to_datetime(frame["timestamp"], format="ISO8601").diff().dropna()
    assert set(steps) == {pd.Timedelta(seconds=1 / RATE)}


def test_simple_streaming_query_port_reads_what_the_original_reads(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The original writes the rate source's rows to noop (nothing to compare); with its sink
    swapped for one that keeps them (memory, and the harness's collect sink), both hold the
    same columns and rows as Spark's rate source makes them. A rate source never ends, so
    both are driven in this process until they have read more than a second of rows (the
    port's CLI run ends at --duration)."""
    frame = spark.readStream.format("rate").option("rowsPerSecond", RATE).load()
    query = frame.writeStream.format("memory").queryName("original_simple").start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and spark.table("original_simple").count() <= RATE:
            query.awaitTermination(0.5)  # bounded poll: rate rows come with the clock
    finally:
        query.stop()
    want = spark.table("original_simple").toPandas()
    rows: list[dict[str, Any]] = []
    with PipelineHarness(
        spark, SimpleStreamingQuery(), tmp_path, source="rate", rows_per_second=RATE
    ) as h:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(rows) <= RATE:
            rows += h.process()  # the collect sink: each committed batch's rows
            assert h.run is not None
            h.run.queries["rows"].awaitTermination(0.5)  # bounded poll, as for the original
    got = pd.DataFrame(rows)
    assert list(got.columns) == list(want.columns) == ["timestamp", "value"]
    rate_rows_as_spark_makes_them(want)
    rate_rows_as_spark_makes_them(got)


#: messages with repeated, empty and leading words: `split(value, ' ')` keeps the empty ones
MESSAGES = ["apache spark", "spark  streaming", " kafka spark", "streaming", ""]


def original_kafka_wordcount(spark: SparkSession, bootstrap: str, topics: str) -> pd.DataFrame:
    """Spark's example's query (from the earliest offsets, available-now, into memory)."""
    lines = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING)")
    )
    words = lines.select(explode(split(lines.value, " ")).alias("word"))
    query = (
        words.groupBy("word").count().writeStream.outputMode("complete").format("memory")
        .queryName("original_kafka_wordcount").trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()
    return spark.table("original_kafka_wordcount").toPandas()


@pytest.mark.kafka
def test_kafka_wordcount_port_equals_the_original(
    kafka_spark: SparkSession, kafka: Any, tmp_path: Path
) -> None:
    topics = [kafka.create_topic(f"s-kwc-{tmp_path.name[-20:]}-{n}", 2) for n in ("a", "b")]
    produce(kafka.bootstrap, topics[0], MESSAGES[:3])
    produce(kafka.bootstrap, topics[1], MESSAGES[3:])
    want = original_kafka_wordcount(kafka_spark, kafka.bootstrap, ",".join(topics))
    state = tmp_path / "state"
    url = kafka.url(",".join(topics), startingOffsets="earliest")
    assert run_here(
        "examples.spark.kafka_wordcount:KafkaWordCount", "--input", url, "--mode", "complete",
        "--sink", f"sqlite:{state / 'out.db'}", "--state-dir", str(state),
    ) == exits.EXIT_OK  # fmt: skip
    got = pd.DataFrame(read_table(state / "out.db", "kafka_word_counts"))
    pd.testing.assert_frame_equal(
        got[["word", "count"]].sort_values("word").reset_index(drop=True),
        want[["word", "count"]].sort_values("word").reset_index(drop=True),
        check_dtype=False,
    )
    assert set(want["word"]) >= {"", "spark"}  # the empty word counted, as Spark's split gives
