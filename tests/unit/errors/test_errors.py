"""The error catalog: every code is raised somewhere in the code and triggered by a test; the
codes no other test file reaches are triggered here (no Spark)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from slipstream.app import operate
from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.lifecycle import CheckpointLock
from slipstream.core.specs import SinkSpec
from slipstream.errors import CODES, SlipstreamError
from slipstream.runtime import runner
from slipstream.settings.config import load_settings, read_config_file
from slipstream.sinks import make_sink

ROOT = Path(__file__).resolve().parents[3]


def test_every_code_is_raised_in_the_code_and_reached_by_a_test() -> None:
    source = "\n".join(
        p.read_text() for p in (ROOT / "src" / "slipstream").rglob("*.py") if p.name != "errors.py"
    )
    source += (
        (ROOT / "src" / "slipstream" / "errors.py").read_text().split("class SlipstreamError")[1]
    )
    tests = "\n".join(
        p.read_text() for p in (ROOT / "tests").rglob("test_*.py") if p.name != "test_errors.py"
    )
    tests += Path(__file__).read_text().split("\n# ---- triggers\n")[1]
    never_raised = [c for c in CODES if not re.search(rf'"{c}"', source)]
    never_tested = [c for c in CODES if c not in tests]
    assert not never_raised, f"codes nothing raises (delete them or raise them): {never_raised}"
    assert not never_tested, f"codes no test triggers: {never_tested}"


# ---- triggers
def code_of(call: object) -> str:
    with pytest.raises(SlipstreamError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code


def test_config_file_missing_or_not_toml(tmp_path: Path) -> None:
    assert code_of(lambda: read_config_file(tmp_path / "absent.toml")) == "CONFIG_FILE"
    bad = tmp_path / "bad.toml"
    bad.write_text("window = [unclosed\n")
    assert code_of(lambda: read_config_file(bad)) == "CONFIG_FILE"


def test_source_the_pipeline_cannot_read() -> None:
    settings = load_settings("mobile", {"source": "socket"}, environ={})
    assert code_of(lambda: runner.prepare(settings)) == "SOURCE_NOT_SUPPORTED"


def test_sink_kind_nobody_registered() -> None:
    assert code_of(lambda: make_sink(SinkSpec("nosuch"), Path("db"))) == "SINK_UNKNOWN"


def test_reset_not_confirmed_deletes_nothing(tmp_path: Path) -> None:
    settings = load_settings("mobile", {"state_dir": tmp_path}, environ={})
    settings.checkpoint_root.mkdir(parents=True)
    answer = io.StringIO("not-mobile\n")
    reset = lambda: reset_command(  # noqa: E731
        settings, outputs=False, yes=False, out=io.StringIO(), confirm_input=answer
    )
    assert code_of(reset) == "RESET_REFUSED"
    assert settings.checkpoint_root.is_dir()


def test_reset_of_folders_and_tables_slipstream_did_not_make_is_refused(tmp_path: Path) -> None:
    """`--checkpoint .` or a parquet sink pointed at a folder of one's own files, or a table
    that slipstream never wrote: refused with RESET_NOT_OURS, and nothing is touched."""
    import sqlite3

    own = tmp_path / "my-work"
    own.mkdir()
    (own / "notes.txt").write_text("keep me")
    for flags, outputs in (
        ({"checkpoint": own}, False),  # the checkpoint flag pointed at a folder of one's own
        ({"sink": f"parquet:{own}", "mode": "append"}, True),
    ):
        settings = load_settings("mobile", {"state_dir": tmp_path / "st", **flags}, environ={})
        with pytest.raises(SlipstreamError) as raised:
            reset_command(settings, outputs=outputs, yes=True, out=io.StringIO())
        assert raised.value.code == "RESET_NOT_OURS" and str(own) in raised.value.message
        assert (own / "notes.txt").read_text() == "keep me"
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE mobile_action_counts (x INTEGER)")
        conn.execute("INSERT INTO mobile_action_counts VALUES (1)")
    settings = load_settings("mobile", {"state_dir": tmp_path / "st", "sink": f"sqlite:{db}"},
                             environ={})  # fmt: skip
    checkpoint = settings.checkpoint_root
    checkpoint.mkdir(parents=True)
    (checkpoint / ".slipstream.lock").write_text("")  # a checkpoint slipstream made
    reset = lambda: reset_command(settings, outputs=True, yes=True, out=io.StringIO())  # noqa: E731
    assert code_of(reset) == "RESET_NOT_OURS"  # the table is in no ledger
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT x FROM mobile_action_counts").fetchall() == [(1,)]
    assert checkpoint.is_dir()  # checked before anything was deleted
    # without --outputs, the checkpoint (marked) goes, and only it
    assert reset_command(settings, outputs=False, yes=True, out=io.StringIO()) == 0
    assert not checkpoint.exists() and own.is_dir()


def test_a_bad_table_name_is_refused_before_spark_starts(tmp_path: Path) -> None:
    from slipstream.runtime import runner

    settings = load_settings(
        "mobile", {"state_dir": tmp_path, "table": 'counts"; DROP TABLE x; --'}, environ={}
    )
    assert code_of(lambda: runner.prepare(settings, check_source=False)) == "SINK_BAD_TARGET"


def test_stop_of_a_run_that_does_not_stop(tmp_path: Path) -> None:
    settings = load_settings("mobile", {"state_dir": tmp_path}, environ={})
    with CheckpointLock(settings.checkpoint_root):  # a "run" that holds it and never stops
        stop = lambda: operate.stop(settings, io.StringIO(), timeout=0.3)  # noqa: E731
        assert code_of(stop) == "STOP_TIMEOUT"


@pytest.mark.parametrize(
    "table",
    ["_slipstream_batches", "_SLIPSTREAM_BATCHES", "_slipstream_stage_counts", "sqlite_master",
     "sqlite_sequence", "SQLITE_stat1", "pg_class"],
)  # fmt: skip
def test_a_reserved_table_name_is_refused_before_spark_starts(tmp_path: Path, table: str) -> None:
    """issue 29 item 9: `--table _slipstream_batches` turned the ledger into a data table (every
    later run and reset into that database failed), `--table sqlite_master` failed mid-batch."""
    from slipstream.runtime import runner

    for sink in ("sqlite", "postgresql://localhost/db"):
        settings = load_settings(
            "mobile", {"state_dir": tmp_path, "table": table, "sink": sink}, environ={}
        )
        with pytest.raises(SlipstreamError) as refused:
            runner.prepare(settings, check_source=False)
        assert refused.value.code == "SINK_RESERVED_TABLE", refused.value
    assert not (tmp_path / "slipstream.db").exists()  # refused before the database was touched
    ok = load_settings("mobile", {"state_dir": tmp_path, "table": "slipstream_batches"}, environ={})
    runner.prepare(ok, check_source=False)  # a name that only looks alike is taken


def test_checkpoint_of_the_other_kind_is_refused_both_ways(tmp_path: Path) -> None:
    """No Spark: the checks before any query starts (runtime/ingest_stage.py)."""
    from slipstream.runtime import runner
    from slipstream.runtime.ingest_stage import MARK, check_checkpoints
    from slipstream.settings.config import load_settings

    (tmp_path / "in").mkdir()
    flags = {"input": str(tmp_path / "in"), "state_dir": tmp_path / "state"}
    plain = runner.prepare(load_settings("mobile", flags, environ={}))
    checkpoint = plain.outputs["counts"].ctx.checkpoint
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text("{}")  # started, killed before its first offset
    (checkpoint / "offsets").mkdir()
    (checkpoint / "offsets" / ".0.tmp").write_text("v1")
    check_checkpoints(plain, {"actions"})  # it read nothing: either kind may go on from it
    (checkpoint / "offsets" / "0").write_text("v1")  # a run without the ingest stage made it
    check_checkpoints(plain, set())  # the same kind: it goes on
    assert code_of(lambda: check_checkpoints(plain, {"actions"})) == (
        "CHECKPOINT_FROM_OLDER_VERSION"
    )
    (checkpoint / MARK).write_text("")  # one made with the ingest stage
    check_checkpoints(plain, {"actions"})
    assert code_of(lambda: check_checkpoints(plain, set())) == "CHECKPOINT_FROM_INGEST_STAGE"
