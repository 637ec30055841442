"""`slipstream reset`: a pipeline's checkpoint (and with --outputs its results), or one output's,
deleted only when everything to delete carries slipstream's mark."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

from slipstream.app.exits import EXIT_OK
from slipstream.checkpoint.lifecycle import (
    checkpoint_is_ours,
    clearing,
    interrupted_reset,
    is_locked,
    mark_reset,
    not_ours,
)
from slipstream.errors import CheckpointError
from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import Prepared
from slipstream.runtime.late_folder import late_is_ours, reset_late
from slipstream.runtime.ownership import outputs_to_reset, quarantines_written_by
from slipstream.settings.config import Settings


@contextlib.contextmanager
def deferred_sigterm() -> Iterator[None]:
    """SIGTERM during the block ends the process after it (exit 143), not in the middle of a
    reset's deletes (main thread only; elsewhere the block runs as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
    if received:
        print("slipstream: SIGTERM received: the reset finished first", file=sys.stderr)
        raise SystemExit(128 + signal.SIGTERM)


def confirm(targets: list[str], pipeline: str, out: TextIO, given: TextIO | None) -> None:
    """Show what a reset deletes and ask for the pipeline's name (RESET_REFUSED otherwise)."""
    print("This deletes:\n  " + "\n  ".join(targets), file=out)
    print("Type the pipeline name to confirm: ", end="", file=out, flush=True)
    answer = (given or sys.stdin).readline().strip()
    if answer != pipeline:
        raise CheckpointError(
            "RESET_REFUSED",
            "reset not confirmed; nothing was deleted",
            f"type {pipeline!r} at the prompt, or pass --yes",
        )


def reset(
    settings: Settings,
    *,
    outputs: bool | str,
    yes: bool,
    out: TextIO,
    confirm_input: TextIO | None = None,
) -> int:
    prepared = prepare(settings, check_source=False)
    s = prepared.settings
    root = s.checkpoint_root
    if isinstance(outputs, str):
        return reset_output(prepared, outputs, yes=yes, out=out, confirm_input=confirm_input)
    if is_locked(root):
        raise CheckpointError(
            "CHECKPOINT_IN_USE",
            f"checkpoint {root} is in use by a run",
            f"stop it first: slipstream stop {s.pipeline}",
        )
    unfinished = interrupted_reset(root)
    if unfinished is not None and unfinished.get("outputs") and not outputs:
        print("an interrupted reset --outputs is finished first (its outputs too)", file=out)
        outputs = True
    targets = [f"checkpoint {root}"]
    if s.bronze_root.is_dir():
        targets.append(f"the ingest stage's typed rows {s.bronze_root}")
    # also those earlier runs recorded, but not those of another checkpoint (a copy's record)
    every, kept = outputs_to_reset(prepared) if outputs else ([], [])
    for line in kept:
        print(line, file=out)
    if outputs:
        targets += [f"output {out.name}: {out.sink.describe(out.ctx)}" for out in every]
        targets.append(f"late rows {s.late_root}")
        targets.append(f"event log {s.event_log}")
    if not yes:
        confirm(targets, s.pipeline, out, confirm_input)
    # nothing is deleted unless everything to delete carries slipstream's mark
    if not checkpoint_is_ours(root):
        raise not_ours(root, "checkpoint")
    if outputs:
        for out_ in every:
            if not out_.sink.owns(out_.ctx):
                raise not_ours(out_.sink.describe(out_.ctx), f"output {out_.name}")
        if not late_is_ours(s.late_root):
            raise not_ours(s.late_root, "late-row dead-letter")
    removed: list[str] = []
    with deferred_sigterm(), clearing(root) as existed:  # the lock held while anything goes
        mark_reset(root, outputs)  # before the first delete: an interrupted reset is known
        # the ingest stage's typed rows belong to its checkpoint: a batch N found there would
        # be taken for a replay of the new checkpoint's batch N (runtime/ingest_stage.py)
        if s.bronze_root.is_dir():
            shutil.rmtree(s.bronze_root)
            removed.append(str(s.bronze_root))
        if outputs:
            for out_ in every:
                removed += out_.sink.reset(out_.ctx)
            removed += reset_late(s.late_root)
            if s.event_log.exists():
                s.event_log.unlink()
                removed.append(str(s.event_log))
    if existed:
        removed.insert(0, str(root))
    print("removed: " + (", ".join(removed) if removed else "nothing (already clean)"), file=out)
    return EXIT_OK


def reset_output(
    prepared: Prepared,
    name: str,
    *,
    yes: bool,
    out: TextIO,
    confirm_input: TextIO | None = None,
) -> int:
    """`reset PIPELINE --outputs NAME`: one output's checkpoint and results (and the
    quarantines its query wrote), nothing else (a way out of STATE_INCOMPATIBLE that keeps the
    other outputs' state)."""
    from slipstream.checkpoint.lifecycle import clearing_query, query_checkpoint
    from slipstream.errors import ConfigError

    s = prepared.settings
    names = [o.name for o in prepared.pipeline.outputs]
    if name not in names:
        raise ConfigError(
            "CONFIG_UNKNOWN_KEY",
            f"--outputs {name}: pipeline {s.pipeline} has no output {name!r}",
            f"its outputs: {', '.join(names)}",
        )
    if is_locked(s.checkpoint_root):
        raise CheckpointError(
            "CHECKPOINT_IN_USE",
            f"checkpoint {s.checkpoint_root} is in use by a run",
            f"stop it first: slipstream stop {s.pipeline}",
        )
    every, kept = outputs_to_reset(prepared)
    # and the quarantines it wrote: a new checkpoint reads every record again
    mine = [o for o in every if o.name == name] + quarantines_written_by(prepared, name)
    for line in kept:
        if line.startswith(f"output {name} "):
            print(line, file=out)
    folder = query_checkpoint(s.checkpoint_root, name)
    targets = [f"checkpoint {folder}"] + [f"output {name}: {o.sink.describe(o.ctx)}" for o in mine]
    if not yes:
        confirm(targets, s.pipeline, out, confirm_input)
    for o in mine:
        if not o.sink.owns(o.ctx):
            raise not_ours(o.sink.describe(o.ctx), f"output {o.name}")
    removed: list[str] = []
    late = s.late_root / name  # this output's late rows (runtime.deadletter)
    if late.exists() and not late_is_ours(s.late_root):
        raise not_ours(s.late_root, "late-row dead-letter")
    with clearing_query(s.checkpoint_root, name) as existed:
        for o in mine:
            removed += o.sink.reset(o.ctx)
        if late.is_dir():
            shutil.rmtree(late)
            removed.append(str(late))
    if existed:
        removed.insert(0, str(folder))
    print("removed: " + (", ".join(removed) if removed else "nothing (already clean)"), file=out)
    return EXIT_OK
