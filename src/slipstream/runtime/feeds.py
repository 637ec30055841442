"""Each query's totals as read from the source: an output that reads what another query of
the run wrote (the ingest stage's bronze, a shared query's rows) gets the records that query
did not pass on (monitor/accounts.py `with_ingest`, `with_shared`)."""

from __future__ import annotations

from slipstream.monitor.accounts import with_ingest, with_shared
from slipstream.runtime.bound import Prepared, QueryKind
from slipstream.runtime.ingest_stage import bronze_dir
from slipstream.runtime.shared_stage import shared_folders


def accounts(prepared: Prepared, by_query: dict[str, dict]) -> dict[str, dict]:
    """Each query's totals as read from the source: an output that read an input's bronze gets
    what that input's ingest query quarantined (monitor.accounts.with_ingest), one that read a
    shared query's rows what that query did not pass on (with_shared)."""
    feeds: dict[str, str] = {}  # bronze folder -> the ingest query that writes it
    for out in prepared.outputs.values():
        if out.kind is QueryKind.INGEST:
            bound = prepared.inputs[out.reads[0]]
            feeds[str(bronze_dir(prepared.settings, bound).resolve())] = out.ctx.query_name
    shown: dict[str, dict] = {}
    for query, t in by_query.items():
        ingests = [
            by_query[ingest]
            for folder, ingest in feeds.items()
            if ingest != query
            and ingest in by_query
            and any(f"{folder}]" in source for source in t.get("sources", []))
        ]
        shown[query] = with_ingest(t, ingests)
    # then what a shared query (itself read from the source, above) did not pass on
    shared = shared_folders(prepared)
    for query, t in list(shown.items()):
        for folder, feeder in shared.items():
            reads = any(f"{folder}]" in source for source in t.get("sources", []))
            if feeder != query and feeder in shown and reads:
                shown[query] = with_shared(shown[query], shown[feeder])
    return shown
