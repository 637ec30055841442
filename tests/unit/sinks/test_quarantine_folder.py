"""An input's quarantine folder written by its owner query's tasks (sinks/quarantine.py): which
of its files are committed, whose it is, and what a Connect server without the function gets.
The files are made by hand, as the JVM function names them; what counts is decided here from
the checkpoint's commit log by hand too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.checkpoint.lifecycle import LOCK_FILE
from slipstream.core.specs import SinkSpec
from slipstream.errors import CheckpointError, ConfigError
from slipstream.ingest.quarantine import EXTENSION, register
from slipstream.runtime.ownership import claim_quarantines
from slipstream.sinks.base import SinkContext
from slipstream.sinks.quarantine import QuarantineFolder, quarantine_files
from slipstream.sinks.spark_sinks import write_mark


def task_file(folder: Path, batch: int, app: str, part: int, records: int, mtime: float) -> Path:
    path = folder / f"batch-{batch}.{app}.part-{part:05d}.json"
    path.write_text("".join(json.dumps({"raw": f"{batch}-{i}"}) + "\n" for i in range(records)))
    os.utime(path, (mtime, mtime))
    return path


def commit(checkpoint: Path, *batches: int, planned: int | None = None) -> None:
    for log, upto in (("commits", batches), ("offsets", (*batches, planned))):
        (checkpoint / log).mkdir(parents=True, exist_ok=True)
        for b in upto:
            if b is not None:
                (checkpoint / log / str(b)).write_text("v1\n{}\n")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "quarantine" / "p" / "events"
    folder.mkdir(parents=True)
    return folder


def test_committed_batches_only_and_of_each_the_last_application(
    folder: Path, tmp_path: Path
) -> None:
    """Batch 0 written once; batch 1 by app-a (killed) and again by app-b (its replay, newer);
    batch 2 not committed. Counted: batch 0, and batch 1 as app-b wrote it."""
    checkpoint = tmp_path / "checkpoints" / "p" / "views"
    commit(checkpoint, 0, 1, planned=2)
    write_mark(folder, checkpoint)
    b0 = task_file(folder, 0, "app-a", 0, 2, 100)
    task_file(folder, 1, "app-a", 0, 3, 200)  # the killed attempt: one part of two renamed
    b1 = [task_file(folder, 1, "app-b", p, 3, 300 + p) for p in (0, 1)]
    task_file(folder, 2, "app-b", 0, 4, 400)  # in flight: not committed
    (folder / ".batch-2.app-b.part-00001.json.7.tmp").write_text("{}\n")  # a task's hidden file
    assert quarantine_files(folder) == [b0, *b1]
    ctx = SinkContext("p", "p.quarantine.events", "q", (), "append", checkpoint.parent / "x")
    assert QuarantineFolder(SinkSpec("json", str(folder))).foreign_batches(ctx) is None


def test_a_folder_of_batches_no_checkpoint_here_planned_is_foreign(
    folder: Path, tmp_path: Path
) -> None:
    """The mark names a checkpoint of another root (a run with `--checkpoint NEW`), or one that
    is gone (a reset without --outputs): its task files would be read as the new query's."""
    old = tmp_path / "old" / "p" / "views"
    commit(old, 0)
    write_mark(folder, old)
    task_file(folder, 0, "app-a", 0, 1, 100)
    new = tmp_path / "checkpoints" / "p"
    ctx = SinkContext("p", "p.quarantine.events", "q", (), "append", new / "quarantine.events")
    held = QuarantineFolder(SinkSpec("json", str(folder))).foreign_batches(ctx)
    assert held is not None and "batches up to 0" in held and "no checkpoint" in held
    # the checkpoint gone: every batch it holds is shown (and refused to a new one)
    write_mark(folder, new / "views")
    assert [p.name for p in quarantine_files(folder)] == ["batch-0.app-a.part-00000.json"]


def test_another_output_writing_a_quarantine_with_batches_is_refused(
    folder: Path, tmp_path: Path
) -> None:
    """In an earlier run output `views` wrote the quarantine; now `archive` would (views off):
    its batch ids are not views', so nothing starts. A folder without task files is claimed."""
    root = tmp_path / "checkpoints" / "p"
    commit(root / "views", 0)
    (root / "archive").mkdir(parents=True)
    write_mark(folder, root / "views")
    task_file(folder, 0, "app-a", 0, 1, 100)
    ctx = SinkContext("p", "p.archive", "a", (), "append", root / "archive")
    query: Any = SimpleNamespace(output=SimpleNamespace(ctx=ctx), quarantines={"events": folder})
    with pytest.raises(CheckpointError) as refused:
        claim_quarantines([query])
    assert refused.value.code == "OUTPUT_BELONGS_TO_OTHER_CHECKPOINT"
    assert "p.archive" in refused.value.message and "--outputs" in refused.value.fix
    for path in folder.glob("batch-*"):
        path.unlink()
    claim_quarantines([query])
    assert json.loads((folder / ".slipstream-output").read_text())["checkpoint"] == str(
        (root / "archive").resolve()
    )


def test_a_connect_server_without_the_function_is_refused_naming_the_fix() -> None:
    """A Spark Connect session (no JVM here) whose server lacks slipstream's extension."""

    class Listed:
        def count(self) -> int:
            return 0

    class ConnectLike:
        def sql(self, text: str) -> Listed:
            assert "slipstream_quarantine" in text
            return Listed()

    with pytest.raises(ConfigError) as refused:
        register(ConnectLike())  # type: ignore[arg-type]
    assert refused.value.code == "CONNECT_NOT_SUPPORTED"
    assert EXTENSION in refused.value.fix and "--jars" in refused.value.fix


def test_resetting_the_output_that_wrote_a_quarantine_clears_it_too(tmp_path: Path) -> None:
    """`reset mobile --outputs counts`: its new checkpoint reads every record again, so the
    quarantine its query wrote goes with it (else the next run is refused: batches no
    checkpoint planned)."""
    import io

    from slipstream.app.reset import reset as reset_command
    from slipstream.settings.config import load_settings

    settings = load_settings("mobile", {"state_dir": tmp_path / "st"}, environ={})
    checkpoint = settings.checkpoint_root / "counts"
    commit(checkpoint, 0)
    (settings.checkpoint_root / LOCK_FILE).write_text("")  # slipstream's mark on a checkpoint
    folder = settings.quarantine_root / "actions"
    folder.mkdir(parents=True)
    write_mark(folder, checkpoint)
    task_file(folder, 0, "app-a", 0, 1, 100)
    said = io.StringIO()
    assert reset_command(settings, outputs="counts", yes=True, out=said) == 0
    assert not folder.exists() and not checkpoint.exists()
    assert str(folder) in said.getvalue()


def test_a_classic_session_without_the_jar_is_refused_naming_jars() -> None:
    """A JVM spark-submit started without `--jars`: the function cannot be registered, so the
    run stops before any query starts, naming the flag (docs/scaling.md)."""

    class WithoutTheJar:
        _jvm = object()
        _jsparkSession = object()

    session = WithoutTheJar()
    session.__dict__["_slipstream_jvm_parser"] = False  # the jar's classes did not load
    with pytest.raises(ConfigError) as refused:
        register(session)  # type: ignore[arg-type]
    assert refused.value.code == "JVM_PARSER_MISSING" and "--jars" in refused.value.fix
