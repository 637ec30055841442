"""Every output is bound to the checkpoint that writes it.

Spark's file sink skips every batch id at or below the highest in its `_spark_metadata` log;
the database sinks' ledger keys batches by the query id in the checkpoint's `metadata`. A
checkpoint that is new (or was reset without its outputs) starts at batch 0 under a new query
id: on outputs another checkpoint wrote, a file sink (and a quarantine) would drop its first
batches without a word, and a database sink would take every re-read row again. So a run
refuses such outputs before any query starts (`OUTPUT_BELONGS_TO_OTHER_CHECKPOINT`), naming
the two ways out. A resume, and a restart after a crash, are not refused: their checkpoint
planned (files) or committed (databases) what the output holds.

Every run also records its outputs in its checkpoint root (`.slipstream-outputs.json`, no
password), so that `reset --outputs` clears every output a run on this checkpoint wrote, also
the ones the reset command is not given (trending's archive, a `--sink` given once)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from slipstream.checkpoint.lifecycle import query_checkpoint
from slipstream.core.specs import SinkSpec
from slipstream.errors import CheckpointError
from slipstream.runtime.bound import QUARANTINE, BoundOutput, Prepared
from slipstream.sinks import SinkContext, make_sink

RECORD = ".slipstream-outputs.json"


def refuse_foreign_outputs(prepared: Prepared) -> None:
    """OUTPUT_BELONGS_TO_OTHER_CHECKPOINT for the first output that holds batches this run's
    checkpoint did not write."""
    pipeline = prepared.pipeline.name
    for out in prepared.outputs.values():
        held = out.sink.foreign_batches(out.ctx)
        if held is None:
            continue
        if out.spec is None:  # a quarantine
            elsewhere = "a new --quarantine DIR"
        elif out.sink.spec.is_file_sink:
            elsewhere = f"a new folder: --sink {out.name}={out.sink.spec.kind}:NEW_DIR"
        else:
            elsewhere = f"a new table: --table {out.name}=NEW_TABLE"
        raise CheckpointError(
            "OUTPUT_BELONGS_TO_OTHER_CHECKPOINT",
            f"output {out.ctx.query_name} ({out.sink.describe(out.ctx)}) was written by another "
            f"checkpoint: {held}; nothing was started",
            f"start both over: `slipstream reset {pipeline} --outputs` (deletes the checkpoint "
            f"and every output), or give this output {elsewhere}",
        )


def _entries(root: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((Path(root) / RECORD).read_text())
    except (OSError, ValueError):
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def record_outputs(prepared: Prepared) -> None:
    """Add this run's outputs to its checkpoint's record (called under the checkpoint lock)."""
    root = prepared.settings.checkpoint_root
    entries = _entries(root)
    for name, out in prepared.outputs.items():
        target = out.sink.location(out.ctx)
        entry = {"name": name, "sink": target, "table": out.ctx.table, "mode": out.ctx.mode}
        if target is not None and entry not in entries:
            entries.append(entry)
    path = Path(root) / RECORD
    tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    os.replace(tmp, path)


def every_output(prepared: Prepared) -> list[BoundOutput]:
    """The outputs these settings bind, then every other one a run on this checkpoint
    recorded (bound to the sink it was written to): what `reset --outputs` clears."""
    settings = prepared.settings
    found = list(prepared.outputs.values())
    seen = {(o.name, o.sink.location(o.ctx), o.ctx.table) for o in found}
    for entry in _entries(settings.checkpoint_root):
        name, target, table = entry.get("name"), entry.get("sink"), entry.get("table")
        if not (isinstance(name, str) and isinstance(target, str)):
            continue
        if (name, target, table) in seen:
            continue
        seen.add((name, target, table))
        sink = make_sink(SinkSpec.parse(target), settings.default_database)
        ctx = SinkContext(
            pipeline=prepared.pipeline.name,
            query_name=f"{prepared.pipeline.name}.{name}",
            table=str(table),
            key=(),
            mode=entry.get("mode", "append"),
            checkpoint=query_checkpoint(settings.checkpoint_root, name),
        )
        spec = next((o for o in prepared.pipeline.outputs if o.name == name), None)
        found.append(BoundOutput(None if name.startswith(QUARANTINE) else spec, sink, ctx))
    return found
