"""What refuses a run before any query starts, said once and asked twice: before Spark starts
(`slipstream run` and the demos, through runtime/launch.py: no 10 s of start-up before a
refusal) and again under the checkpoint's lock (runtime/start.py: nothing changed meanwhile).

A checkpoint another run holds, a folder that cannot be written, an interrupted reset, logs that
disagree, outputs another checkpoint wrote, a checkpoint made with or without the ingest stage
run the other way."""

from __future__ import annotations

from pathlib import Path

from slipstream.checkpoint.integrity import refuse_damaged
from slipstream.checkpoint.lifecycle import (
    refuse_in_use,
    refuse_interrupted_reset,
    require_writable,
    sweep_interrupted_writes,
)
from slipstream.runtime import shared_stage
from slipstream.runtime.bound import Prepared
from slipstream.runtime.ingest_stage import check_checkpoints
from slipstream.runtime.ownership import refuse_foreign_outputs


def checkpoints_of(prepared: Prepared) -> dict[str, Path]:
    """Each query's checkpoint, by query name."""
    return {o.ctx.query_name: Path(o.ctx.checkpoint) for o in prepared.outputs.values()}


def refuse_before_start(prepared: Prepared, *, locked: bool = False) -> None:
    """Raise the first reason this run cannot start. `locked`: the caller holds the
    checkpoint's lock, so a write a kill interrupted can be swept first; without it, a
    checkpoint another run holds is refused (looking never takes the lock, so a run starting
    meanwhile is not refused because of us)."""
    s = prepared.settings
    if locked:
        for out in prepared.outputs.values():  # a kill inside Spark's log write
            sweep_interrupted_writes(out.ctx.checkpoint)
    else:
        require_writable(s.state_dir, "--state-dir")  # not a PermissionError after Spark started
        if s.checkpoint is not None:
            require_writable(s.checkpoint, "--checkpoint")
        refuse_in_use(s.checkpoint_root)
    refuse_interrupted_reset(s.checkpoint_root, prepared.pipeline.name)
    refuse_damaged(checkpoints_of(prepared))  # logs that disagree
    refuse_foreign_outputs(prepared)
    staged = {b.name for b in prepared.inputs.values() if b.staged}
    check_checkpoints(prepared, staged)  # never a silent restart from zero
    shared_stage.check_checkpoints(prepared)
