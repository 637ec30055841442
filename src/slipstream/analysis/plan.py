"""The shape of an output's query, read from the plan Spark analyzed: what `check` explains
and what the rules in `slipstream.analysis.validate` reason about.

`Plan` is pure data, so the rules are tested without Spark; `plan_of(frame)` reads it from a
DataFrame (classic PySpark through the JVM, Spark Connect from the server's explain text)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from slipstream.analysis.joins import JoinBuffer, join_buffers
from slipstream.core.specs import format_duration, parse_duration
from slipstream.jvm import TIMER_DEDUP_CLASS

WindowKind = Literal["none", "tumbling", "sliding", "session"]
StreamOp = Literal["limit", "distinct", "sort"]


@dataclass(frozen=True)
class Plan:
    steps: tuple[str, ...]  # human-readable operations, in order
    aggregation: bool = False
    window: WindowKind = "none"
    window_column: str | None = None
    window_length: timedelta | None = None
    window_slide: timedelta | None = None
    watermark_column: str | None = None
    watermark_delay: timedelta | None = None
    watermark_before_aggregation: bool = True
    dedup: bool = False
    # dropDuplicatesWithinWatermark (Spark's real-time mode refuses its operator)
    dedup_within_watermark: bool = False
    # a Python function on the rows (mapInArrow, mapInPandas): real-time mode refuses it
    python_map: bool = False
    stream_static_join: bool = False
    stream_stream_join: bool = False
    # limit / distinct / sort applied to the stream (sort after an aggregation is allowed in
    # complete mode only; the others are never supported on streams)
    stream_ops: tuple[StreamOp, ...] = ()
    ops_after_aggregation: bool = False
    # records parsed from raw input with a quarantine (set by the runner): the parse runs behind
    # a generator barrier and the run observes metrics, operators only micro-batches support
    quarantine: bool = False
    # flatMapGroupsWithState / applyInPandasWithState / transformWithState
    arbitrary_state: bool = False
    # slipstream's deduplication by timers (`--dedup timers`): a transformWithState, so
    # `arbitrary_state` and `dedup` too; its expired timers emit nothing, so it needs no batch
    # of no data
    dedup_timers: bool = False
    # a transformWithState in ProcessingTime mode: it asks for a batch on every trigger (its
    # timers run on the clock), so the query is never idle and an available-now run never ends
    processing_timers: bool = False
    # a stream-stream join: its kind (Inner, LeftOuter, ...) and whether its condition relates
    # event-time columns of both sides under watermarks, which bounds its state
    stream_join_kind: str | None = None
    stream_join_bounded: bool = False
    # how long each side of a stream-stream join holds a row (left side first): analysis/joins.py
    join_buffers: tuple[JoinBuffer, ...] = ()

    @property
    def stateful(self) -> bool:
        return self.aggregation or self.dedup or self.stream_stream_join or self.arbitrary_state

    def describe(self, mode: str | None = None) -> list[str]:
        """What `check` prints of this shape, one fact a line; with the output `mode`, what
        it means for when rows are written and how long state is kept."""

        def dur(value: timedelta | None) -> str:
            return format_duration(value) if value else "?"

        lines = ["operators   " + (", ".join(self.steps) or "projections and filters only")]
        if self.window != "none":
            every = f" every {dur(self.window_slide)}" if self.window_slide else ""
            length = dur(self.window_length)
            lines.append(f"window      {self.window} {length}{every} on {self.window_column}")
        if self.watermark_column:
            lines.append(f"watermark   {self.watermark_column} - {dur(self.watermark_delay)}")
        joins = []
        if self.stream_static_join:
            joins.append("stream-static")
        if self.stream_stream_join:
            bound = "bounded by watermarks" if self.stream_join_bounded else "unbounded state"
            joins.append(f"stream-stream {self.stream_join_kind} ({bound})")
        if joins:
            lines.append("join        " + ", ".join(joins))
        for buffer in self.join_buffers:
            lines += buffer.describe()
        if self.arbitrary_state and not self.dedup_timers:  # timers: the dedup note says it
            lines.append(
                "state       per-key state of a stateful processor: it emits its own rows, and "
                "its state lasts until the processor clears it (its timers)"
            )
        lines.append(f"stateful    {'yes' if self.stateful else 'no'}")
        return lines + self.consequences(mode)

    def consequences(self, mode: str | None) -> list[str]:
        """When a windowed aggregation's rows are written under `mode`, and what complete mode
        costs: what seed 000 and 004 teach about output modes, for this query."""

        if not self.aggregation or mode is None:
            return []
        windowed = self.window != "none" and self.watermark_delay is not None
        if mode == "complete":
            what = "window" if self.window != "none" else "group"
            return [
                f"warning     complete mode rewrites every {what} each batch and keeps all of "
                "them in state, watermark or not: state grows with every new "
                f"{what} (use update, or append for final rows only)"
            ]
        if not windowed:
            return []
        delay = format_duration(self.watermark_delay)  # type: ignore[arg-type]
        behind = ""
        if self.window_length is not None:
            behind = (
                f"; the newest written window ends about "
                f"{format_duration(self.window_length + self.watermark_delay)} of event time "  # type: ignore[operator]
                "behind the newest input"
            )
        if mode == "append":
            return [
                f"final       a window is written once, when final: when the newest "
                f"{self.window_column} seen passes its end + {delay}{behind}"
            ]
        return [
            f"state       a window is updated while open and dropped from state once the "
            f"newest {self.window_column} seen passes its end + {delay}"
        ]

    @property
    def map_like(self) -> bool:
        """Only projections and selections: what the continuous and real-time triggers allow."""
        return not (self.stateful or self.stream_static_join or self.stream_ops)


# ---------------------------------------------------------------------------------------------
# Reading the shape from the query itself (issue 10: no plan declared by hand).
#
# The source is the analyzed logical plan as text: classic PySpark gets it through the JVM,
# Spark Connect from the server (`explain` output), and both print the same tree. In that text
# Spark marks every streaming node with `~`; a stateful streaming operator is a `~` node.

_ANALYZED = "== Analyzed Logical Plan =="
_ATTR_IN_WINDOW = re.compile(r"precisetimestampconversion\((?P<col>[A-Za-z_][\w]*)#\d+")
_SLIDE = re.compile(r"% (?P<micros>\d+)\) < cast\(0 as bigint\)")
_LENGTH = re.compile(r"\) \+ (?P<micros>\d+)\), LongType, TimestampType\)")
_WATERMARKED = re.compile(r"\b(\w+#\d+)-T\d+ms")  # an attribute that carries a watermark
_SESSION_GAP = re.compile(r"cast\((?P<gap>[^()]+?) as interval\)")


def timer_dedup_node(node: PlanNode) -> bool:
    """Whether a plan node is slipstream's deduplication by timers (slipstream/jvm/dedup.py)."""
    return node.name == "TransformWithState" and f"{TIMER_DEDUP_CLASS}@" in node.text


STATE_OPS = (
    "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState",
    "TransformWithState",
    "TransformWithStateInPySpark",
)

PYTHON_MAPS = ("MapInArrow", "MapInPandas", "PythonMapInArrow")


@dataclass(frozen=True)
class PlanNode:
    depth: int
    streaming: bool
    name: str
    text: str  # the node's line, without the tree drawing


def analyzed_text(frame: Any) -> str:
    """The analyzed logical plan of a DataFrame as text, in classic PySpark and under Spark
    Connect (no physical planning, which a streaming plan does not need here)."""
    explain = getattr(frame, "_explain_string", None)
    if explain is not None:  # Spark Connect: the server explains the plan it analyzed
        return analyzed_section(str(explain(mode="extended")))
    return str(frame._jdf.queryExecution().analyzed().toString())


def plan_of(frame: Any) -> Plan:
    """The shape of the query a DataFrame will run, read from Spark's analyzed plan."""
    return read_plan(analyzed_text(frame))


def analyzed_section(text: str) -> str:
    """The analyzed logical plan's tree from an extended explain text (or the text itself)."""
    if _ANALYZED not in text:
        return text
    body = text.split(_ANALYZED, 1)[1]
    lines = body.lstrip("\n").splitlines()[1:]  # the first line is the output schema
    tree = []
    for line in lines:
        if line.startswith("== "):
            break
        tree.append(line)
    return "\n".join(tree)


def plan_nodes(tree: str) -> list[PlanNode]:
    nodes = []
    for line in tree.splitlines():
        if not line.strip():
            continue
        start = len(line) - len(line.lstrip(" :|+-"))
        body = line[start:]
        marked = body.startswith("~")
        body = body.lstrip("~")
        name = re.match(r"[A-Za-z]+", body)
        if name is None:
            continue
        # the file source's relation (`StreamingRelation`) is printed without the mark
        streaming = marked or name.group(0).startswith("Streaming")
        nodes.append(PlanNode(start, streaming, name.group(0), body))
    return nodes


def _micros(text: str | None) -> timedelta | None:
    return None if text is None else timedelta(microseconds=int(text))


def read_plan(text: str) -> Plan:
    """The shape of a streaming query from its analyzed plan (an explain text or the tree).

    Only streaming nodes (`~`) count: the static side of a stream-static join may aggregate or
    sort as it likes. Windows are recognised by what Spark expands them to: a sliding window is
    an `Expand` of window structs, a tumbling one a `Project` of one, a session window a
    `session_window` struct."""
    nodes = plan_nodes(analyzed_section(text))
    streaming = [n for n in nodes if n.streaming]
    aggregates = [n for n in streaming if n.name == "Aggregate"]
    aggregation = bool(aggregates)  # arbitrary state emits its own rows: not an aggregation
    window: WindowKind = "none"
    window_column = None
    length = slide = None
    for node in streaming:
        if "session_window" in node.text and node.name == "Project":
            window = "session"
            gap = _SESSION_GAP.search(node.text)
            length = _duration_or_none(gap.group("gap")) if gap else None
        elif node.name == "Expand" and "named_struct(start" in node.text and window == "none":
            window = "sliding"
        elif node.name == "Project" and "AS window#" in node.text and window == "none":
            window = "tumbling"
        else:
            continue
        column = _ATTR_IN_WINDOW.search(node.text)
        window_column = column.group("col") if column else None
        if window != "session":
            slide_match, length_match = _SLIDE.search(node.text), _LENGTH.search(node.text)
            slide = _micros(slide_match.group("micros")) if slide_match else None
            length = _micros(length_match.group("micros")) if length_match else None
            if window == "tumbling":
                slide = None
    watermarks = [n for n in streaming if n.name == "EventTimeWatermark"]
    watermark_column = watermark_delay = None
    marks = [watermark(n) for n in watermarks]
    if marks:  # the one on the window's column, if any
        watermark_column, watermark_delay = next(
            (m for m in marks if m[0] == window_column), marks[-1]
        )
    first_aggregate = min((n.depth for n in aggregates), default=None)
    before = first_aggregate is None or any(n.depth > first_aggregate for n in watermarks)
    joins = [n for n in streaming if n.name == "Join"]
    stream_joins = [j for j in joins if both_sides_stream(nodes, j)]
    stream_stream = bool(stream_joins)
    join_kind = stream_joins[0].text.split()[1].rstrip(",") if stream_joins else None
    bounded = bool(stream_joins) and all(
        len(set(_WATERMARKED.findall(j.text))) >= 2 for j in stream_joins
    )
    buffers = _join_buffers(nodes, stream_joins[0]) if stream_joins else ()
    ops: list[StreamOp] = []
    if any(n.name in ("GlobalLimit", "LocalLimit", "Limit") for n in streaming):
        ops.append("limit")
    sorts = [n for n in streaming if n.name == "Sort"]
    if sorts:
        ops.append("sort")
    after = (
        bool(sorts)
        and first_aggregate is not None
        and min(n.depth for n in sorts) < first_aggregate
    )
    return Plan(
        steps=tuple(n.name for n in streaming if n.name not in _PLUMBING),
        aggregation=aggregation,
        window=window,
        window_column=window_column,
        window_length=length,
        window_slide=slide,
        watermark_column=watermark_column,
        watermark_delay=watermark_delay,
        watermark_before_aggregation=before,
        dedup=any(n.name.startswith("Deduplicate") or timer_dedup_node(n) for n in streaming),
        dedup_timers=any(timer_dedup_node(n) for n in streaming),
        dedup_within_watermark=any(n.name == "DeduplicateWithinWatermark" for n in streaming),
        python_map=any(n.name in PYTHON_MAPS for n in streaming),
        stream_static_join=bool(joins) and not stream_stream,
        stream_stream_join=stream_stream,
        stream_ops=tuple(ops),
        ops_after_aggregation=after,
        arbitrary_state=any(n.name in STATE_OPS for n in streaming),
        processing_timers=any(
            n.name.startswith("TransformWithState") and ", ProcessingTime," in n.text
            for n in streaming
        ),
        stream_join_kind=join_kind,
        stream_join_bounded=bounded,
        join_buffers=buffers,
    )


_PLUMBING = frozenset(
    {
        "Project",
        "Filter",
        "SubqueryAlias",
        "StreamingRelationV2",
        "StreamingRelation",
        "StreamingDataSourceV2Relation",
        "LogicalRDD",
        "ResolvedHint",
        "LocalRelation",
        "Generate",
        "Expand",
        "SerializeFromObject",
        "DeserializeToObject",
        "MapPartitions",
        "Union",
    }
)


def watermark(node: PlanNode) -> tuple[str, timedelta | None]:
    """`EventTimeWatermark <id>, ts#2: timestamp, 10 minutes` -> ("ts", 10 minutes)."""
    parts = node.text.split(", ")
    return parts[1].split("#", 1)[0].strip(), _duration_or_none(parts[-1])


def _children(nodes: list[PlanNode], join: PlanNode) -> list[list[PlanNode]]:
    """The subtrees under a node: each direct child (the next nodes one level deeper, before
    the tree returns to the node's depth) with its descendants."""
    index = nodes.index(join)
    subtrees: list[list[PlanNode]] = []
    for node in nodes[index + 1 :]:
        if node.depth <= join.depth:
            break
        if not subtrees or node.depth == subtrees[0][0].depth:
            subtrees.append([node])
        else:
            subtrees[-1].append(node)
    return subtrees


def both_sides_stream(nodes: list[PlanNode], join: PlanNode) -> bool:
    """Whether both children of a join are streaming."""
    children = _children(nodes, join)
    return len(children) >= 2 and all(c[0].streaming for c in children[:2])


def _join_buffers(nodes: list[PlanNode], join: PlanNode) -> tuple[JoinBuffer, ...]:
    children = _children(nodes, join)
    if len(children) < 2:
        return ()
    left = {watermark(n)[0] for n in children[0] if n.name == "EventTimeWatermark"}
    return join_buffers(join.text, left)


def _duration_or_none(text: str) -> timedelta | None:

    try:
        return parse_duration(text.strip())
    except (ValueError, TypeError):
        return None
