"""Turn raw records into typed rows, or into a rejection with its reason. Built-in functions only.

Every record comes out as exactly one row: typed columns plus `_raw` (the record as received;
bytes that are not UTF-8 as U+FFFD), `_source` (the file it came from, or the source kind) and
`_reason` (NULL when valid). A blank line (nothing but spaces, tabs and line ends) is not a
record and is skipped, as Spark's own JSON and CSV readers do; nothing else is dropped here, so
valid + rejected always equals the records read. Where each row is a record (Kafka: the raw
frame carries `_empty`, ingest/records.py), a NULL, empty or blank value is one, rejected.
tests/spark/ingest/test_hostile.py streams a corpus of hostile input through these rules
(tests/fixtures/hostile/expected.json says each fate)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    FractionalType,
    IntegralType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from slipstream.ingest import jvm_parse
from slipstream.ingest.records import EMPTY, META_COLUMNS, RAW, REASON, SOURCE, evaluated_once

__all__ = [  # the record columns are defined in ingest/records.py and offered here too
    "META_COLUMNS",
    "RAW",
    "REASON",
    "SOURCE",
    "check_typed",
    "parse_csv",
    "parse_json",
    "parse_json_expressions",
]

_JSON_SPACE = " \t\r\n"  # what JSON allows before a value
# Spark's variant holds at most 16 MiB: a longer record cannot parse, so it is not tried
MAX_JSON_BYTES = 16 * 1024 * 1024
# a timestamp or date given as text starts with a whole date: Spark's cast would read a bare
# time ("10:02:33") as that time today, and "2018" as the start of the year
_DATE_FIRST = r"^\s*[+-]?[0-9]{4,}-[0-9]{2}-[0-9]{2}([T ]|\s*$)"


def _strip(column: Column) -> Column:
    """`column` without JSON's white space at either end. `btrim`, not the two-argument
    `trim`/`ltrim`, which Spark 4 logs as deprecated on every query that uses them."""
    return F.btrim(column, F.lit(_JSON_SPACE))


def _records(raw: DataFrame) -> DataFrame:
    """Text lines (`value`, `_source`) -> `value` as valid UTF-8, `_utf8` (whether it was) and
    EMPTY. A blank line is skipped; where each row is a record (the raw frame has an EMPTY
    column: Kafka), a NULL, empty or blank one is kept, to be rejected with EMPTY's reason."""
    utf8 = F.is_valid_utf8(F.col("value"))
    keep = _strip(F.col("value")) != F.lit("")
    empty = F.lit(None).cast("string")
    if EMPTY in raw.columns:
        empty = F.col(EMPTY)
        keep = keep | empty.isNotNull()
    return raw.filter(keep).select(
        F.when(utf8, F.col("value")).otherwise(F.make_valid_utf8(F.col("value"))).alias("value"),
        F.col(SOURCE),
        utf8.alias("_utf8"),
        empty.alias(EMPTY),
    )


def _empty() -> tuple[Column, Column]:
    return F.col(EMPTY).isNotNull(), F.col(EMPTY)


def _not_utf8() -> tuple[Column, Column]:
    return ~F.col("_utf8"), F.lit("not valid UTF-8 (bytes shown as U+FFFD in raw)")


def _dated(text: Column, target: DataType) -> Column:
    """FALSE when a timestamp or date field's text does not start with a whole date."""
    if isinstance(target, TimestampType | DateType):
        return F.coalesce(text.rlike(_DATE_FIRST), F.lit(True))
    return F.lit(True)


def _finite(typed: Column, target: DataType) -> Column:
    """A number beyond a double's range (1e400) becomes infinity: out of range; so is NaN."""
    if isinstance(target, FractionalType):
        return ~(F.isnan(typed) | typed.isin(float("inf"), float("-inf")))
    return F.lit(True)


def _variant_kind_ok(kind: Column, target: DataType) -> Column:
    """Which JSON value kinds a target type accepts (strict: a number is not a string, and an
    integer field takes no fraction: 1.5 is not truncated to 1)."""
    if isinstance(target, StringType | TimestampType | DateType):
        return kind == F.lit("STRING")
    if isinstance(target, IntegralType):
        return kind.rlike(r"^(BIGINT|INT|SMALLINT|TINYINT|DECIMAL\([0-9]+,0\))$")
    if isinstance(target, NumericType):
        return kind.rlike("^(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL)")
    if isinstance(target, BooleanType):
        return kind == F.lit("BOOLEAN")
    return F.lit(True)


def _kind_name(kind: Column) -> Column:
    """A value's kind without what it holds (`object`, not the whole nested type of a deeply
    nested one: a reason stays short)."""
    return F.regexp_extract(F.lower(kind), r"^[a-z_]+(\([0-9, ]+\))?", 0)


def _first_reason(checks: list[tuple[Column, Column]]) -> Column:
    """The reason of the first failing check, else NULL."""
    expr: Column = F.lit(None).cast("string")
    for failed, reason in reversed(checks):
        expr = F.when(failed, reason).otherwise(expr)
    return expr


def _field_checks(
    f: StructField, got: _Field, typed: Column, required: bool
) -> tuple[list[tuple[Column, Column]], list[tuple[Column, Column]]]:
    """(missing, bad type) checks of one field: (condition, reason) pairs."""
    name, type_name = f.name, f.dataType.simpleString()
    missing = [] if not required else [(~got.present, F.lit(f"missing required field '{name}'"))]
    wrong = f"wrong type for '{name}': expected {type_name}, got "
    if isinstance(f.dataType, TimestampType | DateType):
        bad = f"unparseable {type_name} in '{name}': "
    else:
        bad = f"bad value for '{name}' ({type_name}): "
    bad_type = [
        (got.present & ~got.kind_ok, F.concat(F.lit(wrong), _kind_name(got.kind))),
        (got.present & got.kind_ok & typed.isNull(), F.concat(F.lit(bad), got.raw)),
    ]
    return missing, bad_type


def parse_json(raw: DataFrame, schema: StructType, required: tuple[str, ...]) -> DataFrame:
    """JSON lines (`value`, `_source`) -> typed columns + _raw, _source, _reason.

    The JVM parser (ingest/jvm_parse.py) when it reads the schema and the session has a JVM
    here, else the expression parser below: the same fates and reasons, except that content
    after the root value is `not JSON` only in the JVM parser."""
    if jvm_parse.supports(schema) and jvm_parse.available(raw.sparkSession):
        return jvm_parse.parse_json(raw, schema, required)
    return parse_json_expressions(raw, schema, required)


def parse_json_expressions(
    raw: DataFrame, schema: StructType, required: tuple[str, ...]
) -> DataFrame:
    """JSON lines (`value`, `_source`) -> typed columns + _raw, _source, _reason, by Spark SQL
    expressions.

    Cost matters here: this runs on every record. A parsed document is an object exactly when
    its text starts with `{`, a test far cheaper than describing the whole document with
    `schema_of_variant` (which only runs to word the reason of a rejected one); see
    docs/benchmarks.md for the measurements."""
    doc = F.col("_doc")
    size = F.octet_length(F.col("value"))
    with_doc = _records(raw).select(
        F.col("value").alias(RAW),
        F.col(SOURCE),
        F.col("_utf8"),
        F.col(EMPTY),
        size.alias("_size"),
        F.when(size <= MAX_JSON_BYTES, F.try_parse_json(F.col("value"))).alias("_doc"),
    )
    is_object = _strip(F.col(RAW)).startswith("{")
    keys = F.json_object_keys(F.col(RAW))
    checks: list[tuple[Column, Column]] = [
        _empty(),
        _not_utf8(),
        (
            F.col("_size") > MAX_JSON_BYTES,
            F.format_string(f"record too large: %d bytes (at most {MAX_JSON_BYTES})", "_size"),
        ),
        (
            doc.isNull() & (F.size(keys) > F.size(F.array_distinct(keys))),
            F.lit("not JSON: a key appears twice in an object"),
        ),
        (doc.isNull(), F.lit("not JSON")),
        (~is_object, F.concat(F.lit("not a JSON object: "), _kind_name(F.schema_of_variant(doc)))),
    ]

    # Each field is read out of the document once, in its own projection behind a barrier:
    # the checks below refer to a field's value several times, and Spark would extract it again
    # at each reference (measured in docs/benchmarks.md, scenario 8).
    index = {f.name: i for i, f in enumerate(schema.fields)}
    extracted = evaluated_once(
        with_doc.select(
            "*",
            *[
                column
                for i, f in enumerate(schema.fields)
                for column in (
                    F.try_variant_get(doc, f"$.{f.name}", "variant").alias(f"_node{i}"),
                    F.try_variant_get(doc, f"$.{f.name}", f.dataType.simpleString()).alias(
                        f"_typed{i}"
                    ),
                    (
                        F.try_variant_get(doc, f"$.{f.name}", "string")
                        if isinstance(f.dataType, TimestampType | DateType)
                        else F.lit(None).cast("string")
                    ).alias(f"_text{i}"),
                )
            ],
        )
    )

    def field(f: StructField) -> _Field:
        i = index[f.name]
        node = F.col(f"_node{i}")
        kind = F.schema_of_variant(node)
        return _Field(
            present=node.isNotNull() & ~F.is_variant_null(node),
            typed=F.col(f"_typed{i}"),
            text=F.col(f"_text{i}"),
            kind_ok=_variant_kind_ok(kind, f.dataType),
            kind=kind,
            raw=F.coalesce(F.to_json(node), F.lit("null")),
        )

    return _typed_records(extracted, schema, required, checks, field)


def parse_csv(
    raw: DataFrame, schema: StructType, required: tuple[str, ...], header: bool = True
) -> DataFrame:
    """CSV lines -> typed columns, by position. A header line equal to the field names is
    skipped; any other line is a record of exactly as many fields (a quoted comma is part of its
    field). A record is one line: a quote not closed on its line (a quoted newline) rejects
    each piece."""
    names = [f.name for f in schema.fields]
    strings = ", ".join(f"`{n}` STRING" for n in names)
    lines = _records(raw)
    if header:
        header_line = F.trim(F.col("value")) == F.lit(",".join(names))
        lines = lines.filter(F.col(EMPTY).isNotNull() | ~header_line)
    unquoted = F.regexp_replace(F.col("value"), r'"([^"]|"")*"', "")
    parsed = lines.select(
        F.col("value").alias(RAW),
        F.col(SOURCE),
        F.col("_utf8"),
        F.col(EMPTY),
        F.from_csv(F.col("value"), strings, {"mode": "PERMISSIVE", "escape": '"'}).alias("_rec"),
        F.size(F.split(unquoted, ",", -1)).alias("_fields"),
        unquoted.contains('"').alias("_open_quote"),
    )
    checks: list[tuple[Column, Column]] = [
        _empty(),
        _not_utf8(),
        (F.col("_open_quote"), F.lit("CSV quote not closed on its line (a record is one line)")),
        (
            F.col("_fields") != len(names),
            F.format_string(f"not a CSV record of {len(names)} fields: %d fields", "_fields"),
        ),
    ]

    def field(f: StructField) -> _Field:
        text = F.col(f"_rec.{f.name}")
        present = text.isNotNull() & (text != F.lit(""))
        return _Field(present, text.try_cast(f.dataType), text, F.lit(True), F.lit("string"), text)

    return _typed_records(parsed, schema, required, checks, field)


@dataclass(frozen=True)
class _Field:
    """One field of a record, as its format reads it: whether it is there, its value cast to
    the field's type, its text, whether its kind fits the type, the kind, its raw text."""

    present: Column
    typed: Column
    text: Column
    kind_ok: Column
    kind: Column
    raw: Column


def _typed_records(
    frame: DataFrame,
    schema: StructType,
    required: tuple[str, ...],
    checks: list[tuple[Column, Column]],
    field: Callable[[StructField], _Field],
) -> DataFrame:
    """The typed columns of `frame`'s records and the reason of each rejected one: the first
    failing check of the record, then of a missing field, then of a field's type."""
    typed_cols = []
    missing_checks: list[tuple[Column, Column]] = []
    type_checks: list[tuple[Column, Column]] = []
    for f in schema.fields:
        got = field(f)
        typed = F.when(_dated(got.text, f.dataType) & _finite(got.typed, f.dataType), got.typed)
        m, t = _field_checks(f, got, typed, f.name in required)
        missing_checks += m
        type_checks += t
        typed_cols.append(F.when(got.present, typed).alias(f.name))
    reason = _first_reason(checks + missing_checks + type_checks)
    return evaluated_once(
        frame.select(*typed_cols, F.col(RAW), F.col(SOURCE), reason.alias(REASON))
    )


def check_typed(typed: DataFrame, schema: StructType, required: tuple[str, ...]) -> DataFrame:
    """Already-typed input (parquet, tables): only required fields can fail. A row that
    comes with a `_reason` and `_raw` (a rejected parquet file) keeps them."""
    checks = [(F.col(n).isNull(), F.lit(f"missing required field '{n}'")) for n in required]
    raw = F.to_json(F.struct(*[F.col(f.name) for f in schema.fields]))
    reason = _first_reason(checks)
    if REASON in typed.columns:
        raw, reason = F.coalesce(F.col(RAW), raw), F.coalesce(F.col(REASON), reason)
    return typed.select(
        *[F.col(f.name) for f in schema.fields],
        raw.alias(RAW),
        F.col(SOURCE),
        reason.alias(REASON),
    )
