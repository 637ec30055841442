"""The rows Spark drops as late, written by the query that reads them: the JVM function
`slipstream_late` (java/src/slipstream/jvm/LateRows.java) in the filter that keeps an input's
valid rows, below the query's first stateful operator, writes each row that operator will drop
to its task's file (`OUTPUT/_tasks/INPUT/batch-B.APP.part-P.json`, a dead-letter line), and
keeps it, so Spark drops and counts it as before. runtime/deadletter.py gathers a committed
batch's task files into `batch-N.jsonl` (or a Delta table). The records are read and parsed
once.

Which query writes which input's late rows, and by which rule: the session setting
`spark.sql.slipstream.late.INPUT` (JSON: the folder, the checkpoint whose offset log holds the
watermarks, the output, the event-time column, the tumbling window's length in microseconds or
0), set while that output's query starts (runtime/writers.py), which Spark carries to its
tasks. A query without it keeps every row and writes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from slipstream.analysis.late import LatePlan
from slipstream.ingest.parse import RAW, SOURCE
from slipstream.runtime.bound import BoundInput, BoundOutput
from slipstream.settings.config import Settings

#: the JVM function (java/src/slipstream/jvm/LateRows.java), registered with the quarantine's
FUNCTION = "slipstream_late"
#: its cheap half: whether a row is late (no raw record passed)
IS_LATE = "slipstream_is_late"
#: the session setting, per input, giving its late rule to the query that writes its late rows
SETTING = "spark.sql.slipstream.late."
#: the task files' folder in an output's dead-letter folder (Spark and Delta skip `_` names)
TASKS = "_tasks"


def late_tap(valid: DataFrame, bound: BoundInput) -> DataFrame:
    """`valid` rows of `bound` (still with their raw record and source) through the late-row
    function: every row kept; those a query's rule finds late written by its tasks."""
    if bound.guard is None:  # no event time: nothing is judged late
        return valid
    name, at = F.lit(bound.name), F.unix_micros(F.col(bound.guard.column))
    write = F.call_function(FUNCTION, name, at, F.col(RAW).cast("string"),
                            F.col(SOURCE).cast("string"))  # fmt: skip
    # only a late row has its raw record copied out of Spark's memory (a branch of a CASE is
    # evaluated only when taken)
    # the input's name as UTF-8 bytes: a string would be copied into a Java string each row
    late = F.call_function(IS_LATE, F.lit(bound.name.encode()), at)
    return valid.filter(F.when(late, write).otherwise(F.lit(True)))


def late_folder(settings: Settings, output: str) -> Path:
    """An output's dead-letter folder: `batch-N.jsonl` files, or a Delta table."""
    return settings.late_root / output


def late_settings(settings: Settings, output: BoundOutput, plan: LatePlan) -> dict[str, str]:
    """The session settings that make `output`'s query write the late rows of its rules (none
    with `--late-rows false`)."""
    if not settings.late_rows:
        return {}
    tasks = (late_folder(settings, output.name) / TASKS).resolve()
    found = {}
    for rule in plan.rules:
        window = 0 if rule.window is None else rule.window // timedelta(microseconds=1)
        spec = {
            "folder": str(tasks),
            "checkpoint": str(output.ctx.checkpoint),
            "output": output.name,
            "column": rule.column,
            "window": window,
        }
        found[SETTING + rule.input] = json.dumps(spec)
    return found
