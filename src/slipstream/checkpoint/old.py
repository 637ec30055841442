"""OLD, the checkpoint a new version starts from (`run --from-checkpoint OLD`): found from what
was given, refused when a new checkpoint cannot start from it, and its position read from its
files alone (no Spark) as of each of its queries' last committed batch. runtime/from_checkpoint.py
binds a run's inputs to that position."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slipstream.checkpoint.integrity import damages
from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import files_read_by, kafka_positions
from slipstream.checkpoint.start import StartFrom, read_record
from slipstream.errors import CheckpointError

FLAG = "--from-checkpoint"


@dataclass(frozen=True)
class OldPosition:
    """Where OLD stands: every file its queries' committed batches read, and of each Kafka
    partition the next offset after the furthest of them (nothing OLD's outputs counted is
    counted again)."""

    old: Path  # OLD's checkpoint (the pipeline's folder of query checkpoints)
    batches: dict[str, int]  # OLD's queries and the last batch each committed
    files: frozenset[str]
    offsets: dict[str, dict[str, int]]  # topic -> partition -> next offset


def start_of(
    root: Path, given: Path | None, pipeline: str, bronze: Path | None
) -> StartFrom | OldPosition | None:
    """The start of the checkpoint `root`: the one it recorded at its first start (a restart),
    None (no `--from-checkpoint`: from the beginning), or OLD's position now, to be taken.
    Refuses OLD missing, OLD the same as `root`, a `root` that already started from something
    else or from nothing (`bronze`: the ingest stage's folder, when the run stages)."""
    recorded = read_record(root)
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
    if bronze is not None and bronze.is_dir() and any(bronze.iterdir()):
        raise _not_new(root, given, f"the ingest stage's {bronze} holds batches")
    return read_position(old)


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


def read_position(old: Path) -> OldPosition:
    """OLD's position now, from its logs; CHECKPOINT_DAMAGED when they cannot say it."""
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
    return OldPosition(old, batches, frozenset(read), offsets)


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


def _not_new(root: Path, given: Path, why: str) -> CheckpointError:
    return CheckpointError(
        "FROM_CHECKPOINT_NOT_NEW",
        f"{FLAG} {given} starts a new checkpoint, and {root} is not new: {why}; "
        "nothing was started",
        "give a new one: --state-dir NEW_DIR (or --checkpoint NEW_DIR); or run on this "
        f"one without {FLAG}",
    )
