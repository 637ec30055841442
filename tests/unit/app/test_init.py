"""`slipstream init NAME`: a new pipeline module and its test from the template, ready to run
and to pass pytest (issue 30, "Also build")."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slipstream.app.cli import main
from slipstream.errors import ConfigError
from slipstream.pipelines.registry import load
from slipstream.tools.scaffold import init


def test_init_writes_a_pipeline_the_registry_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    assert main(["init", "page_views", "--dir", str(tmp_path)], out=out) == 0
    assert (tmp_path / "page_views.py").is_file() and (tmp_path / "test_page_views.py").is_file()
    assert "slipstream run page_views:PageViews --input landing" in out.getvalue()
    monkeypatch.syspath_prepend(str(tmp_path))
    pipeline = load("page_views:PageViews")  # its declaration checked, no Spark
    assert pipeline.name == "page_views"
    assert [i.name for i in pipeline.inputs] == ["views"]
    assert [p.name for p in pipeline.params] == ["window", "watermark"]
    (counts,) = pipeline.outputs
    assert counts.key == ("window_start", "user_id")
    assert set(counts.modes) == {"update", "append", "complete"}


def test_init_refuses_a_bad_name_and_never_overwrites(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        init("Page-Views", tmp_path)
    assert err.value.code == "CONFIG_BAD_VALUE"
    init("clicks", tmp_path)
    with pytest.raises(ConfigError) as err:
        init("clicks", tmp_path)
    assert "would overwrite" in err.value.message


@pytest.mark.parametrize("name", ["json", "pyspark", "csv", "os", "test", "pytest"])
def test_init_refuses_a_name_that_shadows_a_module_before_writing(
    tmp_path: Path, name: str
) -> None:
    """issue 43 break 6: `init json` was accepted; its module shadows the standard library (or
    an installed package): the next command failed with UNKNOWN_PIPELINE, the test could not
    import."""
    folder = tmp_path / "new"
    with pytest.raises(ConfigError) as err:
        init(name, folder)
    assert err.value.code == "INIT_NAME_SHADOWS", err.value.render()
    assert name in err.value.message and "e.g." in err.value.fix
    assert not folder.exists()  # nothing written


@pytest.mark.parametrize("length", [57, 260, 300])
def test_init_refuses_a_name_too_long_before_writing(tmp_path: Path, length: int) -> None:
    """issue 43 break 7: a 260-300 character name was INTERNAL_ERROR (ENAMETOOLONG)."""
    name = "v" * length
    out = io.StringIO()
    assert main(["init", name, "--dir", str(tmp_path / "new")], out=out) == 2  # refused
    with pytest.raises(ConfigError) as err:
        init(name, tmp_path / "new")
    assert err.value.code == "CONFIG_BAD_VALUE" and str(length) in err.value.message
    assert not (tmp_path / "new").exists()
    assert init("v" * 56, tmp_path / "new")  # the longest: its table v..v_counts, 63 characters


def test_init_files_follow_the_umask_and_no_empty_cd_step(tmp_path: Path) -> None:
    """issue 44: the command line's private umask (0077, for state) made the new module and
    test 0600; and `next: cd .` was printed for the current folder."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os; os.umask(0o022); "
            "import sys; sys.argv = ['slipstream', 'init', 'clicks']; "
            "from slipstream.app.cli import entry; raise SystemExit(entry())",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in ("clicks.py", "test_clicks.py"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644, name
    assert "cd ." not in done.stdout and "python -m pytest test_clicks.py" in done.stdout
    other = tmp_path / "elsewhere"
    out = io.StringIO()
    assert main(["init", "views", "--dir", str(other)], out=out) == 0
    assert f"cd {other}" in out.getvalue()


# The generated test passing under pytest, as written: the tutorial's `python -m pytest
# test_page_views.py`, run by tests/e2e/docs/test_docs_commands.py (one Spark run, not two).
