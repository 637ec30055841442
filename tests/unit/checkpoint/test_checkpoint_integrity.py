"""issue 29 item 4 and the damaged-checkpoint list: each log of a query checkpoint corrupted
as the issue did by hand, refused before any query starts with CHECKPOINT_DAMAGED naming the
file. The checkpoints are written here in Spark's log format (a version line, then JSON lines),
as Spark 4.3 writes them for a files source; no Spark."""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from slipstream.app import commands
from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.integrity import as_state_damage, damages, refuse_damaged
from slipstream.errors import CheckpointError
from slipstream.runtime import runner
from slipstream.runtime.partitions import ROCKSDB_STORE as ROCKSDB
from slipstream.settings.config import load_settings
from slipstream.settings.session import STATE_PROVIDER as PROVIDER

QUERY_ID = "5d0f6a1e-6b1a-4a8c-9f44-1f2d3e4c5b6a"


def spark_checkpoint(root: Path, batches: int = 3, *, committed: int | None = None) -> Path:
    """A query checkpoint of `batches` planned batches over one files source (each batch one
    new log offset of two files), the first `committed` of them committed (default: all)."""
    committed = batches if committed is None else committed
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
    for batch in range(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000 + batch, "conf": {}}
        (root / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps(meta) + "\n" + json.dumps({"logOffset": batch})
        )
        entries = [
            json.dumps(
                {"path": f"file:///land/f{batch}-{i}.json", "timestamp": 1, "batchId": batch}
            )
            for i in range(2)
        ]
        (root / "sources" / "0" / str(batch)).write_text("v1\n" + "\n".join(entries))
        if batch < committed:
            (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_a_sound_checkpoint_and_a_crash_between_plan_and_commit_pass(tmp_path: Path) -> None:
    assert damages(spark_checkpoint(tmp_path / "a")) == []
    assert damages(spark_checkpoint(tmp_path / "b", committed=2)) == []  # batch 2 replayed
    assert damages(tmp_path / "new") == []  # never started


CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "offsets/1 emptied": (lambda c: (c / "offsets" / "1").write_text(""), "offsets/1"),
    "offsets/2 truncated": (lambda c: truncate(c / "offsets" / "2", 0.6), "offsets/2"),
    "offsets/2 deleted, batch 2 committed": (
        lambda c: (c / "offsets" / "2").unlink(),
        "offsets/2",
    ),
    "offsets/1 deleted": (lambda c: (c / "offsets" / "1").unlink(), "commits/1"),
    "commits/1 garbled": (
        lambda c: (c / "commits" / "1").write_bytes(b"v1\n{\x00\xff garbage"),
        "commits/1",
    ),
    "metadata garbled": (lambda c: (c / "metadata").write_text("{not json"), "metadata"),
    "metadata deleted": (lambda c: (c / "metadata").unlink(), "metadata"),
    "sources/0/0 truncated": (lambda c: truncate(c / "sources" / "0" / "0", 0.7), "sources/0/0"),
    "sources/0/1 deleted": (lambda c: (c / "sources" / "0" / "1").unlink(), "sources/0/1"),
    # issue 43 break 10: well-formed, but no file: every file was counted again
    "sources/0/0 cut to its version line": (
        lambda c: (c / "sources" / "0" / "0").write_text("v1\n"),
        "sources/0/0",
    ),
    "sources/0/2 cut to its version line": (
        lambda c: (c / "sources" / "0" / "2").write_text("v1"),
        "sources/0/2",
    ),
    # issue 43 break 2: slipstream's build record, read as "no record", let a changed window run
    "build record garbled": (
        lambda c: (c / "slipstream-build.json").write_bytes(b'{"version": 1, "mo\x00\xff'),
        "slipstream-build.json",
    ),
    "build record emptied": (
        lambda c: (c / "slipstream-build.json").write_text(""),
        "slipstream-build.json",
    ),
    "build record not an object": (
        lambda c: (c / "slipstream-build.json").write_text("[1, 2]"),
        "slipstream-build.json",
    ),
    "build record without its state": (
        lambda c: (c / "slipstream-build.json").write_text('{"version": 1, "mode": "update"}'),
        "slipstream-build.json",
    ),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_each_damage_is_found_naming_its_file(tmp_path: Path, kind: str) -> None:
    corrupt, named = CORRUPTIONS[kind]
    checkpoint = spark_checkpoint(tmp_path / "q")
    if kind == "offsets/1 deleted":  # and batch 1 not committed: a hole in the middle
        (checkpoint / "commits" / "1").unlink()
        (checkpoint / "commits" / "2").unlink()
    corrupt(checkpoint)
    found = damages(checkpoint)
    assert found, kind
    assert any(str(d.file).endswith(named) for d in found), found
    with pytest.raises(CheckpointError) as refused:
        refuse_damaged({"mobile.counts": checkpoint})
    assert refused.value.code == "CHECKPOINT_DAMAGED"
    assert "mobile.counts" in refused.value.message and "reset" in refused.value.fix


def test_a_run_on_a_damaged_checkpoint_is_refused_before_spark_starts(tmp_path: Path) -> None:
    """The CLI's run refuses it before Spark starts (a Spark start here would fail: the
    conftest points JAVA_HOME nowhere)."""
    landing = tmp_path / "landing"
    landing.mkdir()
    settings = load_settings(
        "mobile", {"state_dir": tmp_path / "state", "input": str(landing)}, environ={}
    )
    prepared = runner.prepare(settings)
    out = prepared.primary
    spark_checkpoint(Path(out.ctx.checkpoint))
    (Path(out.ctx.checkpoint) / "sources" / "0" / "0").write_text('v1\n{"path": "file:///x", "ti')
    with pytest.raises(CheckpointError) as refused:
        commands.run(settings, io.StringIO())
    assert refused.value.code == "CHECKPOINT_DAMAGED" and "sources/0/0" in refused.value.message


def with_checksum(path: Path, data: bytes, chunk: int = 512) -> Path:
    """`data` at `path` and Hadoop's checksum file beside it, as Spark's local file system
    writes them (`.NAME.crc`: magic, bytes per checksum, a CRC32 per chunk)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    sums = [zlib.crc32(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    crc = b"crc\x00" + struct.pack(">i", chunk) + b"".join(struct.pack(">I", c) for c in sums)
    path.with_name(f".{path.name}.crc").write_bytes(crc)
    return path


@pytest.mark.parametrize("damage", ["cut", "cut within a chunk", "garbled", "grown"])
def test_a_state_file_that_fails_its_checksum_is_named(tmp_path: Path, damage: str) -> None:
    checkpoint = spark_checkpoint(tmp_path / "ck", batches=2)  # state versions 1 and 2
    state = checkpoint / "state" / "0"
    sound = with_checksum(state / "0" / "1.changelog", bytes(range(256)) * 5)
    with_checksum(state / "0" / "2.changelog", bytes(range(256)) * 2)
    victim = with_checksum(state / "1" / "2.changelog", bytes(range(200)) * 7)
    with_checksum(state / "1" / "1.zip", b"")  # an empty file has no chunk
    assert damages(checkpoint) == []
    data = victim.read_bytes()
    victim.write_bytes(
        {
            "cut": data[:600],
            "cut within a chunk": data[:1100],
            "garbled": data[:700] + bytes([data[700] ^ 1]) + data[701:],
            "grown": data + b"more",
        }[damage]
    )
    found = damages(checkpoint)
    assert [d.file for d in found] == [victim], found
    assert sound not in [d.file for d in found]
    with pytest.raises(CheckpointError) as refused:
        refuse_damaged({"mobile.counts": checkpoint})
    assert refused.value.code == "CHECKPOINT_DAMAGED"
    assert "state/0/1/2.changelog" in refused.value.message and "reset" in refused.value.fix


def test_a_temporary_state_file_a_failed_task_left_cut_is_not_damage(tmp_path: Path) -> None:
    """A task that failed on a full disk left Spark's temporary file (written, then renamed
    into place when whole) cut to 0 bytes beside the checksum of what it meant to write; Spark
    never reads it, and the next run goes on (the fault campaign's seed 34 was refused
    CHECKPOINT_DAMAGED for it, issue 43)."""
    checkpoint = spark_checkpoint(tmp_path / "ck", batches=2)
    store = checkpoint / "state" / "0" / "1"
    with_checksum(store / "1.changelog", bytes(range(256)) * 2)
    with_checksum(store / "2.changelog", bytes(range(256)) * 2)
    temporary = with_checksum(store / ".3.changelog.ea54.TID8.tmp", bytes(range(256)) * 4)
    temporary.write_bytes(b"")
    assert damages(checkpoint) == []
    cut = with_checksum(store / "3.changelog", bytes(range(256)) * 4)
    cut.write_bytes(b"")  # the same file renamed into place cut: damage
    assert [d.file for d in damages(checkpoint)] == [cut]


def test_a_state_load_failure_from_spark_becomes_checkpoint_damaged(tmp_path: Path) -> None:
    """Spark's CANNOT_LOAD_STATE_STORE names no file: the code, the checkpoint's state folder
    (or the file a checksum shows) and the way out; any other failure is left alone."""
    checkpoint = spark_checkpoint(tmp_path / "ck")
    spark_error = RuntimeError(
        "py4j.Py4JException: An exception was raised by the Python Proxy.\n"
        "org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error "
        "occurred during loading state.  SQLSTATE: 58030\n\tat org.apache.spark..."
    )
    mapped = as_state_damage(spark_error, "mobile.counts", checkpoint)
    assert mapped is not None and mapped.code == "CHECKPOINT_DAMAGED"
    assert "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state." in (
        mapped.message
    )
    assert str(checkpoint / "state") in mapped.message and "reset" in mapped.fix
    assert as_state_damage(RuntimeError("[DIVIDE_BY_ZERO]"), "mobile.counts", checkpoint) is None


@pytest.mark.spark
@pytest.mark.parametrize(
    "damage", ["source log", "source log emptied", "state changelog", "state changelog deleted"]
)
def test_a_real_checkpoint_passes_and_its_damage_is_refused_then_reset_is_exact(
    spark: object, tmp_path: Path, damage: str
) -> None:
    """A checkpoint Spark wrote (two batches of a files source, a windowed count) is sound; its
    `sources/0/0` cut, or its newest state changelog cut, is refused before start naming the
    file; the way out (`reset --outputs`, run again) counts every record once (the issue:
    6,700 of 6,000 for the source log; a Java stack naming no file for the changelog)."""
    from slipstream.testing import PipelineHarness

    def harness() -> PipelineHarness:
        return PipelineHarness(
            spark, "mobile", tmp_path, mode="update", window="1ms",  # type: ignore[arg-type]
            conf={PROVIDER: ROCKSDB},  # RocksDB's changelogs (a live run's default is HDFS's)
        )  # fmt: skip

    lines = [
        json.dumps({"id": "p1", "action": "open", "ts": f"2018-03-02T10:00:{s:02d}"})
        for s in range(40)
    ]
    h = harness().start()
    try:
        h.feed(lines[:20])
        h.process()
        h.feed(lines[20:])
        h.process()
    finally:
        h.stop()
    checkpoint = Path(h.prepared.primary.ctx.checkpoint)
    for out in h.prepared.outputs.values():  # the outputs' and the quarantine's
        assert damages(Path(out.ctx.checkpoint)) == [], out.name
    if damage.startswith("source log"):
        victim = checkpoint / "sources" / "0" / "0"
    else:
        changelogs = sorted(
            (checkpoint / "state").rglob("*.changelog"),
            key=lambda p: (int(p.stem), p.stat().st_size),
        )
        victim = changelogs[-1]
    if damage == "source log emptied":  # issue 43 break 10: well-formed, read as no file
        victim.write_text("v1\n")
    elif damage == "state changelog deleted":  # issue 43 break 4: found once Spark ran
        victim.unlink()
        victim.with_name(f".{victim.name}.crc").unlink()
    else:
        truncate(victim, 0.6)
    with pytest.raises(CheckpointError) as refused:
        harness().start()
    assert refused.value.code == "CHECKPOINT_DAMAGED"
    assert str(victim.relative_to(checkpoint)) in refused.value.message
    settings = h.settings
    assert reset_command(settings, outputs=True, yes=True, out=io.StringIO()) == 0
    again = harness().start()
    try:
        rows = again.process()
    finally:
        again.stop()
    assert sum(int(r["count"]) for r in rows) == len(lines)  # each record once


def test_a_compacted_source_log_must_hold_each_log_offset_the_offsets_name(
    tmp_path: Path,
) -> None:
    """issue 43 break 10, compacted: Spark folds log offsets 0 and 1 into `1.compact`; one that
    lost log offset 0's files is as emptied as a plain file cut to its version line."""
    checkpoint = spark_checkpoint(tmp_path / "ck")
    folder = checkpoint / "sources" / "0"
    entries = [line for n in (0, 1) for line in (folder / str(n)).read_text().splitlines()[1:]]
    for n in (0, 1):
        (folder / str(n)).unlink()
    compact = folder / "1.compact"
    compact.write_text("v1\n" + "\n".join(entries))
    assert damages(checkpoint) == []
    compact.write_text("v1\n" + "\n".join(e for e in entries if '"batchId": 1' in e))
    [found] = damages(checkpoint)
    assert found.file == compact and "log offset 0" in found.what


def state_files(checkpoint: Path, versions: int, partitions: int = 2) -> Path:
    """Spark's RocksDB state of one aggregation, as it lays it out with changelog
    checkpointing: a changelog per version per partition, the operator's metadata."""
    state = checkpoint / "state" / "0"
    for part in range(partitions):
        for version in range(1, versions + 1):
            with_checksum(state / str(part) / f"{version}.changelog", bytes([version]) * 40)
    (state / "_metadata").mkdir(parents=True)
    (state / "_metadata" / "metadata").write_text("v1\n{}\n")
    (state / "0" / "_metadata").mkdir()
    (state / "0" / "_metadata" / "schema").write_text("v2\n")
    return state


def test_a_deleted_state_changelog_is_found_before_spark_starts(tmp_path: Path) -> None:
    """issue 43 break 4: deleted changelogs were CHECKPOINT_DAMAGED only once Spark loaded the
    state, after the quarantine's query had committed a batch. Batches 0-2 committed: each
    partition rebuilds version 3 from changelogs 1-3 (or a snapshot and those after it)."""
    checkpoint = spark_checkpoint(tmp_path / "ck", batches=3)
    state = state_files(checkpoint, versions=3)
    assert damages(checkpoint) == []
    (state / "1" / "2.changelog").unlink()
    [found] = damages(checkpoint)
    assert found.file == state / "1" / "2.changelog" and "is missing" in found.what
    with pytest.raises(CheckpointError) as refused:
        refuse_damaged({"mobile.counts": checkpoint})
    assert refused.value.code == "CHECKPOINT_DAMAGED" and "state/0/1/2.changelog" in (
        refused.value.message
    )
    with_checksum(state / "1" / "2.zip", b"snapshot")  # a snapshot stands in for versions 1-2
    assert damages(checkpoint) == []
    for changelog in (state / "0").glob("*.changelog"):  # every changelog of a partition
        changelog.unlink()
    assert [d.file for d in damages(checkpoint)] == [state / "0" / "1.changelog"]
