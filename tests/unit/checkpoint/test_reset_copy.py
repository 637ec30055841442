"""`reset --outputs` on a state dir copied with `cp -a` deleted the original's outputs: the
copy's `.slipstream-outputs.json` named them by absolute path. A reset now deletes a recorded
output only while it belongs to the checkpoint being reset (its mark, its record's checkpoint,
its ledger), and a run records the outputs that lie in its state dir relative to its
checkpoint, so a copy's record names the copy's own outputs. No Spark: the state dir is made
the way a mobile run leaves it (checkpoint logs and metadata, SQLite table and ledger,
quarantine files with their mark, the record)."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.lifecycle import LOCK_FILE, CheckpointLock
from slipstream.runtime import runner
from slipstream.runtime.ownership import RECORD, record_outputs
from slipstream.settings.config import load_settings
from slipstream.sinks.database import LEDGER_TABLE
from slipstream.sinks.spark_sinks import OUTPUT_MARK, write_mark
from slipstream.sinks.sqlite import SqliteSink

ROWS = [("2026-01-01T00:00:00Z", "open", 3), ("2026-01-01T00:00:00Z", "close", 2)]


def run_leaves(state: Path, *, older: bool = False) -> Path:
    """A mobile state dir as a run leaves it; `older`: its record and marks as a version
    before this fix wrote them (absolute paths, empty marks)."""
    settings = load_settings("mobile", {"state_dir": state}, environ={})
    prepared = runner.prepare(settings, check_source=False)
    root = settings.checkpoint_root
    root.mkdir(parents=True)
    (root / LOCK_FILE).write_text("")
    for number, (name, out) in enumerate(prepared.targets.items()):
        for log in ("offsets", "commits"):
            (out.ctx.checkpoint / log).mkdir(parents=True)
            (out.ctx.checkpoint / log / "0").write_text("v1\n{}\n")
        (out.ctx.checkpoint / "metadata").write_text(json.dumps({"id": f"query-{number}"}))
        if isinstance(out.sink, SqliteSink):
            with sqlite3.connect(out.sink.path) as conn:
                conn.execute(f'CREATE TABLE "{out.ctx.table}" (window TEXT, action TEXT, n INT)')
                conn.executemany(f'INSERT INTO "{out.ctx.table}" VALUES (?, ?, ?)', ROWS)
                conn.execute(
                    f"CREATE TABLE {LEDGER_TABLE} (query_id TEXT, batch_id INTEGER, pipeline "
                    "TEXT, target_table TEXT, rows INTEGER, committed_at TEXT, "
                    "PRIMARY KEY (query_id, batch_id))"
                )
                conn.execute(
                    f"INSERT INTO {LEDGER_TABLE} VALUES (?, 0, 'mobile', ?, 2, 'then')",
                    (f"query-{number}", out.ctx.table),
                )
        else:  # the quarantine: a file sink's folder and its mark
            folder = out.sink.directory
            write_mark(folder, out.ctx.checkpoint)
            if older:
                (folder / OUTPUT_MARK).write_text("")
            (folder / "part-00000.json").write_text('{"value": "not json"}\n')
            (folder / "_spark_metadata").mkdir()
            (folder / "_spark_metadata" / "0").write_text("v1\n{}\n")
        assert name == out.name
    with CheckpointLock(root):
        record_outputs(prepared)
    if older:
        entries = json.loads((root / RECORD).read_text())
        keys = ("name", "sink", "table", "mode")
        (root / RECORD).write_text(json.dumps([{k: e[k] for k in keys} for e in entries]))
    return root


def snapshot(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in state.rglob("*") if p.is_file()}


def table_rows(database: Path, table: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(database) as conn:
        return sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall())


@pytest.mark.parametrize("older", [False, True], ids=["record", "older-record"])
def test_reset_on_a_copy_leaves_the_original(tmp_path: Path, older: bool) -> None:
    original = tmp_path / "st"
    run_leaves(original, older=older)
    before = snapshot(original)
    copy = tmp_path / "st-copy"
    shutil.copytree(original, copy, symlinks=True)  # cp -a: copy2 keeps times and modes
    settings = load_settings("mobile", {"state_dir": copy}, environ={})
    shown = io.StringIO()
    assert reset_command(settings, outputs=True, yes=True, out=shown) == 0
    # the original: every byte as it was, its rows and quarantine files too
    assert snapshot(original) == before
    assert table_rows(original / "slipstream.db", "mobile_action_counts") == sorted(ROWS)
    assert (original / "quarantine" / "mobile" / "actions" / "part-00000.json").is_file()
    # the copy's own outputs and checkpoint are gone (its database keeps no output table)
    assert not settings.checkpoint_root.exists()
    assert not (copy / "quarantine" / "mobile" / "actions").exists()
    with sqlite3.connect(copy / "slipstream.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "mobile_action_counts" not in tables
        assert conn.execute(f"SELECT count(*) FROM {LEDGER_TABLE}").fetchone() == (0,)
    said = shown.getvalue()
    assert str(original / "slipstream.db") not in said.split("removed:")[1]
    if older:  # the record named the original's outputs: each left, in one line
        lines = [line for line in said.splitlines() if line.endswith(": not deleted")]
        assert len(lines) == 2, said
        assert all(str(original.resolve() / "checkpoints" / "mobile") in ln for ln in lines)
    else:  # the record named the copy's own outputs: nothing to leave
        assert "not deleted" not in said


def test_reset_keeps_a_recorded_folder_another_checkpoint_marked(tmp_path: Path) -> None:
    """A folder this checkpoint recorded that another checkpoint wrote since (its mark names
    that one) is left; the same folder still marked by this checkpoint is deleted."""
    catalog = tmp_path / "articles.csv"
    catalog.write_text("article_id,title,section\n")
    archive = tmp_path / "archive"
    base = {"state_dir": tmp_path / "st", "input": [str(tmp_path / "in"), f"catalog={catalog}"]}
    flags = {**base, "sink": f"archive=parquet:{archive}"}
    prepared = runner.prepare(load_settings("trending", flags, environ={}), check_source=False)
    with CheckpointLock(prepared.settings.checkpoint_root):
        record_outputs(prepared)
    other = tmp_path / "other" / "archive"
    write_mark(archive, other)  # another checkpoint wrote it since
    (archive / "part-0.parquet").write_bytes(b"PAR1")
    plain = load_settings("trending", base, environ={})
    shown = io.StringIO()
    assert reset_command(plain, outputs=True, yes=True, out=shown) == 0
    assert (archive / "part-0.parquet").read_bytes() == b"PAR1"
    assert f"belongs to checkpoint {other.resolve()} (a copy's record?): not deleted" in (
        shown.getvalue()
    )
    with CheckpointLock(prepared.settings.checkpoint_root):
        record_outputs(prepared)
    write_mark(archive, prepared.outputs["archive"].ctx.checkpoint)  # this one's again
    assert reset_command(plain, outputs=True, yes=True, out=io.StringIO()) == 0
    assert not archive.exists()
