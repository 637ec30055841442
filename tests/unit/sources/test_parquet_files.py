"""The parquet file rules without Spark: which file schemas fit a declared one, and a file's
verdict and rows as the executors compute them (sources/parquet_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import (
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from slipstream.sources.parquet_files import FileReader, fits

DECLARED = StructType(
    [
        StructField("id", StringType()),
        StructField("n", IntegerType()),
        StructField("big", LongType()),
        StructField("x", DoubleType()),
        StructField("ts", TimestampType()),
        StructField("d", DateType()),
    ]
)
REQUIRED = ("id",)


def _reader(**kw: int) -> FileReader:
    return FileReader(DECLARED, REQUIRED, "UTC", **kw)


def _fits(**columns: pa.DataType) -> str | None:
    reader = _reader()
    base = {f.name: f.type for f in reader.declared}
    base.update(columns)
    got = pa.schema([(k, v) for k, v in base.items() if v is not None])
    return fits(got, reader.declared, reader.spark_types, reader.required)


@pytest.mark.parametrize(
    "column, got",
    [
        ("n", pa.int8()), ("n", pa.int16()), ("n", pa.uint16()), ("big", pa.int32()),
        ("big", pa.uint32()), ("x", pa.float32()), ("x", pa.int32()), ("x", pa.null()),
        ("ts", pa.timestamp("ns")), ("ts", pa.timestamp("ms", "Asia/Tokyo")),
        ("id", pa.large_string()), ("d", pa.date64()),
    ],
)  # fmt: skip
def test_types_that_widen_fit(column: str, got: pa.DataType) -> None:
    assert _fits(**{column: got}) is None


@pytest.mark.parametrize(
    "column, got, said",
    [
        ("n", pa.int64(), "column 'n' is int64, declared int"),
        ("n", pa.uint32(), "column 'n' is uint32, declared int"),
        ("big", pa.uint64(), "column 'big' is uint64, declared bigint"),
        ("x", pa.int64(), "column 'x' is int64, declared double"),
        ("ts", pa.string(), "column 'ts' is string, declared timestamp"),
        ("ts", pa.date32(), "column 'ts' is date32[day], declared timestamp"),
        ("id", pa.binary(), "column 'id' is binary, declared string"),
        ("n", pa.float64(), "column 'n' is double, declared int"),
    ],
)
def test_types_that_do_not_fit(column: str, got: pa.DataType, said: str) -> None:
    assert _fits(**{column: got}) == f"parquet_schema_mismatch: {said}"


def test_missing_and_extra_columns() -> None:
    assert _fits(x=None, extra=pa.string()) is None  # optional x: NULLs; extra: ignored
    assert _fits(id=None) == "parquet_schema_mismatch: required column 'id' is missing"
    assert _fits(id=None, ID=pa.string()) is None  # Spark matches case-insensitively
    both = _fits(id=None, ID=pa.string(), Id=pa.string())
    assert both == "parquet_schema_mismatch: column 'id' is there twice (in different case)"


def _write(path: Path, rows: int, **options: object) -> str:
    table = pa.table({"id": [f"r{i}" for i in range(rows)], "n": pa.array(range(rows), pa.int16())})
    pq.write_table(table, path, **options)  # type: ignore[arg-type]
    return path.as_uri()


def test_a_read_file_gives_every_row_in_the_declared_types(tmp_path: Path) -> None:
    uri = _write(tmp_path / "a b.parquet", 10, row_group_size=3)
    for reader in (_reader(), _reader(buffer_bytes=0)):  # held, and decoded twice
        table = pa.Table.from_batches(list(reader.read(uri)))
        assert table.schema == reader.out
        assert table.column("n").to_pylist() == list(range(10))
        assert table.column("x").null_count == 10
        assert set(table.column("_source").to_pylist()) == {uri}
        assert table.column("_reason").null_count == 10


def test_a_rejected_file_is_one_row_with_its_evidence(tmp_path: Path) -> None:
    path = tmp_path / "short.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 100)
    (batch,) = _reader().read(path.as_uri())
    row = batch.to_pylist()[0]
    assert row["_reason"] == "parquet_corrupt: no PAR1 magic at the end (truncated, or not Parquet)"
    raw = json.loads(row["_raw"])
    assert raw == {"file": path.as_uri(), "bytes": 104, "rows": None, "head": raw["head"]}
    assert row["id"] is None and row["ts"] is None
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    (batch,) = _reader().read(empty.as_uri())
    assert batch.column("_reason").to_pylist() == ["parquet_corrupt: empty file (0 bytes)"]


def test_a_mismatched_file_says_its_row_count(tmp_path: Path) -> None:
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "n": pa.array([1, 2], pa.int64())}), path)
    (batch,) = _reader().read(path.as_uri())
    assert json.loads(batch.column("_raw")[0].as_py())["rows"] == 2


def test_a_file_gone_before_it_is_read_gives_nothing(tmp_path: Path) -> None:
    assert list(_reader().read((tmp_path / "gone.parquet").as_uri())) == []
