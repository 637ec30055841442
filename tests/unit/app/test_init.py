"""`slipstream init NAME`: a new pipeline module and its test from the template, ready to run
and to pass pytest (issue 30, "Also build")."""

from __future__ import annotations

import io
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


# The generated test passing under pytest, as written: the tutorial's `python -m pytest
# test_page_views.py`, run by tests/e2e/docs/test_docs_commands.py (one Spark run, not two).
