"""The event generators' atomic writer and the progress bar. Pure Python, no Spark."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from slipstream.generators.files import write_atomically
from slipstream.progressbar import ProgressBar

# --- write_atomically -------------------------------------------------------------------------


def test_write_atomically_writes_lines_and_returns_the_final_path(tmp_path: Path) -> None:
    path = write_atomically(tmp_path, "out.jsonl", iter(["a", "b"]))
    assert path == tmp_path / "out.jsonl"
    assert path.read_bytes() == b"a\nb\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_write_atomically_never_exposes_a_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_replace = os.replace
    renames: list[tuple[Path, Path]] = []

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        src_path, dst_path = Path(src), Path(dst)
        assert not dst_path.exists(), "the final name must not exist before the rename"
        assert src_path.name.startswith((".", "_")), "Spark must ignore the temporary name"
        assert src_path.parent == dst_path.parent, "rename within one directory (atomic)"
        assert src_path.read_text() == "".join(f"{i}\n" for i in range(1000)), "complete"
        renames.append((src_path, dst_path))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_atomically(tmp_path, "views-00000000.jsonl", (str(i) for i in range(1000)))
    assert len(renames) == 1
    assert not renames[0][0].exists()
    assert [p.name for p in tmp_path.iterdir()] == ["views-00000000.jsonl"]


def test_write_atomically_leaves_nothing_behind_when_writing_fails(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("old\n")

    def failing() -> Iterator[str]:
        yield "first"
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        write_atomically(tmp_path, "new.txt", failing())
    with pytest.raises(RuntimeError, match="source broke"):
        write_atomically(tmp_path, "kept.txt", failing())
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
    assert (tmp_path / "kept.txt").read_text() == "old\n"


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_write_atomically_rejects_names_that_are_not_plain(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="name must be a plain file name"):
        write_atomically(tmp_path, name, ["x"])


# --- progress bar -----------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Ticker:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_progress_bar_is_silent_when_the_stream_is_not_a_tty() -> None:
    out = io.StringIO()
    with ProgressBar(10, "work", stream=out) as bar:
        bar.update(10)
    assert bar.done == 10
    assert out.getvalue() == ""


def test_progress_bar_draws_on_a_tty_and_ends_with_one_summary_line() -> None:
    out = _Tty()
    with ProgressBar(4, "work", stream=out, clock=_Ticker()) as bar:
        bar.update(1)
        bar.update(3)
    text = out.getvalue()
    assert "work [" in text and " 25.0% 1/4" in text and "100.0% 4/4" in text
    assert text.endswith("\n") and text.count("\n") == 1
    assert text.rsplit("\r", 1)[1].startswith("work: 4/4 in ")


def test_progress_bar_can_be_forced_and_handles_an_unknown_total() -> None:
    out = io.StringIO()
    with ProgressBar(None, "lines", stream=out, enabled=True, clock=_Ticker()) as bar:
        bar.update(1500)
    assert "lines 1,500" in out.getvalue()
    assert out.getvalue().rsplit("\r", 1)[1].startswith("lines: 1,500 in ")


def test_progress_bar_marks_an_interrupted_run_and_lets_the_error_through() -> None:
    out = io.StringIO()
    with (
        pytest.raises(KeyboardInterrupt),
        ProgressBar(10, "work", stream=out, enabled=True, clock=_Ticker()) as bar,
    ):
        bar.update(2)
        raise KeyboardInterrupt
    assert out.getvalue().endswith(" - interrupted\n")


def test_progress_bar_rejects_negative_work() -> None:
    with pytest.raises(ValueError, match="n must be >= 0"):
        ProgressBar(1, "x", enabled=False).update(-1)
    with pytest.raises(ValueError, match="total must be >= 0"):
        ProgressBar(-1, "x")
