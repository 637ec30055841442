"""The small things a new user meets first (issue 30, item 9), without Spark."""

from __future__ import annotations

import io

import pytest

from slipstream.app.cli import main


def run_cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = io.StringIO()
    try:
        code = main(list(argv), out=out)
    except SystemExit as exc:  # argparse's --help, --version and usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out + captured.err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_cli("--version", capsys=capsys)
    assert code == 0
    assert text.startswith("slipstream ") and "PySpark 4.3" in text


def test_run_help_without_a_pipeline_is_the_commands_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = run_cli("run", "--help", capsys=capsys)
    assert code == 0, text
    assert "usage: slipstream run" in text and "--trigger" in text
    assert "the following arguments are required" not in text


def test_feed_help_explains_port_and_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run_cli("feed", "--help", capsys=capsys)
    assert code == 0
    assert "the port to serve on" in text and "the address to listen on" in text


def test_another_pipelines_parameter_is_refused_naming_this_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = run_cli("run", "mobile", "--slide", "1m", capsys=capsys)
    assert code == 2
    assert "[CONFIG_UNKNOWN_KEY] mobile has no parameter --slide" in text
    assert "its parameters: --window, --watermark" in text
    assert "usage: slipstream [-h]" not in text


def test_a_finite_run_with_nothing_new_says_so() -> None:
    from types import SimpleNamespace

    from slipstream.core.specs import TriggerSpec
    from slipstream.monitor.totals import RunTotals
    from slipstream.runtime.summary import summary

    settings = SimpleNamespace(
        trigger=TriggerSpec.parse("available-now"), checkpoint_root="state/checkpoints/mobile"
    )
    prepared = SimpleNamespace(settings=settings, outputs={}, inputs={}, plans={}, quarantines={})
    totals = RunTotals()
    run_ = SimpleNamespace(
        totals=totals, prepared=prepared, dead_letter=None, accounts=lambda: totals.by_query
    )
    out = io.StringIO()
    summary(run_, out)  # type: ignore[arg-type]
    assert "nothing new to do" in out.getvalue()
    assert "state/checkpoints/mobile" in out.getvalue()


def test_reset_in_an_empty_folder_leaves_it_empty(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    monkeypatch.chdir(folder)
    code, text = run_cli("reset", "mobile", "--yes", capsys=capsys)
    assert code == 0, text
    assert "nothing (already clean)" in text
    assert list(folder.iterdir()) == []


def test_status_without_runs_names_the_folder_it_read(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run_cli("status", "--state-dir", str(tmp_path), capsys=capsys)
    assert code == 0
    assert f"(read {tmp_path}/events)" in text


def test_the_dead_letter_follows_the_checkpoint_or_its_own_flag(tmp_path: object) -> None:
    """issue 30, item 4: a new --checkpoint (the way out of OUTPUT_BELONGS_TO_OTHER_CHECKPOINT)
    gets a new dead-letter, instead of one that belongs to another checkpoint."""
    from pathlib import Path

    from slipstream.settings.config import load_settings

    default = load_settings("mobile", {}, environ={})
    assert default.late_root == Path("state/late/mobile")
    moved = load_settings("mobile", {"checkpoint": "state/ck-parquet"}, environ={})
    assert moved.late_root == Path("state/late/ck-parquet")
    own = load_settings(
        "mobile", {"checkpoint": "state/ck-parquet", "dead_letter": "dl"}, environ={}
    )
    assert own.late_root == Path("dl")
    config = Path(str(tmp_path)) / "s.toml"
    config.write_text('dead-letter = "late-rows"\n')
    assert load_settings("mobile", {}, config, environ={}).late_root == Path("late-rows")


def test_check_refuses_what_needs_no_plan_before_spark_starts(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 30, item 6: `run` refused a file sink in update mode at once, `check` only after
    starting Spark. Here Spark cannot start (conftest): the refusal comes before it."""
    from pathlib import Path

    from slipstream.tools.demo import copy_samples

    monkeypatch.chdir(Path(str(tmp_path)))
    copy_samples(Path("landing"), "mobile")
    args = ("check", "mobile", "--input", "landing", "--sink", "parquet:out", "--mode", "update")
    code, text = run_cli(*args, capsys=capsys)
    assert code == 2, text
    assert "refused [FILE_SINK_APPEND_ONLY]" in text
