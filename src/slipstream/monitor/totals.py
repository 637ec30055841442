"""A run's totals per query, from the listener's progress records (monitor/listener.py): the
run summary and the accounting tests read them."""

from __future__ import annotations

from typing import Any

from slipstream.monitor.events import batch_executed
from slipstream.monitor.listener import STATE_COUNTED, Record, progress_summary


def no_batches() -> dict[str, Any]:
    """A query's totals before its first batch (RunTotals adds each batch to them)."""
    return {
        "batches": 0,
        "rows": 0,
        "quarantined": 0,
        "checked": 0,
        "reason": None,
        "late": 0,
        "late_aggregates": 0,
        "evicted": 0,
        "duplicates": 0,
        "expectations": {},
        "sources": [],  # each source's description (an output of the ingest stage: bronze)
    }


class RunTotals:
    """Totals over a run, per query: the run summary and the accounting tests read them (a
    handler of RunListener, which hands it one record at a time)."""

    def __init__(self) -> None:
        self.by_query: dict[str, dict[str, Any]] = {}
        self.failures: dict[str, str] = {}
        self.last_batch: dict[str, int] = {}

    def __call__(self, record: Record) -> None:
        if record["event"] == "terminated" and record.get("exception"):
            self.failures[record["query"]] = record["exception"]
        if record["event"] != "progress":
            return
        batch = record["progress"].get("batchId")
        if isinstance(batch, int):
            self.last_batch[record["query"]] = max(batch, self.last_batch.get(record["query"], -1))
        if not batch_executed(record["progress"]):
            return  # an idle report: it names the next batch, which has not run
        s = progress_summary(record["progress"], record.get(STATE_COUNTED, True))
        t = self.by_query.setdefault(record["query"], no_batches())
        for source in record["progress"].get("sources") or []:
            described = str(source.get("description", ""))
            if described and described not in t["sources"]:
                t["sources"].append(described)
        t["state_rows"] = s["state_rows"]  # after the last batch (None: not counted)
        t["watermark"] = s["watermark"]
        t["batches"] += 1
        t["rows"] += s["rows"]
        t["quarantined"] += s["quarantined"]
        t["checked"] += s["checked"]
        t["reason"] = t["reason"] or s["reason"]
        t["late"] += s["late"]
        t["late_aggregates"] += s["late_aggregates"]
        t["evicted"] += s["evicted"]
        t["duplicates"] += s["duplicates"]
        for rule, n in s["expectations"].items():
            t["expectations"][rule] = t["expectations"].get(rule, 0) + n
