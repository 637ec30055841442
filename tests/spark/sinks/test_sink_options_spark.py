"""Sink options through a real run (issue 42 item 3): `mobile`'s bundled samples into
`parquet:DIR?compression=zstd&partitionBy=action`, read back and compared with pandas; a
partitionBy column the output does not have is refused before the query starts."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from slipstream.errors import SlipstreamError
from slipstream.pipelines import get_pipeline
from slipstream.testing import PipelineHarness
from tests.helpers import mobile_counts

pytestmark = pytest.mark.spark


def test_a_parquet_sink_partitioned_and_compressed_as_its_options_say(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    sink = f"parquet:{out}?compression=zstd&partitionBy=action"
    lines: list[str] = []
    with PipelineHarness(spark, "mobile", tmp_path, sink=sink, mode="append", watermark="1ms") as h:
        for sample in get_pipeline("mobile").sample_files():
            text = sample.read_text()
            lines += [line for line in text.splitlines() if line.strip()]
            h.feed(text)
            h.process()
        rows = pd.DataFrame(h.results())

    folders = {p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders and all(f.startswith("action=") for f in folders)
    files = list(out.glob("action=*/*.parquet"))
    codecs = {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files}
    assert codecs == {"ZSTD"}

    expected = mobile_counts(lines)
    assert {f.split("=", 1)[1] for f in folders} <= set(expected["action"])
    got = rows[["window_start", "action", "count"]].sort_values(["window_start", "action"])
    # append mode: the windows the watermark closed (all but the last ones) are final
    merged = got.merge(expected, on=["window_start", "action"], suffixes=("", "_expected"))
    assert len(merged) == len(got) > 0
    assert (merged["count"] == merged["count_expected"]).all()


def test_a_partition_column_the_output_does_not_have_is_refused_before_start(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = f"parquet:{tmp_path / 'out'}?partitionBy=nope"
    harness = PipelineHarness(spark, "mobile", tmp_path, sink=sink, mode="append")
    with pytest.raises(SlipstreamError) as err, harness:
        pass
    assert err.value.code == "CONFIG_BAD_VALUE" and "nope" in str(err.value)
    assert not (tmp_path / "out" / "_spark_metadata").exists()
