"""Parquet files read one whole file at a time, each judged before any of its rows is used.

Spark's parquet reader fails the query on a corrupt file or one whose column types differ from
the declared schema, and `ignoreCorruptFiles` would skip it without a trace (a mismatched file
may even be read in part). Here a stream lists the landing folder with Spark's `binaryFile`
format (paths and sizes only: Spark does not read a file's content unless asked for it) and
`mapInArrow` reads each listed file with pyarrow on the executors:

- read: the file has PAR1 magic at both ends, a readable footer, every data page decodes (and
  matches its checksum, when the writer wrote one), and its schema fits the declared one
  (`fits`). Its rows come out in the declared types with `_reason` NULL, to go through the
  required-field rule, the event-time guard and the expectations like any format's records;
- rejected: one row with the declared columns NULL, `_reason` (`parquet_corrupt: ...`,
  `parquet_schema_mismatch: ...`) and `_raw` a JSON object with the file's path, its size in
  bytes, its row count when the footer says it, and its first 64 bytes in base64. A rejected
  file counts as one record: `valid + quarantined + late + duplicates = sent` holds with a
  rejected file sent as one record and a read file as its rows;
- withdrawn: a file deleted after the listing (Spark's `ignoreMissingFiles`, as other formats).

A file is all or nothing: its rows are decoded in full before the first one is given (held in
memory up to `BUFFER_BYTES` of uncompressed data; a larger file is decoded twice, once to check
and once to give), so a page that fails half-way never leaves part of a file in the output. The
verdict is a function of the file's bytes only, so every query reading the folder with its own
checkpoint judges every file alike. Files must land whole (write elsewhere, then rename).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from slipstream.ingest.parse import RAW, REASON, SOURCE

log = logging.getLogger(__name__)

CORRUPT = "parquet_corrupt"
MISMATCH = "parquet_schema_mismatch"
MAGIC = b"PAR1"
HEAD_BYTES = 64  # of a rejected file, kept in its quarantine record
BUFFER_BYTES = 64 * 1024 * 1024  # a file up to this (uncompressed) is decoded once
# what pyarrow raises on bytes it cannot decode (thrift, pages, checksums, lengths)
# Spark's `binaryFile` format's columns (a stream must be given them); only the path is read
LISTING = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
_UNREADABLE = (pa.ArrowException, OSError, ValueError, MemoryError, EOFError)


def _fits_type(got: pa.DataType, want: pa.DataType) -> bool:
    """Whether every value of `got` is a value of `want` (the file's type can be read as the
    declared one): the same type, a lossless widening of integers, floats and decimals, an
    integer of at most 32 bits as a double, any timestamp as a timestamp (one without a time
    zone is read as UTC; nanoseconds are cut to microseconds, as Spark keeps them), strings of
    any layout, or a column of nothing but NULLs."""
    t = pa.types
    if got.equals(want) or t.is_null(got):
        return True
    if t.is_integer(got) and t.is_signed_integer(want):
        width = got.bit_width + (0 if t.is_signed_integer(got) else 1)
        return width <= want.bit_width
    if t.is_floating(got) and t.is_floating(want):
        return got.bit_width <= want.bit_width
    if t.is_integer(got) and t.is_float64(want):
        return got.bit_width <= 32
    if t.is_decimal(got) and t.is_decimal(want):
        return got.scale <= want.scale and got.precision - got.scale <= want.precision - want.scale
    if t.is_timestamp(got) and t.is_timestamp(want):
        return True
    if t.is_date(got) and t.is_date(want):
        return True
    strings = (t.is_string, t.is_large_string, t.is_string_view)
    return any(s(got) for s in strings) and any(s(want) for s in strings)


def fits(
    got: pa.Schema, want: pa.Schema, spark_types: dict[str, str], required: set[str]
) -> str | None:
    """Why a file of schema `got` cannot be read as `want`, or None when it can. Columns match
    by name (Spark's rule: exactly, else the one that differs only in case); a column the file
    lacks is NULL in every row unless it is required; a column not declared is ignored."""
    for field in want:
        found = _column(got, field.name)
        if found is None:
            if field.name in required:
                return f"{MISMATCH}: required column '{field.name}' is missing"
            continue
        if found == "ambiguous":
            return f"{MISMATCH}: column '{field.name}' is there twice (in different case)"
        have = got.field(found).type
        if not _fits_type(have, field.type):
            declared = spark_types[field.name]
            return f"{MISMATCH}: column '{field.name}' is {have}, declared {declared}"
    return None


def _column(schema: pa.Schema, name: str) -> str | None:
    """The file's column for a declared name: exact, else the only one equal ignoring case."""
    if schema.get_field_index(name) >= 0:
        return name
    matches = [n for n in schema.names if n.lower() == name.lower()]
    return matches[0] if len(matches) == 1 else ("ambiguous" if matches else None)


def _open(uri: str) -> pa.NativeFile:
    """A listed file, by the URI Spark gives (`file:///...`, percent-encoded)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return pafs.LocalFileSystem().open_input_file(unquote(parsed.path))
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs.open_input_file(path)


class _Rejected(Exception):
    """A file that is not read: its reason."""


class FileReader:
    """A file's verdict and rows, in the declared layout (`output_schema` as Arrow types)."""

    def __init__(
        self,
        schema: StructType,
        required: tuple[str, ...],
        timezone: str = "UTC",
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        self.buffer_bytes = buffer_bytes
        self.out = to_arrow_schema(output_schema(schema), timezone=timezone)
        self.spark_types = {f.name: f.dataType.simpleString() for f in schema.fields}
        self.declared = pa.schema([self.out.field(n) for n in self.spark_types])
        self.required = set(required)

    def read(self, uri: str) -> Iterator[pa.RecordBatch]:
        """The file's rows, or its one rejection row; nothing when it is gone."""
        try:
            handle = _open(uri)
        except FileNotFoundError:
            log.warning("parquet file %s was deleted before it was read: skipped", uri)
            return
        with handle:
            size = handle.size()
            rows: int | None = None
            try:
                parquet = self._footer(handle, size)
                rows = parquet.metadata.num_rows
                batches = self._checked(parquet)
            except _Rejected as exc:
                head = base64.b64encode(handle.read_at(min(size, HEAD_BYTES), 0)).decode()
                raw = {"file": uri, "bytes": size, "rows": rows, "head": head}
                yield self._rejection(uri, str(exc), json.dumps(raw))
                return
            for batch in batches():
                yield self._conform(batch, uri)

    @staticmethod
    def _footer(handle: pa.NativeFile, size: int) -> pq.ParquetFile:
        if size == 0:
            raise _Rejected(f"{CORRUPT}: empty file (0 bytes)")
        if size < 12:  # two magics and the footer's length
            raise _Rejected(f"{CORRUPT}: {size} bytes, too short for Parquet")
        if handle.read_at(4, 0) != MAGIC:
            raise _Rejected(f"{CORRUPT}: no PAR1 magic at the start (not Parquet)")
        if handle.read_at(4, size - 4) != MAGIC:
            raise _Rejected(f"{CORRUPT}: no PAR1 magic at the end (truncated, or not Parquet)")
        try:
            return pq.ParquetFile(handle, page_checksum_verification=True)
        except _UNREADABLE as exc:
            raise _Rejected(f"{CORRUPT}: unreadable footer: {_first_line(exc)}") from exc

    def _checked(self, parquet: pq.ParquetFile) -> Callable[[], Iterator[pa.RecordBatch]]:
        reason = fits(parquet.schema_arrow, self.declared, self.spark_types, self.required)
        if reason is not None:
            raise _Rejected(reason)
        try:
            return self._decoded(parquet)
        except _UNREADABLE as exc:
            raise _Rejected(f"{CORRUPT}: unreadable data: {_first_line(exc)}") from exc

    def _decoded(self, parquet: pq.ParquetFile) -> Callable[[], Iterator[pa.RecordBatch]]:
        """Decode the whole file now (raising if any page fails); a function giving its
        batches."""
        columns = [c for f in self.declared if (c := _column(parquet.schema_arrow, f.name))]
        meta = parquet.metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if size <= self.buffer_bytes:
            held = list(parquet.iter_batches(columns=columns))
            return lambda: iter(held)
        for _ in parquet.iter_batches(columns=columns):
            pass
        return lambda: parquet.iter_batches(columns=columns)

    def _conform(self, batch: pa.RecordBatch, uri: str) -> pa.RecordBatch:
        arrays = []
        for field in self.declared:
            name = _column(batch.schema, field.name)
            if name is None:
                arrays.append(pa.nulls(batch.num_rows, field.type))
            else:
                arrays.append(pc.cast(batch.column(name), field.type, safe=False))
        n = batch.num_rows
        arrays += [
            pa.nulls(n, pa.string()),
            pa.array([uri] * n, pa.string()),
            pa.nulls(n, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.out)

    def _rejection(self, uri: str, reason: str, raw: str) -> pa.RecordBatch:
        arrays = [pa.nulls(1, f.type) for f in self.declared]
        arrays += [pa.array([raw]), pa.array([uri]), pa.array([reason])]
        return pa.RecordBatch.from_arrays(arrays, schema=self.out)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


def output_schema(schema: StructType) -> StructType:
    """The declared columns (nullable: a rejected file's row has none), `_raw`, `_source`,
    `_reason`."""
    fields = [StructField(f.name, f.dataType, True) for f in schema.fields]
    return StructType([*fields, *(StructField(c, StringType()) for c in (RAW, SOURCE, REASON))])


def parquet_rows(listing: DataFrame, schema: StructType, required: tuple[str, ...]) -> DataFrame:
    """A `binaryFile` listing (stream or batch) -> each file's rows or its rejection row:
    the declared columns, `_raw` (NULL for a row read), `_source` and `_reason`."""
    timezone = listing.sparkSession.conf.get("spark.sql.session.timeZone")
    reader = FileReader(schema, required, timezone or "UTC")

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri in batch.column(0).to_pylist():
                yield from reader.read(uri)

    paths = listing.select(F.col("_metadata.file_path").alias("path"))
    return paths.mapInArrow(decode, output_schema(schema))
