"""The check step: every rule on every query's plan, before any query starts.

`check` applies the rules of analysis/ to each built query (its plan, mode, sink, trigger and
source); `restart_verdicts` holds each output's new build against the one its checkpoint
recorded (runtime/compat.py). `slipstream check` prints them; `start` refuses on them."""

from __future__ import annotations

from pyspark.sql import SparkSession

from slipstream.analysis.realtime import slot_blocker, slots_needed
from slipstream.analysis.validate import key_violations, violations
from slipstream.errors import ValidationError
from slipstream.runtime.bound import BoundOutput, Prepared, stream_inputs
from slipstream.runtime.build import Query
from slipstream.runtime.compat import Verdicts, judge_all
from slipstream.settings.connect import sink_violations


def check(prepared: Prepared, queries: list[Query]) -> list[ValidationError]:
    """Every rule on every output's plan; each message names the output."""
    s = prepared.settings
    problems = []
    for query in queries:
        out = query.output
        plan = prepared.plans[out.name]
        offered = out.spec.modes if out.spec is not None else None
        source = _source_of(prepared, out)
        found = violations(plan, out.ctx.mode, out.sink.spec, s.trigger, source, offered)
        if out.is_output:
            nullable = {f.name: f.nullable for f in query.frame.schema.fields}
            found += key_violations(out.ctx.mode, out.sink.spec, out.ctx.key, nullable)
        if s.remote is not None:
            found += sink_violations(out.sink.spec)
        for v in found:
            problems.append(
                ValidationError(v.code, f"output {out.ctx.query_name}: {v.message}", v.fix)
            )
    if s.trigger.kind == "real-time" and not problems:
        problems += real_time_slots(prepared, queries)
    return problems


def refuse_rules(prepared: Prepared, queries: list[Query]) -> None:
    """Raise the first rule that refuses a query."""
    refused = check(prepared, queries)
    if refused:
        raise refused[0]


def real_time_slots(prepared: Prepared, queries: list[Query]) -> list[ValidationError]:
    """REAL_TIME_NEEDS_SLOTS when the run's real-time queries cannot all run at once."""
    topics = [
        b.source.real_time_slots(b.binding, b.source_options)
        for b in prepared.inputs.values()
        if b.source is not None and b.source.real_time
    ]
    if not queries or not topics:
        return []
    spark = queries[0].frame.sparkSession
    try:
        cores = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: the cluster's size is not the client's to read
        return []
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    real_time = [q for q in queries if q.output.is_output]
    needs = {
        q.output.ctx.query_name: slots_needed(prepared.plans[q.output.name], sum(topics), shuffle)
        for q in real_time
    }
    blocker = slot_blocker(needs, len(queries) - len(real_time), cores)
    if blocker is None:
        return []
    return [
        ValidationError(
            "REAL_TIME_NEEDS_SLOTS",
            blocker,
            "give Spark more cores (--master local[N]), fewer shuffle partitions "
            "(--conf spark.sql.shuffle.partitions=1) or a topic with fewer partitions",
        )
    ]


def restart_verdicts(spark: SparkSession, prepared: Prepared, queries: list[Query]) -> Verdicts:
    """Each output's new build against the one its checkpoint recorded (runtime.compat)."""
    try:
        partitions: int | None = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    except (ValueError, TypeError):
        partitions = None
    return judge_all(prepared, {q.output.name: q.tree for q in queries}, partitions)


def _source_of(prepared: Prepared, output: BoundOutput) -> tuple[str, ...]:
    """The source kinds of the inputs `output` reads (runtime.bound.stream_inputs): the
    continuous and real-time rules judge every one of them."""
    return tuple(b.source.kind for b in stream_inputs(prepared, output) if b.source is not None)
