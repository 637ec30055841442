"""What Spark's real-time mode (`--trigger real-time:5s`) runs, read from an output's plan.

Measured on Spark 4.3.0 with the 4.2.0 Kafka connector (local[2], a KRaft broker), each case
below a query started with `trigger(realTime="5 seconds")`:

runs      Kafka -> projections and filters; `explode` and `inline` (generators); `observe`;
          `groupBy().count()` with and without event-time windows (tumbling and sliding) and a
          watermark; `dropDuplicates` with a watermark; a stream-static broadcast join; into
          `foreach` (a ForeachWriter), Kafka and console sinks, update mode.
refused   append and complete modes (STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED, at
          start), so stream-stream joins (append only) too; memory and noop sinks
          (STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST, at start);
          `dropDuplicatesWithinWatermark` (StreamingDeduplicateWithinWatermarkExec) and Python
          UDFs (ArrowEvalPythonExec) with the same code, when the first epoch runs; session
          windows (update mode: STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION); `foreachBatch`.

The built-in pipelines that deduplicate (trending, sensors) do it with `dropDuplicates` and the
event-time column among the keys under a real-time trigger (`--dedup auto`; api/frames.py's
`dedup_difference` says where the two forms differ).

slipstream's database sinks are micro-batch sinks (`foreachBatch` and a batch ledger); in
real-time mode they write through a ForeachWriter that upserts each row on the output's key
(sinks/jvm_rows.py, JDBC in the JVM; sinks/rows.py under Spark Connect), so they take part.
Each blocker comes back as one line that names it."""

from __future__ import annotations

from collections.abc import Iterable

from slipstream.analysis.plan import Plan
from slipstream.core.specs import OutputMode
from slipstream.sinks import registry as sink_registry
from slipstream.sources import registry as source_registry

ALLOWLIST = "STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST"


def kinds_of(source: str | Iterable[str]) -> tuple[str, ...]:
    """The source kinds an output reads (one kind, or those of its inputs), each once."""
    return (source,) if isinstance(source, str) else tuple(dict.fromkeys(source))


def blockers(plan: Plan, mode: OutputMode, sink: str, source: str | Iterable[str]) -> list[str]:
    """Why Spark's real-time mode cannot run this output (into a `sink` of that kind, reading
    inputs of the `source` kinds); empty when it can. Which sources and sinks real-time mode
    takes is asked of their classes (`real_time`): Spark's allow-list (console, foreach,
    kafka) and the database sinks, which write through a ForeachWriter in this mode."""
    found = []
    for kind in kinds_of(source):
        if not source_registry.source_class(kind).real_time:
            found.append(f"source {kind}: real-time mode reads Kafka only")
    if not sink_registry.sink_class(sink).real_time:
        allowed = ", ".join(sorted(sink_registry.kinds_that("real_time")))
        found.append(f"sink {sink}: real-time mode writes to {allowed} only (Spark: {ALLOWLIST})")
    if mode != "update":
        found.append(
            f"--mode {mode}: real-time mode runs update mode only "
            "(Spark: STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED)"
        )
    if plan.dedup_within_watermark:
        found.append(
            "operator dropDuplicatesWithinWatermark (StreamingDeduplicateWithinWatermarkExec "
            f"is not in Spark's real-time allow-list: {ALLOWLIST})"
        )
    if plan.stream_stream_join:
        found.append("operator stream-stream join (it emits in append mode only)")
    if plan.dedup_timers:
        found.append(
            "--dedup timers (a transformWithState, not in Spark's real-time allow-list): "
            "--dedup auto or event-time is the form real-time mode runs"
        )
    elif plan.arbitrary_state:
        found.append(
            "operator transformWithState / flatMapGroupsWithState (not in Spark's real-time "
            "allow-list)"
        )
    if plan.window == "session":
        found.append("operator session window (no update mode)")
    if plan.python_map:
        found.append(f"operator mapInArrow / mapInPandas (a Python worker: {ALLOWLIST})")
    for op in plan.stream_ops:
        found.append(f"operator {op} on a stream")
    return found


def slots_needed(plan: Plan, source_partitions: int, shuffle_partitions: int) -> int:
    """Task slots one real-time query holds for its whole run: Spark schedules the stages of
    an epoch together, a task per source partition and one per shuffle partition of each
    stage after a shuffle: an aggregation's, and a deduplication's (on other keys than the
    aggregation's, so a query with both shuffles twice: sensors' stats under one shuffle
    partition were refused by Spark for 3 slots); a broadcast join does not shuffle."""
    shuffles = int(plan.aggregation) + int(plan.dedup)
    return source_partitions + shuffle_partitions * shuffles


def slot_blocker(needs: dict[str, int], micro_batch_queries: int, cores: int) -> str | None:
    """Why the real-time queries of a run cannot all hold their slots at once (Spark fails
    such a query with CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT once it starts), or None. A
    micro-batch query beside them (a quarantine) needs a slot of its own to ever run."""
    total = sum(needs.values()) + (1 if micro_batch_queries else 0)
    if total <= cores:
        return None
    each = ", ".join(f"{name} {n}" for name, n in needs.items())
    beside = f" + 1 for the {micro_batch_queries} micro-batch quer" + (
        "y" if micro_batch_queries == 1 else "ies"
    )
    return (
        f"the real-time queries hold {total} task slots at once ({each}"
        f"{beside if micro_batch_queries else ''}) and Spark has {cores}"
    )


def describe(plan: Plan, mode: OutputMode, sink: str, source: str | Iterable[str]) -> str:
    """What `check` says of one output under `--trigger real-time:...`."""
    found = blockers(plan, mode, sink, source)
    if found:
        return "no: " + "; ".join(found)
    return f"yes: {sink_registry.sink_class(sink).real_time_how()}"
