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
the ones the reset command is not given (trending's archive, a `--sink` given once). A
recorded output is cleared only while it still belongs to this checkpoint (`owner_elsewhere`):
a state dir copied with `cp -a` carries the original's record, and its reset must not delete
the original's outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from slipstream.checkpoint.lifecycle import query_checkpoint
from slipstream.checkpoint.logs import query_id
from slipstream.core.specs import SinkSpec
from slipstream.errors import CheckpointError
from slipstream.runtime.bound import QUARANTINE, BoundOutput, Prepared, QueryKind
from slipstream.runtime.build import Query
from slipstream.settings.config import Settings
from slipstream.sinks import Sink, SinkContext, make_sink
from slipstream.sinks.database import DatabaseSink
from slipstream.sinks.quarantine import task_files
from slipstream.sinks.spark_sinks import FileSink, mark_names, write_mark
from slipstream.sinks.sqlite import SqliteSink

RECORD = ".slipstream-outputs.json"


def refuse_foreign_outputs(prepared: Prepared) -> None:
    """OUTPUT_BELONGS_TO_OTHER_CHECKPOINT for the first output that holds batches this run's
    checkpoint did not write."""
    pipeline = prepared.pipeline.name
    for out in prepared.targets.values():
        held = out.sink.foreign_batches(out.ctx)
        if held is None:
            continue
        if not out.is_output:  # a quarantine
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


def _local_path(sink: Sink) -> Path | None:
    if isinstance(sink, FileSink) and "://" not in str(sink.spec.target):
        return sink.directory
    if isinstance(sink, SqliteSink):
        return sink.path
    return None


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def record_outputs(prepared: Prepared) -> None:
    """Add this run's outputs to its checkpoint's record (called under the checkpoint lock).
    Each entry names the checkpoint that wrote it; an output that lies in the state dir, as
    the checkpoint does, is also recorded relative to the checkpoint, so that a state dir
    copied (or moved) whole finds its own outputs, not the original's."""
    root = Path(prepared.settings.checkpoint_root).resolve()
    state = Path(prepared.settings.state_dir).resolve()
    entries = _entries(root)
    for name, out in prepared.targets.items():
        target = out.sink.location(out.ctx)
        if target is None:
            continue
        entry: dict[str, Any] = {
            "name": name,
            "sink": target,
            "table": out.ctx.table,
            "mode": out.ctx.mode,
            "checkpoint": str(root),
        }
        local = _local_path(out.sink)
        if local is not None and _within(root, state) and _within(local.resolve(), state):
            entry["relative"] = os.path.relpath(local.resolve(), root)
        if entry not in entries:
            entries.append(entry)
    path = root / RECORD
    tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    os.replace(tmp, path)


def _target(entry: dict[str, Any], root: Path) -> str | None:
    """The recorded output as it lies now: a relative entry resolved against the checkpoint
    where it lies now."""
    target = entry.get("sink")
    if not isinstance(target, str):
        return None
    relative = entry.get("relative")
    if isinstance(relative, str) and ":" in target:
        kind = target.split(":", 1)[0]
        return f"{kind}:{(Path(root).resolve() / relative).resolve()}"
    return target


def _recorded(prepared: Prepared) -> list[tuple[BoundOutput, dict[str, Any]]]:
    """Every output a run on this checkpoint recorded that these settings do not bind, bound
    to the sink it was written to, with its record entry."""
    settings = prepared.settings
    seen: set[tuple[str, str | None, str | None]] = {
        (o.name, o.sink.location(o.ctx), o.ctx.table) for o in prepared.targets.values()
    }
    found = []
    for entry in _entries(settings.checkpoint_root):
        name, target, table = (
            entry.get("name"),
            _target(entry, settings.checkpoint_root),
            entry.get("table"),
        )
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
        if name.startswith(QUARANTINE):
            bound = BoundOutput(None, sink, ctx, kind=QueryKind.INGEST)
        else:
            bound = BoundOutput(spec, sink, ctx)
        found.append((bound, entry))
    return found


def _sibling_checkpoint(out: BoundOutput, settings: Settings) -> Path | None:
    """For an output recorded by absolute path (any version): the checkpoint of the state dir
    it lies in, when that is another state dir with this pipeline's checkpoint at the same
    place (`ORIGINAL/checkpoints/PIPELINE` for `COPY/checkpoints/PIPELINE`): the original
    of a copied state dir, whose record an older version wrote absolute."""
    local = _local_path(out.sink)
    state = Path(settings.state_dir).resolve()
    root = Path(settings.checkpoint_root).resolve()
    if local is None or not _within(root, state):
        return None
    place = root.relative_to(state)
    for folder in local.resolve().parents:
        if folder == state or _within(state, folder):
            break  # this state dir, or one holding it
        other = folder / place
        if other.is_dir() and other != root:
            return other
    return None


def owner_elsewhere(out: BoundOutput, entry: dict[str, Any], settings: Settings) -> str | None:
    """The checkpoint (or query) a recorded output belongs to when that is not this one, as
    it lies now; None when it is this checkpoint's (or nothing tells). A file output's mark
    names its query checkpoint; else a record written in another checkpoint (a copied state
    dir's, its entry absolute) names the original, and so does an output that lies in another
    state dir with this pipeline's checkpoint (a record of an older version); a database
    table's ledger names the query ids that wrote it."""
    root = Path(settings.checkpoint_root).resolve()
    mine = query_checkpoint(root, out.name).resolve()
    if isinstance(out.sink, FileSink) and out.sink.directory.is_dir():
        named = mark_names(out.sink.directory)
        if named:
            return None if mine in named else str(named[-1])
    if "relative" not in entry:
        recorded = entry.get("checkpoint")
        if isinstance(recorded, str) and Path(recorded) != root:
            return recorded
        sibling = _sibling_checkpoint(out, settings)
        if sibling is not None:
            return str(sibling)
    if isinstance(out.sink, DatabaseSink):
        writers = out.sink.ledger_queries(out.ctx)
        if writers and query_id(out.ctx.checkpoint) not in writers:
            return "of query " + ", ".join(sorted(writers))
    return None


def outputs_to_reset(prepared: Prepared) -> tuple[list[BoundOutput], list[str]]:
    """What `reset --outputs` clears: the outputs these settings bind, and every other one a
    run on this checkpoint recorded that still belongs to this checkpoint; and one line for
    each recorded output it leaves alone because it belongs to another checkpoint (the
    original's, when this state dir is a copy)."""
    found = list(prepared.targets.values())
    kept = []
    for out, entry in _recorded(prepared):
        owner = owner_elsewhere(out, entry, prepared.settings)
        if owner is None:
            found.append(out)
        else:
            kept.append(
                f"output {out.name} ({out.sink.describe(out.ctx)}) belongs to checkpoint "
                f"{owner} (a copy's record?): not deleted"
            )
    return found, kept


def quarantines_written_by(prepared: Prepared, output: str) -> list[BoundOutput]:
    """The quarantine folders whose mark names output `output`'s checkpoint (its query wrote
    them: ingest/quarantine.py)."""
    checkpoint = query_checkpoint(prepared.settings.checkpoint_root, output).resolve()
    return [
        q
        for q in prepared.quarantine_sinks.values()
        if q.sink.spec.is_file_sink and checkpoint in mark_names(q.sink.spec.path())
    ]


def claim_quarantines(built: list[Query]) -> None:
    """Mark each quarantine folder an output's query writes with that query's checkpoint
    (sinks/quarantine.py reads its commits); a folder holding the task files of another
    query of this checkpoint (its quarantine written by another output in an earlier run:
    their batch ids are not this query's) is refused before any query starts."""
    for query in built:
        own = Path(query.output.ctx.checkpoint).resolve()
        for name, folder in query.quarantines.items():
            writer = next((c for c in mark_names(folder) if c.is_dir()), None)
            if task_files(folder) and writer is not None and writer != own:
                raise CheckpointError(
                    "OUTPUT_BELONGS_TO_OTHER_CHECKPOINT",
                    f"the quarantine of input {name} ({folder}) holds the batches of "
                    f"{writer}, and in this run {query.output.ctx.query_name} writes it; "
                    "nothing was started",
                    f"run with the outputs of the earlier run, or start over: `slipstream "
                    f"reset {query.output.ctx.pipeline} --outputs`, or give a new --quarantine DIR",
                )
    for query in built:
        for folder in query.quarantines.values():
            write_mark(Path(folder), Path(query.output.ctx.checkpoint))
