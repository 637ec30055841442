"""The Grafana dashboard (docs/grafana/slipstream.json) queries only metrics slipstream exports:
every panel's PromQL and every template variable's query names metric families that
`SlipstreamMetrics` registers (built here, on a fresh registry). No Spark, no Grafana."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from slipstream.monitor.metrics import SlipstreamMetrics

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana" / "slipstream.json"

# what is not a metric name in a PromQL expression: strings, label matchers, ranges and the
# label lists of `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`, `group_*(...)`
_NOT_NAMES = re.compile(
    r'"(?:[^"\\]|\\.)*"|\{[^}]*\}|\[[^\]]*\]'
    r"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"
)
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers not followed by `(` (those are
    functions and aggregations), outside strings, matchers, ranges and label lists."""
    text = _NOT_NAMES.sub(" ", expr)
    names = set()
    for match in _IDENT.finditer(text):
        rest = text[match.end() :].lstrip()
        if not rest.startswith("(") and match.group().lower() not in _KEYWORDS:
            names.add(match.group())
    return names


def exported_names() -> set[str]:
    """The sample names /metrics serves: each family's name; a counter's as `_total` (and
    prometheus-client's `_created`)."""
    registry = CollectorRegistry()
    SlipstreamMetrics(registry)
    names: set[str] = set()
    for family in registry.collect():
        if family.type == "counter":
            names |= {family.name + "_total", family.name + "_created"}
        else:
            names.add(family.name)
    return names


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and template variable."""
    found = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if variable["type"] == "query":
            text = query["query"] if isinstance(query, dict) else query
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", text)
            found.append((f"variable {variable['name']!r}", inner.group(1) if inner else text))
    return found


def unknown_metrics(dashboard: dict[str, Any], exported: set[str]) -> dict[str, set[str]]:
    found = {where: metric_names(expr) - exported for where, expr in queries(dashboard)}
    return {where: names for where, names in found.items() if names}


def test_every_panel_queries_a_metric_slipstream_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_names()
    assert "slipstream_watermark_lag_seconds" in exported  # the custom collector's family
    assert "slipstream_batches_completed_total" in exported  # a counter, as exposed
    found = queries(dashboard)
    assert len(found) >= len(dashboard["panels"])
    assert unknown_metrics(dashboard, exported) == {}
    for where, expr in found:
        assert metric_names(expr), f"{where} reads no metric: {expr}"
    # every metric slipstream exports is on some panel (a new metric gets a panel)
    shown = set().union(*(metric_names(expr) for _, expr in found))
    assert exported - shown - {n for n in exported if n.endswith("_created")} == set()


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [
        (p["gridPos"]["x"] + dx, p["gridPos"]["y"] + dy)
        for p in panels
        for dx in range(p["gridPos"]["w"])
        for dy in range(p["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells))


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('rate(nope_total{pipeline=~"$p"}[$__rate_interval])', {"nope_total"}),
        ("sum by (query, rule) (rate(a_total[5m])) / on (query) b", {"a_total", "b"}),
        ("time() - last_progress_seconds", {"last_progress_seconds"}),
        ('up{job="by (x)"} > bool 0', {"up"}),
    ],
)
def test_metric_names_finds_each_name_and_only_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_a_panel_naming_a_metric_slipstream_does_not_export_is_caught() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    target = dashboard["panels"][0]["targets"][0]
    target["expr"] = target["expr"].replace("slipstream_input_rows_per_second", "slipstream_rows")
    where = f"panel {dashboard['panels'][0]['title']!r} {target['refId']}"
    assert unknown_metrics(dashboard, exported_names()) == {where: {"slipstream_rows"}}
