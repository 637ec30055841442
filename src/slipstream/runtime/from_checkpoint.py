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

from slipstream.checkpoint.integrity import damages
from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import files_read_by, kafka_positions
from slipstream.checkpoint.start import InputStart, StartFrom, read_record, write_record
from slipstream.errors import CheckpointError, ConfigError
from slipstream.runtime.compat import BUILD, read_build
from slipstream.runtime.landed import local_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from slipstream.core.kafka_url import KafkaTopic
    from slipstream.runtime.bound import BoundInput, Prepared
    from slipstream.settings.config import Settings

FLAG = "--from-checkpoint"


def resolve_old(given: Path, pipeline: str) -> Path:
    """OLD as given: a state dir (its `checkpoints/PIPELINE`) or a pipeline's checkpoint."""
    inside = Path(given) / "checkpoints" / pipeline
    old = inside if inside.is_dir() else Path(given)
    if not _queries(old):
        raise CheckpointError(
            "FROM_CHECKPOINT_NOT_FOUND",
            f"{FLAG} {given}: no checkpoint of pipeline {pipeline} with a committed batch "
            f"there (looked in {old}); nothing was started",
            f"give the old version's --state-dir, or its checkpoint folder "
            f"(STATE_DIR/checkpoints/{pipeline}); a pipeline that never committed a batch "
            f"needs no {FLAG}",
        )
    return old


def _queries(root: Path) -> dict[str, Path]:
    """The query checkpoints in `root` that committed a batch, by query folder name."""
    if not Path(root).is_dir():
        return {}
    return {
        p.name: p
        for p in sorted(Path(root).iterdir())
        if p.is_dir() and last_committed_batch(p) is not None
    }


def _started(root: Path) -> list[str]:
    """Query checkpoints in `root` that Spark has started (a `metadata` or an offset log)."""
    if not Path(root).is_dir():
        return []
    return [
        p.name
        for p in sorted(Path(root).iterdir())
        if p.is_dir() and ((p / "metadata").exists() or (p / "offsets").is_dir())
    ]


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


def take_position(old: Path, inputs: dict[str, BoundInput]) -> StartFrom:
    """OLD's position now, for each stream input of this run."""
    queries = _queries(old)
    batches = {name: int(last_committed_batch(path) or 0) for name, path in queries.items()}
    read: set[str] = set()
    offsets: dict[str, dict[str, int]] = {}
    for name, path in queries.items():
        found = damages(path)
        if found:
            raise CheckpointError(
                "CHECKPOINT_DAMAGED",
                f"{FLAG}: the checkpoint {path} is damaged: {found[0].file} {found[0].what}; "
                "its position cannot be taken; nothing was started",
                f"run `slipstream check` on the old version, or give another {FLAG}",
            )
        try:
            read.update(files_read_by(path, batches[name]))
            positions = kafka_positions(path, batches[name])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                "CHECKPOINT_DAMAGED",
                f"{FLAG}: the logs of {path} cannot be read ({exc}); nothing was started",
                f"run `slipstream check` on the old version, or give another {FLAG}",
            ) from None
        for topic, partitions in positions.items():
            mine = offsets.setdefault(topic, {})
            for partition, at in partitions.items():
                mine[partition] = max(at, mine.get(partition, 0))
    starts: dict[str, InputStart] = {}
    for bound in inputs.values():
        if bound.source is None:
            continue  # a static table: read whole by every batch
        _refuse_other_input(old, bound)
        kind, resumes_by = bound.source.kind, bound.source.resumes_by
        if resumes_by == "files-read" and bound.binding.path is not None:
            folder = Path(bound.binding.path).resolve()
            mine = sorted(f for f in read if _under(f, folder))
            starts[bound.name] = InputStart(bound.name, kind, tuple(mine))
        elif resumes_by == "offsets" and bound.binding.topic is not None:
            where = kafka_start(old, bound.name, bound.binding.topic, offsets)
            starts[bound.name] = InputStart(bound.name, kind, offsets=where)
        else:
            raise ConfigError(
                "SOURCE_NOT_SUPPORTED",
                f"input {bound.name} reads {bound.source.kind}: {FLAG} takes a position in "
                "files and Kafka inputs only; nothing was started",
                f"drop {FLAG} (a {bound.source.kind} source has no position to start from)",
            )
    taken = datetime.now(UTC).isoformat(timespec="seconds")
    return StartFrom(old, taken, batches, starts)


def kafka_start(
    old: Path, name: str, topic: KafkaTopic, offsets: dict[str, dict[str, int]]
) -> dict[str, dict[str, int]]:
    """Where Kafka input `name` starts: OLD's next offset of each partition it reads. Every
    topic it names (a list, assign's) OLD must have read; a pattern, at least one. Spark takes
    startingOffsets only naming every partition read: one OLD never read starts at its
    beginning (-2): an assigned partition, or (asked of the broker) a topic the pattern matches
    that OLD never read."""
    never = [t for t in topic.topics if t not in offsets]
    read = {t: dict(parts) for t, parts in offsets.items() if topic.reads(t)}
    if never or not read:
        what = ", ".join(never) if never else f"a topic matching {topic.pattern}"
        raise CheckpointError(
            "FROM_CHECKPOINT_OTHER_INPUT",
            f"input {name}: {old} never read Kafka {what} (it read "
            f"{', '.join(sorted(offsets)) or 'no topic'}); nothing was started",
            f"bind the topics OLD read, or drop {FLAG}",
        )
    now = topic.assigned
    if now is None and topic.pattern is not None:
        from slipstream.sources.kafka import partitions  # the broker, for a pattern only

        now = partitions(topic)
    if now is None:
        return read
    return {
        t: {str(p): read.get(t, {}).get(str(p), -2) for p in sorted(parts)}
        for t, parts in now.items()
    }


def _under(uri: str, folder: Path) -> bool:
    local = local_path(uri)
    return local is not None and folder in local.resolve().parents


def start_from(
    settings: Settings, pipeline: str, inputs: dict[str, BoundInput]
) -> StartFrom | None:
    """This run's start (`--from-checkpoint`, or the one its checkpoint recorded), or None.
    Refuses, before Spark starts: OLD missing, OLD the same as this run's checkpoint, a
    checkpoint that already started from something else, or from nothing."""
    root = settings.checkpoint_root
    recorded = read_record(root)
    given = settings.from_checkpoint
    if given is None:
        return recorded
    old = resolve_old(given, pipeline)
    if old.resolve() == Path(root).resolve():
        raise CheckpointError(
            "FROM_CHECKPOINT_SAME",
            f"{FLAG} {given} is this run's own checkpoint ({root}); nothing was started",
            "give the new version its own: --state-dir NEW_DIR (or --checkpoint NEW_DIR) "
            f"with {FLAG} {given}",
        )
    if recorded is not None:
        if recorded.old.resolve() == old.resolve():
            return recorded  # a restart: the position taken at the first start
        raise _not_new(root, given, f"it started from {recorded.old}")
    started = _started(root)
    if started:
        raise _not_new(root, given, f"it holds queries that ran ({', '.join(started)})")
    if (
        settings.ingest_stage
        and settings.bronze_root.is_dir()
        and any(settings.bronze_root.iterdir())
    ):
        raise _not_new(root, given, f"the ingest stage's {settings.bronze_root} holds batches")
    return take_position(old, inputs)


def _not_new(root: Path, given: Path, why: str) -> CheckpointError:
    return CheckpointError(
        "FROM_CHECKPOINT_NOT_NEW",
        f"{FLAG} {given} starts a new checkpoint, and {root} is not new: {why}; "
        "nothing was started",
        "give a new one: --state-dir NEW_DIR (or --checkpoint NEW_DIR); or run on this "
        f"one without {FLAG}",
    )


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
