"""The stateful operators of an analyzed plan, as a checkpoint's recorded plan and a new build
are compared (runtime/compat.py): for each operator, the keys it holds state by and what it
keeps, in the order the data flows through them."""

from __future__ import annotations

import re
from typing import Any

from slipstream.analysis.plan import (
    STATE_OPS,
    analyzed_section,
    both_sides_stream,
    plan_nodes,
    timer_dedup_node,
)

# Attribute ids (`#12`), watermark marks (`-T600000ms`) and literal suffixes differ from run to
# run without the state changing, so they are left out.

_ATTR_ID = re.compile(r"#\d+L?|-T\d+ms")


def normalize(text: str) -> str:
    """An expression of the analyzed plan without what changes from run to run."""
    return _ATTR_ID.sub("", text).strip()


def _bracketed(text: str, start: int = 0) -> tuple[list[str], int]:
    """The comma-separated items of the first top-level `[...]` from `start`, and where it ends."""
    begin = text.find("[", start)
    if begin < 0:
        return [], start
    depth = 0
    item: list[str] = []
    items: list[str] = []
    for index in range(begin, len(text)):
        char = text[index]
        if char in "[(":
            depth += 1
            if depth == 1:
                continue
        elif char in "])":
            depth -= 1
            if depth == 0:
                items.append("".join(item))
                return [normalize(i) for i in items if i.strip()], index + 1
        elif char == "," and depth == 1:
            items.append("".join(item))
            item = []
            continue
        item.append(char)
    return [normalize(i) for i in items if i.strip()], len(text)


_INSTANCE = re.compile(r"@[0-9a-f]+\b")


def _alias(expression: str) -> str:
    """`window AS window` -> `window`; `count(1) AS count` -> `count(1) AS count`."""
    parts = expression.rsplit(" AS ", 1)
    return parts[0] if len(parts) == 2 and parts[0] == parts[1] else expression


def state_operators(text: str) -> list[dict[str, Any]]:
    """Each stateful streaming operator of an analyzed plan, in the order data flows through
    them: {"operator", "node", "keys", "values"} (aggregation: grouping and aggregates;
    deduplication: its columns; join: its kind and condition; a stateful processor: its node)."""
    every = plan_nodes(analyzed_section(text))
    found: list[dict[str, Any]] = []
    for node in reversed(
        [n for n in every if n.streaming]
    ):  # the tree prints the root first; data flows leaves first
        if node.name == "Aggregate":
            keys, end = _bracketed(node.text)
            values, _ = _bracketed(node.text, end)
            shown = [_alias(v) for v in values if _alias(v) not in keys]
            found.append(
                {"operator": "aggregation", "node": node.name, "keys": keys, "values": shown}
            )
        elif node.name.startswith("Deduplicate"):
            keys, _ = _bracketed(node.text)
            found.append(
                {"operator": "deduplication", "node": node.name, "keys": keys, "values": []}
            )
        elif node.name == "Join" and both_sides_stream(every, node):
            found.append(
                {
                    "operator": "join",
                    "node": node.name,
                    "keys": [],
                    "values": [normalize(node.text[len("Join") :])],
                }
            )
        elif timer_dedup_node(node):  # slipstream's deduplication by timers: its key columns
            keys, _ = _bracketed(normalize(node.text))
            found.append(
                {"operator": "deduplication", "node": "TimerDedup", "keys": keys, "values": []}
            )
        elif node.name in STATE_OPS:
            found.append(
                {
                    "operator": "stateful processor",
                    "node": node.name,
                    "keys": [],
                    # a JVM processor prints as Class@hash: its instance is new in every run
                    "values": [_INSTANCE.sub("", normalize(node.text))],
                }
            )
    return found
