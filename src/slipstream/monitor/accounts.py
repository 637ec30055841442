"""What a run's summary says about each query, from its totals (monitor.totals.RunTotals):
every record read accounted for once, so the lines of one run reconcile with each other.

An output's records read are `valid + quarantined + late + duplicates`: the quarantined ones
never reach its results (the first output that reads an input writes them to its quarantine),
a deduplication or a join drops late records and re-sent ones, and the rest are valid. A window
aggregation that comes first drops late *partial aggregates* (one per window, key and partition),
not records: those records stay in `valid`, and the dead-letter holds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slipstream.core.words import count


def with_ingest(t: dict[str, Any], ingests: list[dict[str, Any]]) -> dict[str, Any]:
    """An output's totals as read from the source, when it reads the ingest stage's typed rows:
    the records its inputs' ingest queries quarantined never reached it, so they are added to
    what it read and to its quarantined (and the `drop` expectations they counted), and
    `records read = valid + quarantined + late + duplicates` holds for the output as before."""
    if not ingests:
        return t
    merged = dict(t, expectations=dict(t["expectations"]))
    for ingest in ingests:
        # and the lines Spark read that are no record (blank lines, a CSV header): read, judged
        # by nobody, as without the stage
        unjudged = max(0, ingest["rows"] - ingest.get("checked", ingest["rows"]))
        merged["rows"] += ingest["quarantined"] + unjudged
        merged["quarantined"] += ingest["quarantined"]
        merged["checked"] = merged.get("checked", 0) + ingest.get("checked", 0)
        merged["reason"] = merged.get("reason") or ingest.get("reason")
        for rule, n in ingest["expectations"].items():
            merged["expectations"][rule] = merged["expectations"].get(rule, 0) + n
    return merged


def with_shared(t: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """An output's totals as read from the source, when it reads a shared query's rows
    (runtime/shared_stage.py): what that query did not pass on (quarantined, late, duplicates,
    lines that are no record) is added to what the output read, each to its own term, and
    `records read = valid + quarantined + late + duplicates` holds as without the stage."""
    late = shared["late"] - shared.get("late_aggregates", 0)
    unjudged = max(0, shared["rows"] - shared.get("checked", shared["rows"]))  # blank lines
    dropped = shared["quarantined"] + late + shared.get("duplicates", 0) + unjudged
    merged = dict(t, expectations=dict(shared["expectations"]))
    merged["rows"] = t["rows"] + dropped
    merged["quarantined"] = t["quarantined"] + shared["quarantined"]
    merged["late"] = t["late"] + late
    merged["duplicates"] = t.get("duplicates", 0) + shared.get("duplicates", 0)
    merged["checked"] = shared.get("checked", 0)
    merged["reason"] = t.get("reason") or shared.get("reason")
    return merged


def output_account(query: str, t: dict[str, Any]) -> str:
    """`summary Q: N batches, R records read = V valid + Q quarantined + L late ...`."""
    read, quarantined = t["rows"], t["quarantined"]
    late_aggregates = t.get("late_aggregates", 0)
    late_records = t["late"] - late_aggregates
    duplicates = t.get("duplicates", 0)
    valid = read - quarantined - late_records - duplicates
    terms = [f"{valid:,} valid", f"{quarantined:,} quarantined"]
    terms.append(f"{late_records:,} late (dropped by the watermark)")
    if duplicates:
        terms.append(f"{duplicates:,} duplicates dropped")
    line = f"summary {query}: {count(t['batches'], 'batch')}, {count(read, 'record')} read"
    line += " = " + " + ".join(terms)
    if late_aggregates:
        line += (
            f"; late windows: {count(late_aggregates, 'partial aggregate')} dropped by the "
            "watermark (their records are among the valid ones, and in the dead-letter)"
        )
    line += "".join(f", {rule} {n:,}" for rule, n in t["expectations"].items())
    return line


def quarantine_account(query: str, t: dict[str, Any], folder: Path | str | None) -> str:
    """`summary Q: N batches, R records read: Q quarantined (written to DIR), V left valid`
    (`delta:DIR` for a Delta quarantine)."""
    read, quarantined = t["rows"], t["quarantined"]
    where = f" (written to {folder})" if folder is not None else ""
    return (
        f"summary {query}: {count(t['batches'], 'batch')}, {count(read, 'record')} read: "
        f"{quarantined:,} quarantined{where}, {read - quarantined:,} valid"
    )


def all_windows_open(t: dict[str, Any]) -> bool:
    """An append-mode aggregation that read records, holds windows, and wrote none: every
    window it counts is still open (the watermark has not passed its end)."""
    state = t.get("state_rows", 0)  # None: not counted (a finite run), so not known empty
    return bool(t["rows"]) and not t.get("evicted") and (state is None or state > 0)
