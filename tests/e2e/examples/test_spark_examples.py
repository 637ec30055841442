"""Apache Spark's Python Structured Streaming examples, ported to slipstream pipelines in
`examples/spark/` (docs/howto/migrate.md): each port run with `slipstream run` as a user runs it,
its output compared with the original query's run with plain PySpark on the same input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from examples.spark import admission_control
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession

from tests.helpers import REPO, slipstream

pytestmark = [pytest.mark.spark, pytest.mark.slow]


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
    done = slipstream(
        "run", "examples.spark.admission_control:AdmissionControl",
        "--input", "format:admission_control_example", "--sink", f"parquet:{out}",
        "--trigger", "available-now", "--state-dir", str(state), "--master", "local[2]",
        cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = pq.read_table(out).to_pandas()
    key = ["id"]
    pd.testing.assert_frame_equal(
        got[["id", "value"]].sort_values(key).reset_index(drop=True),
        want[["id", "value"]].sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )
