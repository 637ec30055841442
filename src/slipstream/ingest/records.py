"""The columns every parsed record carries beside its typed fields, and the barrier that keeps a
parse to one evaluation per record. Shared by the parsers (ingest/parse.py, ingest/jvm_parse.py)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

RAW = "_raw"  # the record as received
SOURCE = "_source"  # where it came from (a file, a topic's partition and offset, ...)
REASON = "_reason"  # why it was rejected; NULL when valid
META_COLUMNS = (RAW, SOURCE, REASON)
# A raw column of sources whose every row is one record (Kafka), beside `value`: why an empty
# one is rejected (NULL: it is not empty). A file's line has no such column: a blank line is
# not a record there, and is skipped (ingest/parse.py).
EMPTY = "_empty"
NULL_VALUE = "null value"  # a Kafka tombstone: a key and no value
EMPTY_VALUE = "empty value"
BLANK_VALUE = "blank value"  # nothing but JSON's white space
_JSON_SPACE = " \t\r\n"


def empty_reason(value: Column) -> Column:
    """The EMPTY column of a record source's `value`: its reason when the value is NULL, empty
    or blank, else NULL."""
    return (
        F.when(value.isNull(), F.lit(NULL_VALUE))
        .when(value == F.lit(""), F.lit(EMPTY_VALUE))
        .when(F.btrim(value, F.lit(_JSON_SPACE)) == F.lit(""), F.lit(BLANK_VALUE))
    )


def evaluated_once(parsed: DataFrame) -> DataFrame:
    """The same rows, behind an optimizer barrier, so that the parse is evaluated once per record.

    Without it Spark pushes every later filter on `_reason` (accepted, rejected, expectations)
    below the projection that parses, inlining the whole parse into the filter's condition once
    per reference: the JSON of each record was parsed many times over (measured: the mobile
    query with this parser at 0.09x the lines/s of Spark's JSON reader, 0.48x with the barrier;
    docs/benchmarks.md). A generator is such a barrier: filters on its output stay above it.
    `inline(array(struct(...)))` yields the one row it is given, computed once. Continuous
    processing refuses generators; validation says so before start."""
    return parsed.select(F.inline(F.array(F.struct(*[F.col(c) for c in parsed.columns]))))
