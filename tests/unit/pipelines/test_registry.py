"""Pipeline discovery: built-ins, installed entry points, module:attr, and broken modules that
report their own error (no Spark)."""

from __future__ import annotations

import io
import sys
import types
from collections.abc import Iterator
from dataclasses import replace
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from slipstream.app import commands, exits
from slipstream.errors import ConfigError
from slipstream.pipelines import registry
from slipstream.pipelines.mobile import MobilePipeline
from slipstream.tools import catalog


class Mine(MobilePipeline):
    name = "mine"
    description = "a third-party pipeline"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two installed entry points: one that loads and one whose module fails to import."""
    good = types.ModuleType("thirdparty_good")
    good.Mine = Mine  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "thirdparty_good", good)
    points = [
        EntryPoint("mine", "thirdparty_good:Mine", registry.ENTRY_POINT_GROUP),
        EntryPoint("broken", "thirdparty_missing_dependency:Broken", registry.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)
    yield


def test_builtins_load_by_name() -> None:
    assert set(registry.pipelines()) >= {"wordcount", "mobile", "trending"}
    trending = registry.get_pipeline("trending")
    assert [o.table_name for o in trending.outputs] == ["article_views", "article_views_final"]


class Clashing(MobilePipeline):
    name = "clashing"
    description = "declares a parameter that shadows a run setting, and an output twice"
    params = (*MobilePipeline.params, replace(MobilePipeline.params[0], name="sink"))
    outputs = (*MobilePipeline.outputs, *MobilePipeline.outputs)


class NoStream(MobilePipeline):
    name = "nostream"
    description = "reads tables only"
    inputs = (replace(MobilePipeline.inputs[0], static=True),)


def test_a_pipeline_that_declares_itself_wrongly_is_refused_with_each_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = types.ModuleType("declared_wrongly")
    module.Clashing, module.NoStream = Clashing, NoStream  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "declared_wrongly", module)
    with pytest.raises(ConfigError) as raised:
        registry.get_pipeline("declared_wrongly:Clashing")
    assert raised.value.code == "PIPELINE_INVALID"
    assert "shadow the run setting --sink" in raised.value.message
    assert "output 'counts' is declared twice" in raised.value.message
    with pytest.raises(ConfigError, match="declares no stream input") as raised:
        registry.get_pipeline("declared_wrongly:NoStream")
    assert raised.value.code == "PIPELINE_INVALID"


def test_installed_entry_points_are_discovered(installed: None) -> None:
    assert isinstance(registry.get_pipeline("mine"), Mine)
    loaded, broken = registry.discover()
    assert "mine" in loaded and [b.name for b in broken] == ["broken"]


def test_a_module_that_fails_to_import_reports_its_own_error(installed: None) -> None:
    with pytest.raises(ConfigError) as raised:
        registry.get_pipeline("broken")
    assert raised.value.code == "UNKNOWN_PIPELINE"
    assert "ModuleNotFoundError" in raised.value.message
    assert "thirdparty_missing_dependency" in raised.value.message
    out = io.StringIO()
    assert commands.list_pipelines(out) == exits.EXIT_FAILED
    rows = {line.split()[0]: line for line in out.getvalue().splitlines() if line.strip()}
    assert "BROKEN: " in rows["broken"] and "thirdparty_missing_dependency" in rows["broken"]
    assert "a third-party pipeline" in rows["mine"] and "counts" in rows["mine"]


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        registry.get_pipeline("trendnig")
    assert "trending" in raised.value.fix


def test_module_attr_loads_a_class_or_refuses_what_is_not_a_pipeline() -> None:
    assert isinstance(registry.get_pipeline("tests.unit.pipelines.test_registry:Mine"), Mine)
    with pytest.raises(ConfigError, match="is not a slipstream Pipeline"):
        registry.get_pipeline("tests.unit.pipelines.test_registry:installed")


def test_the_dashboard_never_imports_a_module_named_by_an_event_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slipstream.app.operate import StateDirResults

    (tmp_path / "planted_module.py").write_text("class X: ...\n")  # importable, on sys.path
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "planted_module", raising=False)
    events = tmp_path / "state" / "events"
    events.mkdir(parents=True)
    (events / "planted_module:X.jsonl").write_text("")
    assert StateDirResults(tmp_path / "state")() is None
    assert "planted_module" not in sys.modules  # not imported
    with pytest.raises(ConfigError, match="no pipeline named"):
        registry.registered_pipeline("planted_module:X")


def test_generate_samples_and_demo_take_their_choices_from_the_registry(
    installed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slipstream.app.cli import main

    assert main(["generate", "mine", "--out", str(tmp_path / "g")]) == 2  # a third party's
    having = ", ".join(sorted(catalog.GENERATORS))  # tools find pipelines by name
    assert f"pipelines with a generator: {having}" in capsys.readouterr().err
    assert set(catalog.GENERATORS) == set(registry.builtin())  # every built-in has one
    assert main(["samples", "trending", "--out", str(tmp_path / "s")]) == 2
    assert "pipelines with samples: mine, mobile" in capsys.readouterr().err  # mine: installed
    assert main(["samples", "mine", "--out", str(tmp_path / "s")]) == 0  # a third party's
    copied = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert copied == [p.name for p in Mine().sample_files()]
    assert main(["demo", "wordcount"]) == 2
    # a demo belongs to the pipeline it names (tools/catalog.py), not to a subclass of it
    assert "pipelines with a demo: mobile, trending" in capsys.readouterr().err
