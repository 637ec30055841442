"""Spark's `structured_blockchain_admission_control.py` as a slipstream pipeline: a Python data
source of simulated blockchain blocks that admits at most 20 a micro-batch
(`getDefaultReadLimit` returns `ReadMaxRows(20)`), read as any Spark format.

    slipstream run examples.spark.blockchain_admission_control:BlockchainBlocks \\
        --input format:blockchain_example --sink parquet:blocks --stop-when-idle 5s

The data source is Spark 4's DataSource API as a plain PySpark job registers it; the pipeline
lists it in `data_sources`. The chain's height is the original's 10,000 blocks unless the input
says otherwise (`format:blockchain_example?height=100`). What the port gains over the original's
console sink and `time.sleep(30)`: the blocks in Parquet exactly once, a run that ends by itself
once the chain is read (`--stop-when-idle`), the `check` before start, the run's metrics."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from slipstream.api.pipeline import Input, Output, Params, Pipeline

#: the original's chain height and blocks per micro-batch
HEIGHT = 10_000
PER_BATCH = 20
SCHEMA = "block_number INT, block_hash STRING, timestamp LONG, transaction_count INT"


def block(number: int) -> tuple[int, str, int, int]:
    """The original's simulated block: a hash of its number, 12 s apart, 1-100 transactions."""
    digest = hashlib.sha256(str(number).encode()).hexdigest()[:16]
    return number, digest, 1_700_000_000 + number * 12, number % 100 + 1


class Blocks(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class BlockchainReader(DataSourceStreamReader):
    """Blocks 0..height-1, at most PER_BATCH a micro-batch unless Spark asks for all."""

    def __init__(self, height: int) -> None:
        self.height = height

    def initialOffset(self) -> dict[str, int]:
        return {"block_number": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(PER_BATCH)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        at = start["block_number"]
        if isinstance(limit, ReadAllAvailable):
            return {"block_number": self.height}
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else PER_BATCH
        return {"block_number": min(at + most, self.height)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        first, last = start["block_number"], end["block_number"]
        return [Blocks(first, last)] if first < last else []

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, Blocks)
        return iter([block(n) for n in range(partition.start, partition.end)])


class BlockchainSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "blockchain_example"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BlockchainReader(int(self.options.get("height", HEIGHT)))


class BlockchainBlocks(Pipeline):
    name = "blockchain_blocks"
    description = "Spark's blockchain admission-control example: the blocks, as read"
    inputs = (Input("blocks", SCHEMA, required=("block_number",), sources=("format",)),)
    outputs = (Output("blocks", modes=("append",), sink="parquet"),)
    data_sources = (BlockchainSource,)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"blocks": inputs["blocks"]}
