"""A new version beside the old: `run PIPELINE --state-dir NEW --from-checkpoint OLD` (issue 28).

A change the state cannot take (a window, a key, the mode) is refused on the old checkpoint
(runtime/compat.py). The way to ship it without reading the input from the beginning again: the
new version runs on a new checkpoint that starts where the old one stands. At the new
checkpoint's first start, OLD's position is taken from its files alone (no Spark), for each
stream input, as of each of OLD's queries' last committed batch:

- a files input: every file OLD's committed batches read (Spark's file source log,
  `sources/N`, up to the log offset of the last committed batch). The new queries read the
  folder with a filter on `_metadata.file_path` that leaves those files out (sources/files.py).
  Spark applies such a filter to the file index of each batch, so a skipped file is listed and
  logged as seen but never opened. Chosen over writing Spark's logs into the new checkpoint
  (its source log, offsets and commits would have to agree with state files that do not exist)
  and over an anti-join (it would read every old file once): a filter is Spark's public API, and
  it stays in the plan on every restart, so a replayed first batch skips the same files.
- a Kafka input: the next offset of each partition (the end offsets of the last committed
  batch) become the new checkpoint's `startingOffsets`, which Spark uses on a new checkpoint
  only; of each topic it reads (a list, a pattern's matches, the partitions assigned).

Where several of OLD's queries read one input (the outputs, the quarantine), a file any of
them read is skipped and a partition starts after the furthest of them: nothing OLD's outputs
counted is counted again. The position is written into the new checkpoint
(`CHECKPOINT/slipstream-from.json`, private) before its queries start, and every later run on
it reads it from there: a restart needs no flag and skips the same files; `check` shows it.

Every output of the new version is rebuilt, never continued: a new checkpoint holds no state,
so continuing the old table would put windows counted from the cut over windows OLD counted
whole. The ownership check (runtime/ownership.py) refuses an output OLD wrote; a new
`--state-dir` gives each output its own database, quarantine and dead-letter."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import files_read_by
from slipstream.checkpoint.old import FLAG, OldPosition, start_of
from slipstream.checkpoint.start import InputStart, StartFrom, write_record
from slipstream.errors import CheckpointError, ConfigError
from slipstream.runtime.compat import BUILD, read_build

if TYPE_CHECKING:
    from collections.abc import Callable

    from slipstream.runtime.bound import BoundInput, Prepared
    from slipstream.settings.config import Settings


def _refuse_other_input(old: Path, bound: BoundInput) -> None:
    """OLD read this input from another folder: its position means nothing here."""
    path = None if bound.binding.path is None else str(bound.binding.path)
    kind = bound.source.kind if bound.source is not None else None
    for folder in sorted(old.iterdir()):
        build = read_build(folder) if (folder / BUILD).is_file() else None
        for given in (build or {}).get("inputs", []):
            if given.get("name") != bound.name:
                continue
            if given.get("source") != kind or _resolved(given.get("path")) != _resolved(path):
                raise CheckpointError(
                    "FROM_CHECKPOINT_OTHER_INPUT",
                    f"input {bound.name}: {old} read {given.get('source')} "
                    f"{given.get('path')}, this run reads {kind} {path}: its position is not "
                    "one in this input; nothing was started",
                    f"bind the input OLD read ({bound.binding.flag} ...), or drop {FLAG}",
                )


def _resolved(path: str | None) -> Path | None:
    return None if path is None else Path(path).resolve()


def take_position(position: OldPosition, inputs: dict[str, BoundInput]) -> StartFrom:
    """OLD's position, for each stream input of this run."""
    starts: dict[str, InputStart] = {}
    for bound in inputs.values():
        if bound.source is None:
            continue  # a static table: read whole by every batch
        _refuse_other_input(position.old, bound)
        start = bound.source.start_from_old(bound.binding, position)
        if start is None:
            raise ConfigError(
                "SOURCE_NOT_SUPPORTED",
                f"input {bound.name} reads {bound.source.kind}: {FLAG} takes a position in "
                "files and Kafka inputs only; nothing was started",
                f"drop {FLAG} (a {bound.source.kind} source has no position to start from)",
            )
        starts[bound.name] = start
    taken = datetime.now(UTC).isoformat(timespec="seconds")
    return StartFrom(position.old, taken, position.batches, starts)


def start_from(
    settings: Settings, pipeline: str, inputs: dict[str, BoundInput]
) -> StartFrom | None:
    """This run's start (`--from-checkpoint`, or the one its checkpoint recorded), or None.
    Refuses, before Spark starts, what checkpoint/old.py refuses, and an input OLD read from
    elsewhere."""
    bronze = settings.bronze_root if settings.ingest_stage else None
    found = start_of(settings.checkpoint_root, settings.from_checkpoint, pipeline, bronze)
    return take_position(found, inputs) if isinstance(found, OldPosition) else found


def still_to_skip(where: InputStart, checkpoints: list[Path]) -> frozenset[str]:
    """The files of `where` that a query of this run has not yet committed a batch over. A
    query's own source log holds every file it listed, skipped ones too, and Spark never lists
    a file again once a batch that listed it committed: the filter is needed until then (and
    for a batch replayed before its commit), so a restart after that carries none. Its cost:
    building a filter of 100,000 paths takes about 15 s (sources/files.py)."""
    done: set[str] | None = None
    for checkpoint in checkpoints:
        batch = last_committed_batch(checkpoint)
        try:
            listed = set(files_read_by(checkpoint, batch)) if batch is not None else set()
        except (OSError, ValueError, KeyError):  # a damaged log: refused later; skip them all
            listed = set()
        done = listed if done is None else done & listed
    return replace(
        where, files=tuple(f for f in where.files if f not in (done or set()))
    ).skip_forms()


def apply(
    inputs: dict[str, BoundInput], start: StartFrom | None, checkpoints: list[Path]
) -> dict[str, BoundInput]:
    """The inputs, bound to start where `start` says (`checkpoints`: this run's queries')."""
    if start is None:
        return inputs
    bound = dict(inputs)
    for name, where in start.inputs.items():
        if name not in bound:
            continue
        binding = bound[name].binding
        if where.offsets is None:  # the files OLD read
            binding = replace(binding, skip_files=still_to_skip(where, checkpoints))
        elif binding.topic is not None:
            topic = binding.topic
            if "startingOffsets" in topic.option_map and not start.recorded:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"input {name}: startingOffsets={topic.option_map['startingOffsets']} "
                    f"and {FLAG} both say where the new checkpoint starts",
                    f"drop startingOffsets from the URL ({FLAG} starts where OLD stands)",
                )
            options = tuple((k, v) for k, v in topic.options if k != "startingOffsets")
            offsets = json.dumps(where.offsets, separators=(",", ":"))
            binding = replace(
                binding, topic=replace(topic, options=(*options, ("startingOffsets", offsets)))
            )
        bound[name] = replace(bound[name], binding=binding)
    return bound


def begin(prepared: Prepared, say: Callable[[str], None]) -> None:
    """Before the queries start: record a position taken by this run, and say what each
    output will hold."""
    start = prepared.start_from
    if start is None or start.recorded:
        return
    write_record(prepared.settings.checkpoint_root, start)
    for line in start.describe():
        say(f"{prepared.pipeline.name}: {line}")
    for out in prepared.outputs.values():
        if not out.is_output:
            continue
        plan = prepared.plans.get(out.name)
        windowed = plan is not None and plan.window != "none"
        say(
            f"output {out.ctx.query_name} is rebuilt on a new checkpoint, not continued: "
            f"{out.sink.describe(out.ctx)} holds what this version computes over the records "
            f"OLD had not read ({start.old})"
            + (
                "; a window still open at that point counts only its records from there"
                if windowed
                else ""
            )
        )
