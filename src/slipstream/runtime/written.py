"""The rows each output's sink wrote per batch, by the sink's own count, in the event log.

Spark reports `numOutputRows` -1 for a `foreachBatch` sink, so its progress cannot say what a
database sink wrote; the sink counts the rows it inserts or upserts (sinks.database.DatabaseSink).
`WrittenRows` is the run listener's first handler: it stamps each progress record of an output
with `written_rows`, so the event log, `status` and the dashboard show rows written per second
beside Spark's processed rows. A sink that does not count (file sinks, Kafka, foreach, a sink
that ran in Spark Connect's server) leaves the record as it is."""

from __future__ import annotations

from typing import Any

from slipstream.runtime.bound import Prepared


class WrittenRows:
    """A listener handler; put it before the event log's."""

    def __init__(self, prepared: Prepared) -> None:
        self._sinks = {o.ctx.query_name: o.sink for o in prepared.outputs.values()}

    def __call__(self, record: dict[str, Any]) -> None:
        if record.get("event") != "progress":
            return
        counted = getattr(self._sinks.get(record.get("query", "")), "rows_written", None)
        batch = record["progress"].get("batchId")
        if counted is None or not isinstance(batch, int):
            return
        rows = counted(record["query"], batch)
        if rows is not None:
            record["written_rows"] = rows
