"""A pipeline input's schema: written as Spark DDL, and a CSV table's header checked against it.

`"id STRING, n BIGINT NOT NULL, ts TIMESTAMP"` is parsed once, when the pipeline module is
imported, without Spark (a pipeline is declared and checked before any session starts): the
flat, primitive types a JSON or CSV record holds. A nested or unknown type fails at import with
PIPELINE_INVALID; give a `StructType` for those."""

from __future__ import annotations

import csv
from pathlib import Path

from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from slipstream.errors import ConfigError

TYPES: dict[str, type[DataType]] = {
    "STRING": StringType,
    "BOOLEAN": BooleanType,
    "TINYINT": ByteType,
    "BYTE": ByteType,
    "SMALLINT": ShortType,
    "SHORT": ShortType,
    "INT": IntegerType,
    "INTEGER": IntegerType,
    "BIGINT": LongType,
    "LONG": LongType,
    "FLOAT": FloatType,
    "REAL": FloatType,
    "DOUBLE": DoubleType,
    "DATE": DateType,
    "TIMESTAMP": TimestampType,
    "TIMESTAMP_LTZ": TimestampType,
    "TIMESTAMP_NTZ": TimestampNTZType,
}


def parse_ddl(ddl: str) -> StructType:
    """`"name TYPE [NOT NULL], ..."` -> StructType (fields nullable unless NOT NULL)."""
    fields = []
    for column in ddl.split(","):
        words = column.split()
        nullable = [w.upper() for w in words[2:]] != ["NOT", "NULL"]
        kind = TYPES.get(words[1].upper()) if len(words) > 1 else None
        if kind is None or (words[2:] and nullable):
            raise ConfigError(
                "PIPELINE_INVALID",
                f"schema {ddl!r}: cannot read the column {column.strip()!r}",
                "write each column as `name TYPE` or `name TYPE NOT NULL`, TYPE one of "
                + ", ".join(TYPES)
                + " (or give a StructType)",
            )
        fields.append(StructField(words[0], kind(), nullable))
    return StructType(fields)


def check_csv_header(
    path: Path, name: str, schema: StructType, what: str, compared: int = 0
) -> None:
    """Before Spark starts: the static CSV input `name` is a file whose header names the fields
    of `schema` (only its first `compared` columns, when given), else CONFIG_BAD_VALUE asking
    for `what`."""
    if not path.is_file():
        raise ConfigError(
            "CONFIG_BAD_VALUE", f"--input {name}={path} is not a file", f"give {what}"
        )
    with path.open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle), None)
    columns = schema.fieldNames()
    seen = [h.strip() for h in header or ()]
    if header is None or (seen[:compared] if compared else seen) != columns[: compared or None]:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--input {name}={path} has header {header!r}",
            f"start the CSV with the header {','.join(columns)}",
        )
