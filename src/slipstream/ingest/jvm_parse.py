"""The strict JSON parser in the JVM: the same fates and reasons as the parser built from Spark
SQL expressions (`parse.parse_json_expressions`), plus `not JSON` for content after the root
value, at a fraction of its cost (docs/benchmarks.md, scenario 8).

The parser (java/src/slipstream/jvm/StrictJsonParser.java) reads each record's bytes once with
Jackson's streaming parser, reads the declared fields, and leaves every record it does not take
as plainly valid to a reference path built from Spark's own variant code (the functions the
expressions call), which words the reason. It is registered once per schema as a session
function returning a struct of the fields' values and `_reason` (NULL for a blank line).

It handles flat schemas of string, boolean, tinyint, smallint, int, bigint, float, double, date
and timestamp fields whose names are plain identifiers; any other schema, and a Spark Connect
session (no JVM on this side to register it in), use the expression parser."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from slipstream.errors import ConfigError
from slipstream.ingest.records import EMPTY, RAW, REASON, SOURCE, evaluated_once
from slipstream.jvm import ENTRY_CLASS, jar_path, missing_jar_error

#: the field types the JVM parser reads (exact classes: TimestampNTZType is not one of them)
SUPPORTED = (
    StringType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DateType,
    TimestampType,
)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARSED = "_parsed"
#: how each record is kept to one parse: "generator" (records.evaluated_once) or
#: "nondeterministic" (the function is registered so; Spark then neither pushes filters below it
#: nor duplicates it)
BARRIER = "nondeterministic"
#: the JVM parser's reason for a record that is not UTF-8 (its raw is then made valid here)
NOT_UTF8 = "not valid UTF-8 (bytes shown as U+FFFD in raw)"


def supports(schema: StructType) -> bool:
    """Whether the JVM parser reads this schema (else the expression parser does)."""
    return all(
        type(f.dataType) in SUPPORTED and _PLAIN_NAME.fullmatch(f.name) and f.name != REASON
        for f in schema.fields
    )


def available(spark: SparkSession) -> bool:
    """Whether `spark` is a classic session (a JVM here to register the function in) whose
    driver can load the parser. A JVM that spark-submit started before the session was built
    takes jars from `--jars` only: without it, the expression parser reads the records (the
    same fates, slower; content after the root value is not caught there)."""
    if getattr(spark, "_jvm", None) is None or not hasattr(spark, "_jsparkSession"):
        return False
    known = spark.__dict__.get("_slipstream_jvm_parser")
    if known is None:
        entry: Any = spark._jvm
        for part in ENTRY_CLASS.split("."):
            entry = getattr(entry, part)
        try:
            entry.version()
            known = True
        except Exception:  # noqa: BLE001 - py4j: the class is not on the driver's classpath
            known = False
        spark.__dict__["_slipstream_jvm_parser"] = known
    return bool(known)


def function_name(spark: SparkSession, schema: StructType, required: tuple[str, ...]) -> str:
    """The session function parsing records of `schema`, registered on first use."""
    tz = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    key = "|".join([schema.json(), ",".join(required), tz, BARRIER])
    name = "slipstream_strict_json_" + hashlib.sha1(key.encode()).hexdigest()[:16]
    registered = spark.__dict__.setdefault("_slipstream_strict_json", set())
    if name in registered:
        return name
    jvm: Any = spark._jvm
    entry = jvm
    for part in ENTRY_CLASS.split("."):
        entry = getattr(entry, part)
    try:
        entry.version()
    except Exception:  # noqa: BLE001 - py4j: the class is not on the driver's classpath
        raise not_on_classpath() from None
    gateway: Any = spark.sparkContext._gateway
    names = gateway.new_array(jvm.java.lang.String, len(schema.fields))
    types = gateway.new_array(jvm.java.lang.String, len(schema.fields))
    needed = gateway.new_array(jvm.boolean, len(schema.fields))
    for i, f in enumerate(schema.fields):
        names[i] = f.name
        types[i] = f.dataType.simpleString()
        needed[i] = f.name in required
    session = spark._jsparkSession
    entry.register(session, name, names, types, needed, tz, BARRIER == "nondeterministic")
    registered.add(name)
    return name


def not_on_classpath() -> Exception:
    """The session's JVM cannot load the parser: the jar is not built, or the session was not
    started by slipstream's builder (a JVM started by spark-submit takes jars from `--jars`)."""
    if not jar_path().is_file():
        return missing_jar_error()
    return ConfigError(
        "JVM_PARSER_MISSING",
        f"slipstream's JVM parser is not on this Spark session's classpath ({ENTRY_CLASS})",
        f"start the session with slipstream.settings.session.build_session, or give Spark the jar: "
        f"--jars {jar_path()} (spark-submit) or --conf spark.jars={jar_path()}",
    )


def parse_json(raw: DataFrame, schema: StructType, required: tuple[str, ...]) -> DataFrame:
    """JSON lines (`value`, `_source`) -> typed columns + _raw, _source, _reason, as
    `parse.parse_json_expressions` gives them."""
    name = function_name(raw.sparkSession, schema, required)
    # a record source's (Kafka's) NULL, empty or blank value: rejected with its reason (EMPTY)
    empty = F.col(EMPTY) if EMPTY in raw.columns else F.lit(None).cast("string")
    value = F.coalesce(F.col("value").cast("binary"), F.lit(b""))  # NULL: the parser's blank
    parsed = raw.select(
        F.col("value"),
        F.col(SOURCE),
        empty.alias(EMPTY),
        F.call_function(name, value).alias(_PARSED),
    )
    if BARRIER == "generator":
        parsed = evaluated_once(parsed)
    # a blank line is not a record
    parsed = parsed.filter(F.col(_PARSED).isNotNull() | F.col(EMPTY).isNotNull())
    reason = F.coalesce(F.col(EMPTY), F.col(f"{_PARSED}.{REASON}"))
    return parsed.select(
        *[_typed(f.name, f.dataType).alias(f.name) for f in schema.fields],
        F.when(reason == F.lit(NOT_UTF8), F.make_valid_utf8(F.col("value")))
        .otherwise(F.col("value"))
        .alias(RAW),
        F.col(SOURCE),
        reason.alias(REASON),
    )


def _typed(name: str, kind: object) -> Column:
    value = F.col(f"{_PARSED}.{name}")
    if isinstance(kind, TimestampType):
        return F.timestamp_micros(value)
    if isinstance(kind, DateType):
        return F.date_from_unix_date(value)
    return value
