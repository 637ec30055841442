"""The run summary: a line per query accounting for every record it read (monitor.accounts),
the warnings a run's totals call for, and where the late records went."""

from __future__ import annotations

from typing import TextIO

from slipstream.core.words import count
from slipstream.monitor.accounts import (
    all_windows_open,
    output_account,
    quarantine_account,
)
from slipstream.monitor.listener import mostly_quarantined
from slipstream.monitor.totals import no_batches
from slipstream.runtime.bound import BoundOutput, QueryKind
from slipstream.runtime.run import Run


def summary(run_: Run, out: TextIO) -> None:
    prepared = run_.prepared
    s = prepared.settings
    by_query = {o.ctx.query_name: o for o in prepared.outputs.values()}
    warned = False
    accounts = run_.accounts()
    # every query of the run has its line, one that ran no batch (a restart with nothing new
    # for it) too: "0 batches" says it ran and found nothing, where no line says nothing
    for query in sorted(set(by_query) | set(accounts)):
        t = accounts.get(query) or no_batches()
        output = by_query.get(query)
        if output is not None and output.kind is QueryKind.INGEST:
            bound = prepared.inputs.get(output.reads[0]) if output.reads else None
            folder = bound.quarantine if bound else None
            shown = f"delta:{folder}" if folder is not None and s.quarantine_delta else folder
            print(quarantine_account(query, t, shown), file=out)
        else:
            print(output_account(query, t), file=out)
        warning = mostly_quarantined(t["quarantined"], t.get("checked", 0), t.get("reason"))
        if warning and not warned:  # every output reads the same records: once is enough
            warned = True
            print(f"WARNING {warning} (the records: {s.quarantine_root})", file=out)
        if output is not None and _appends_windows(run_, output) and all_windows_open(t):
            wm = t.get("watermark") or "-"
            print(
                f"{query}: no row written: in append mode a window is written once the "
                f"watermark passes its end, and every window is still open (watermark "
                f"{'-' if wm.startswith('1970-01-01') else wm}, "
                f"{_held(t.get('state_rows', 0))}); newer input moves it "
                "on, or --mode update shows windows while they count",
                file=out,
            )
    for name, owner in prepared.quarantines.items():
        print(
            f"quarantine {name}: the records {prepared.pipeline.name}.{owner} rejected are in "
            f"{prepared.inputs[name].quarantine}",
            file=out,
        )
    if s.trigger.finite and not any(t["rows"] for t in run_.totals.by_query.values()):
        # a resume with nothing new ran no batch with rows: say so rather than nothing
        print(
            f"nothing new to do: no input that checkpoint {s.checkpoint_root} has not read",
            file=out,
        )
    late = run_.dead_letter
    if late is not None and late.written:
        print(
            f"dead-letter: {count(late.written, 'late record')} (dropped by the watermark) "
            f"written by this run to {s.dead_letter if s.late_delta else s.late_root}",
            file=out,
        )


def _held(rows: int | None) -> str:
    """`2 rows in state`, or that a finite run did not count them (runtime/partitions.py)."""
    if rows is None:
        return "state rows not counted in a finite run"
    return f"{count(rows, 'row')} in state"


def _appends_windows(run_: Run, output: BoundOutput) -> bool:
    """Whether an output writes windows in append mode (rows only once a window closes)."""
    plan = run_.prepared.plans.get(output.name)
    return (
        output.is_output
        and plan is not None
        and plan.aggregation
        and plan.watermark_column is not None
        and output.ctx.mode == "append"
    )
