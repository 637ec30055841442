"""What a real-time trigger changes before Spark starts (no Spark): `--dedup auto` becomes the
form real-time mode runs, an output that offers update mode runs in it, and an output that
offers append only is refused naming real-time mode's reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from slipstream.analysis.validate import settings_violations
from slipstream.core.specs import SinkSpec
from slipstream.runtime import runner
from slipstream.runtime.bound import Prepared
from slipstream.settings.config import load_settings


def _prepared(
    pipeline: str, tmp_path: Path, params: dict[str, str] | None = None, **flags: object
) -> Prepared:
    inputs: list[str] = [str(tmp_path / "in")]
    if pipeline == "trending":
        catalog = tmp_path / "catalog.csv"
        catalog.write_text("article_id,title,section\na1,One,news\n")
        inputs = [f"events={tmp_path / 'in'}", f"catalog={catalog}"]
    (tmp_path / "in").mkdir(exist_ok=True)
    raw = {"input": inputs, "state_dir": tmp_path / "state", **flags}
    settings = load_settings(pipeline, raw, environ={}, params=params)
    return runner.prepare(settings, check_rules=False)


@pytest.mark.parametrize("pipeline", ["trending", "sensors"])
def test_dedup_auto_follows_the_trigger_and_an_explicit_form_stays(
    pipeline: str, tmp_path: Path
) -> None:
    rt = _prepared(pipeline, tmp_path, trigger="real-time:5s")
    assert rt.params["dedup"] == "event-time"
    micro = _prepared(pipeline, tmp_path, trigger="1s")
    assert micro.params["dedup"] == "within-watermark"
    within = {"dedup": "within-watermark"}
    chosen = _prepared(pipeline, tmp_path, within, trigger="real-time:5s")
    assert chosen.params["dedup"] == "within-watermark"
    [note] = rt.pipeline.notes(rt.params)
    assert note.startswith("dedup       dropDuplicates(")


def test_a_real_time_run_defaults_each_output_to_update_where_offered(tmp_path: Path) -> None:
    """sensors' alerts (append by default) and iot_steps into a database (append first) run in
    update mode under a real-time trigger; under a micro-batch trigger they keep append."""
    rt = _prepared("sensors", tmp_path, trigger="real-time:5s")
    assert {n: o.ctx.mode for n, o in rt.outputs.items() if o.is_output} == {
        "sensor_stats": "update",
        "sensor_alerts": "update",
        "sensor_baseline": "update",
    }
    assert _prepared("sensors", tmp_path).outputs["sensor_alerts"].ctx.mode == "append"
    iot = {"sink": f"sqlite:{tmp_path / 'x.db'}"}
    assert (
        _prepared("iot_steps", tmp_path, trigger="real-time:5s", **iot).outputs["steps"].ctx.mode
        == "update"
    )
    assert _prepared("iot_steps", tmp_path, **iot).outputs["steps"].ctx.mode == "append"


def test_an_append_only_output_given_update_under_real_time_says_why() -> None:
    [refused] = settings_violations("update", SinkSpec("sqlite"), ("append",), "real-time")
    assert refused.code == "MODE_NOT_SUPPORTED"
    assert "real-time mode runs update mode only" in refused.message
    [plain] = settings_violations("update", SinkSpec("sqlite"), ("append",))
    assert plain.message == "this output offers modes append; got --mode update"
