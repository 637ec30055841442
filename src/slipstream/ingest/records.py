"""The columns every parsed record carries beside its typed fields, and the barrier that keeps a
parse to one evaluation per record. Shared by the parsers (ingest/parse.py, ingest/jvm_parse.py)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

RAW = "_raw"  # the record as received
SOURCE = "_source"  # where it came from (a file, a topic's partition and offset, ...)
REASON = "_reason"  # why it was rejected; NULL when valid
META_COLUMNS = (RAW, SOURCE, REASON)


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
