"""Which rows of an output's query Spark drops as late, and by which rule: read from the plan
Spark analyzed, per stream input (the input's own read writes them, runtime/late_rows.py; the
dead-letter gathers them, runtime/deadletter.py).

Spark judges lateness inside the first stateful operator a row meets, against that operator's
input watermark of the *previous* batch (`WatermarkPropagator.getInputWatermarkForLateEvents`:
the global watermark of batch N-1, `offsets/N-1` `batchWatermarkMs`; 0 for batch 0), and drops
the row when its time is at or before it (`WatermarkSupport.watermarkExpression`):

- a deduplication (`dropDuplicatesWithinWatermark`, `dropDuplicates` whose key holds the
  event-time column, or slipstream's by timers: a transformWithState in event time, which
  drops late rows before its processor with the same watermark) and a stream-stream join: the
  row's event time <= watermark;
- a windowed aggregation in append or update mode: the partial aggregate of a window whose
  *end* <= watermark (`StateStoreSaveExec`); with tumbling windows each row is in one window,
  so a row is late exactly when its window's end <= watermark. Complete mode drops nothing.

What is not covered is named (`LatePlan.uncovered`): inputs without slipstream's parse and
event time, sliding and session windows as the first stateful operator, arbitrary state
(flatMapGroupsWithState, transformWithState: but slipstream's deduplication by timers), an
event-time column renamed before it."""

from __future__ import annotations

import re
from pathlib import Path

from slipstream.analysis.late import LatePlan, LateRule
from slipstream.analysis.plan import (
    STATE_OPS,
    Plan,
    PlanNode,
    both_sides_stream,
    plan_nodes,
    timer_dedup_node,
    watermark,
)
from slipstream.runtime.bound import BoundInput, BoundOutput, Prepared
from slipstream.runtime.ingest_stage import bronze_dir
from slipstream.runtime.late_rows import FUNCTION
from slipstream.runtime.shared_stage import shared_folders

DEDUPLICATIONS = ("Deduplicate", "DeduplicateWithinWatermark")
_FILE_SOURCE = re.compile(r"FileSource\[(?P<path>[^\]]*)\]")
_LATE_CALL = re.compile(rf"\b{FUNCTION}\((?P<name>[^,()]+),")


def _ancestors(nodes: list[PlanNode], index: int) -> list[PlanNode]:
    """The nodes above `nodes[index]`, nearest first (a parent is the last node before it
    that is less deep)."""
    chain, depth = [], nodes[index].depth
    for node in reversed(nodes[:index]):
        if node.depth < depth:
            chain.append(node)
            depth = node.depth
    return chain


def _input_of(prepared: Prepared, nodes: list[PlanNode], index: int) -> BoundInput | None:
    """The input a stream relation reads: named by the late-row function above it (every input
    with an event time, runtime/late_rows.py), else by its folder or its topic."""
    for node in _ancestors(nodes, index):
        called = _LATE_CALL.search(node.text)
        if called is not None and called["name"] in prepared.inputs:
            return prepared.inputs[called["name"]]
    relation = nodes[index]
    found = _FILE_SOURCE.search(relation.text)
    if found is None:
        return _kafka_input_of(prepared, relation)
    path = Path(found.group("path")).resolve()
    for bound in prepared.inputs.values():
        given = bound.binding.path
        if bound.staged:  # its outputs read the ingest stage's bronze
            given = bronze_dir(prepared.settings, bound)
        if bound.source is not None and given is not None and Path(given).resolve() == path:
            return bound
    return None


def _kafka_input_of(prepared: Prepared, relation: PlanNode) -> BoundInput | None:
    """The Kafka input a `StreamingRelationV2 ... kafka, ... [subscribe=TOPIC, ...]` reads
    (or `subscribe=a,b`, `subscribePattern=RE`, `assign=JSON`: the input's own option)."""
    if "KafkaSourceProvider" not in relation.text:
        return None
    for bound in prepared.inputs.values():
        if bound.source is not None:
            topic = bound.source.topic(bound.binding, bound.source_options)
            if topic is None:
                continue
            key = topic.subscription
            option = f"{key}={topic.spark_options()[key]}"
            # Spark prints the options as `[k=v, k=v]`: a value ends at ", " or "]"
            if re.search(rf"[\[ ]{re.escape(option)}(, |\])", relation.text):
                return bound
    return None


def late_plan(prepared: Prepared, output: BoundOutput, tree: str, plan: Plan) -> LatePlan:
    """The late rules of `output`'s query from its analyzed plan `tree` (plan.analyzed_text)."""
    nodes = plan_nodes(tree)
    rules: list[LateRule] = []
    uncovered: list[str] = []
    shared = shared_folders(prepared)
    for index, node in enumerate(nodes):
        if not node.name.startswith("StreamingRelation"):
            continue
        found = _FILE_SOURCE.search(node.text)
        if found is not None and str(Path(found.group("path")).resolve()) in shared:
            continue  # a shared query's rows: it judged them, and none is late here
        bound = _input_of(prepared, nodes, index)
        if bound is None:
            uncovered.append("an input without slipstream's parse and event time is not covered")
            continue
        rule, why = _rule(nodes, index, bound, output, plan)
        if rule is not None:
            rules.append(rule)
        elif why:
            uncovered.append(f"{bound.name}: {why}")
    return LatePlan(tuple(rules), tuple(dict.fromkeys(uncovered)))


def _rule(
    nodes: list[PlanNode], index: int, bound: BoundInput, output: BoundOutput, plan: Plan
) -> tuple[LateRule | None, str]:
    """One input's rule, or None and why not ("" when Spark drops nothing of it as late)."""
    chain = _ancestors(nodes, index)
    column = None
    for node in chain:
        if node.name == "EventTimeWatermark":
            column = watermark(node)[0]
            continue
        if node.name == "Join" and not both_sides_stream(nodes, node):
            continue  # a stream-static join keeps no state
        if not timer_dedup_node(node) and node.name not in DEDUPLICATIONS + ("Aggregate", "Join"):
            if node.name in STATE_OPS:
                return None, "arbitrary state (its late rule is the processor's) is not covered"
            continue
        if column is None:
            return None, ""  # no watermark below its first stateful operator: nothing is late
        if bound.guard is None or column != bound.guard.column:
            return None, f"the watermark is on {column}, not the input's event-time column"
        if node.name == "Deduplicate" and f"{column}#" not in node.text.split("]")[0]:
            return None, ""  # a key without the event time: nothing dropped as late
        if node.name == "Aggregate":
            return _aggregate_rule(bound.name, column, output, plan)
        kind = "stream-stream join" if node.name == "Join" else "deduplication"
        return LateRule(bound.name, column, kind), ""
    return None, ""


def _aggregate_rule(
    name: str, column: str, output: BoundOutput, plan: Plan
) -> tuple[LateRule | None, str]:
    if output.ctx.mode == "complete":
        return None, ""  # complete mode keeps every group: nothing is dropped as late
    if plan.window == "tumbling" and plan.window_column == column and plan.window_length:
        return LateRule(name, column, "tumbling-window aggregation", plan.window_length), ""
    if plan.window in ("sliding", "session"):
        return None, (
            f"a {plan.window} window aggregation first: a row's windows are late one by one, "
            "not covered (deduplicate first, as trending and sensors do)"
        )
    return None, "an aggregation not keyed by a tumbling window of the event time"
