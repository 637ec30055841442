"""Rules checked before any query starts: the combinations the seeds and Spark forbid.

Each rule has a stable code (slipstream.errors.CODES). `violations` returns every broken rule of
one output, on the plan read from its query, so `slipstream check` can list them and `slipstream
run` refuses before any query starts; `settings_violations` are the rules that need no plan,
checked before Spark starts."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from slipstream.analysis import realtime
from slipstream.analysis.plan import Plan
from slipstream.core import spark_line
from slipstream.core.specs import OutputMode, SinkSpec, TriggerSpec
from slipstream.errors import ValidationError
from slipstream.sinks import registry as sink_registry
from slipstream.sources import registry as source_registry


@dataclass(frozen=True)
class Judged:
    """What the rules judge: one output's plan, read from its query, and how it is to run."""

    plan: Plan
    mode: OutputMode
    sink: SinkSpec
    trigger: TriggerSpec
    source: str | Iterable[str]


Rule = Callable[[Judged], list[ValidationError]]


def violations(
    plan: Plan,
    mode: OutputMode,
    sink: SinkSpec,
    trigger: TriggerSpec,
    source: str | Iterable[str],
    offered_modes: Iterable[OutputMode] | None = None,
) -> list[ValidationError]:
    """Every rule `RULES` holds that this output breaks, in order; when none, whether the
    pipeline offers the mode."""
    q = Judged(plan, mode, sink, trigger, source)
    found = [broken for rule in RULES for broken in rule(q)]
    return found or _offered(mode, offered_modes, trigger.kind)


def _complete_mode(q: Judged) -> list[ValidationError]:
    if q.mode == "complete" and not q.plan.aggregation:
        return [
            ValidationError(
                "COMPLETE_NEEDS_AGGREGATION",
                "complete mode rewrites the whole result table, which needs a streaming "
                "aggregation; this query has none",
                "use --mode append (or update) for a query without aggregation",
            )
        ]
    return []


def _append_aggregation(q: Judged) -> list[ValidationError]:
    plan = q.plan
    if not plan.aggregation or q.mode != "append":
        return []
    if plan.window == "none" or plan.watermark_column is None:
        message, fix = (
            "append mode on an aggregation needs an event-time window with a watermark: "
            "without one, no row is ever final",
            "use --mode update or complete, or aggregate over an event-time window with "
            "withWatermark on the same column",
        )
    elif plan.watermark_column != plan.window_column:
        message, fix = (
            f"the watermark is on {plan.watermark_column!r} but the window is on "
            f"{plan.window_column!r}",
            "put withWatermark on the window's event-time column",
        )
    elif not plan.watermark_before_aggregation:
        message, fix = (
            "the watermark is declared after the groupBy, so Spark ignores it",
            "call withWatermark before groupBy",
        )
    else:
        return []
    return [ValidationError("APPEND_NEEDS_WATERMARK", message, fix)]


def _session_window(q: Judged) -> list[ValidationError]:
    if q.plan.window == "session" and q.mode == "update":
        return [
            ValidationError(
                "SESSION_WINDOW_NO_UPDATE",
                "session windows do not support update mode",
                "use --mode append (sessions emitted when they close) or complete",
            )
        ]
    return []


def _stream_join(q: Judged) -> list[ValidationError]:
    plan = q.plan
    if not plan.stream_stream_join:
        return []
    found = []
    if q.mode != "append":
        found.append(
            ValidationError(
                "STREAM_JOIN_APPEND_ONLY",
                "a join of two streams emits each match once, in append mode only; "
                f"got --mode {q.mode}",
                "use --mode append, and aggregate the joined rows in a query of their own",
            )
        )
    outer = plan.stream_join_kind not in (None, "Inner")
    if outer and not plan.stream_join_bounded:
        found.append(
            ValidationError(
                "STREAM_JOIN_NEEDS_WATERMARK",
                f"a {plan.stream_join_kind} join of two streams must know when a row can no "
                "longer match: both sides need a watermark and the condition must relate their "
                "event times",
                "withWatermark on both streams, and a time range in the join condition such as "
                "click_time BETWEEN impression_time AND impression_time + INTERVAL 1 HOUR",
            )
        )
    return found


#: how to do without an operation Spark refuses on a stream without an aggregation
_INSTEAD = {
    "limit": "apply the limit when reading the sink's table",
    "distinct": "use dropDuplicates with a watermark (bounded state)",
    "sort": "sort when reading the sink's table",
}


def _stream_operations(q: Judged) -> list[ValidationError]:
    plan = q.plan
    after_aggregation = plan.aggregation and plan.ops_after_aggregation
    found = []
    for op in plan.stream_ops:
        if op == "sort" and after_aggregation:
            if q.mode != "complete":
                found.append(
                    ValidationError(
                        "SORT_NEEDS_COMPLETE",
                        "sorting an aggregated stream is supported in complete mode only; got "
                        f"--mode {q.mode}",
                        "use --mode complete, or sort when reading the sink",
                    )
                )
        elif not after_aggregation:
            found.append(
                ValidationError(
                    "UNSUPPORTED_STREAM_OPERATION",
                    f"{op} is not supported on a streaming DataFrame without an aggregation",
                    _INSTEAD[op],
                )
            )
    return found


def _processing_timers(q: Judged) -> list[ValidationError]:
    if q.plan.processing_timers and q.trigger.kind == "available-now":
        return [
            ValidationError(
                "PROCESSING_TIMERS_UNBOUNDED",
                "a stateful processor with processing-time timers asks Spark for a batch on "
                "every trigger, so a --trigger available-now run would never end",
                "use --trigger once (one batch), or a micro-batch trigger stopped by --duration "
                "or Ctrl-C, or event-time timers (activity: --timeout event)",
            )
        ]
    return []


def _real_time(q: Judged) -> list[ValidationError]:
    if q.trigger.kind != "real-time":
        return []
    reasons = realtime.blockers(q.plan, q.mode, q.sink.kind, q.source)
    if not reasons:
        return []
    return [
        ValidationError(
            "REAL_TIME_NOT_ELIGIBLE",
            "Spark's real-time mode cannot run this output: " + "; ".join(reasons),
            "use a micro-batch trigger (default or an interval such as 1s) for it",
        )
    ]


def _real_time_state(q: Judged) -> list[ValidationError]:
    """Real-time mode's stateful operators arrive in Spark 4.3 (core/spark_line.py): on an
    older line an output that aggregates or deduplicates is refused, not failed at start."""
    if q.trigger.kind != "real-time" or not (q.plan.aggregation or q.plan.dedup):
        return []
    if spark_line.real_time_state():
        return []
    needed = spark_line.named(spark_line.REAL_TIME_STATE_LINE)
    operators = " and ".join(
        name for name, used in (("an aggregation", q.plan.aggregation), ("dropDuplicates",
        q.plan.dedup)) if used
    )  # fmt: skip
    return [
        ValidationError(
            "REAL_TIME_STATE_UNSUPPORTED",
            f"this real-time output runs {operators}, stateful operators that Spark's real-time "
            f"mode runs from Spark {needed} on; the installed pyspark is "
            f"{spark_line.version()}",
            f"install Spark {needed} (pip install 'pyspark>={needed},<4.4', or slipstream without "
            "the delta extra), or run this output with a micro-batch trigger (an interval such "
            "as 1s)",
        )
    ]


def _continuous(q: Judged) -> list[ValidationError]:
    if q.trigger.kind != "continuous":
        return []
    reasons = []
    if not q.plan.map_like:
        reasons.append("the query is stateful or joins (only map-like queries are allowed)")
    if q.plan.quarantine:
        reasons.append(
            "records are parsed into a quarantine (a parse barrier and observed metrics: "
            "Spark runs only projections and filters this way)"
        )
    sources = source_registry.kinds_that("continuous")
    for kind in realtime.kinds_of(q.source):
        if not source_registry.source_class(kind).continuous:
            reasons.append(f"source {kind} (allowed: {', '.join(sorted(sources))})")
    if not sink_registry.sink_class(q.sink.kind).continuous:
        sinks = sink_registry.kinds_that("continuous")
        reasons.append(f"sink {q.sink.kind} (allowed: {', '.join(sorted(sinks))})")
    if not reasons:
        return []
    return [
        ValidationError(
            "CONTINUOUS_NOT_ELIGIBLE",
            f"the {q.trigger.kind} trigger cannot run this query: " + "; ".join(reasons),
            "use a micro-batch trigger (default or an interval such as 1s)",
        )
    ]


#: the rules `violations` asks, in the order their refusals are listed
RULES: tuple[Rule, ...] = (
    lambda q: _file_sink(q.mode, q.sink),
    _complete_mode,
    _append_aggregation,
    _session_window,
    _stream_join,
    _stream_operations,
    _processing_timers,
    _real_time,
    _real_time_state,
    _continuous,
)


def settings_violations(
    mode: OutputMode,
    sink: SinkSpec,
    offered_modes: Iterable[OutputMode] | None = None,
    trigger: str = "",
) -> list[ValidationError]:
    """The rules that need no query plan: checked before Spark starts (`trigger`: its kind)."""
    return _file_sink(mode, sink) or _offered(mode, offered_modes, trigger)


def _file_sink(mode: OutputMode, sink: SinkSpec) -> list[ValidationError]:
    if sink.is_file_sink and mode != "append":
        return [
            ValidationError(
                "FILE_SINK_APPEND_ONLY",
                f"the {sink.kind} file sink takes append mode only; got --mode {mode}",
                "use --mode append (finalised rows only), or a database sink such as "
                "sqlite: for update/complete",
            )
        ]
    return []


def _offered(
    mode: OutputMode, offered_modes: Iterable[OutputMode] | None, trigger: str = ""
) -> list[ValidationError]:
    offered = tuple(offered_modes or ())
    if offered and mode not in offered:
        if trigger == "real-time" and "update" not in offered:
            return [
                ValidationError(
                    "MODE_NOT_SUPPORTED",
                    f"this output offers modes {', '.join(offered)}; got --mode {mode}, and "
                    "Spark's real-time mode runs update mode only, so it cannot run in real time",
                    "use a micro-batch trigger (default or an interval such as 1s) and --mode "
                    f"{offered[0]}; `slipstream check` without --mode names the operator",
                )
            ]
        return [
            ValidationError(
                "MODE_NOT_SUPPORTED",
                f"this output offers modes {', '.join(offered)}; got --mode {mode}",
                f"use --mode {offered[0]}",
            )
        ]
    return []


def key_violations(
    mode: OutputMode, sink: SinkSpec, key: tuple[str, ...], nullable: dict[str, bool]
) -> list[ValidationError]:
    """Update and complete modes upsert into a database on the output's key: without a key
    every batch inserts its rows again, and a key column that may be NULL never conflicts (a
    new row each batch). `nullable` is each column of the output's analyzed schema."""
    if not sink_registry.sink_class(sink.kind).database or mode == "append":
        return []
    if not key:
        return [
            ValidationError(
                "SINK_NEEDS_KEY",
                f"{mode} mode into {sink.kind} upserts on the output's key, and this output "
                "declares none: every batch would insert its rows again",
                "declare the key in the pipeline (Output(key=(...))) or use --mode append",
            )
        ]
    missing = [k for k in key if k not in nullable]
    if missing:
        return [
            ValidationError(
                "SINK_NEEDS_KEY",
                f"key column(s) {', '.join(missing)} are not columns of the output "
                f"({', '.join(nullable)})",
                "declare the key as columns the pipeline's frame has",
            )
        ]
    maybe_null = [k for k in key if nullable[k]]
    if not maybe_null:
        return []
    return [
        ValidationError(
            "SINK_KEY_NULLABLE",
            f"key column(s) {', '.join(maybe_null)} may be NULL in the output's schema, and a "
            f"NULL key never conflicts: {mode} mode would add a row each batch instead of "
            "updating one",
            "declare them never NULL in the pipeline: return not_null(frame, *KEY) "
            "(from slipstream.api import not_null; a NULL then fails its batch loudly), or use "
            "--mode append",
        )
    ]
